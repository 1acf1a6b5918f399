// The convolution contract per output element (docs/numerics.md "Convolution"), shared by the CPU
// reference kernels (ops/kernels/conv.cpp), the float64 kernels (ops/float64/conv.cpp) and the CUDA
// kernels (ops/cuda/kernels/conv.cuh): one definition of each chain, so all execute the same operation
// sequence. TRIBUNAL_HD: host and device.
//
// Notation: NCHW; G groups of Cg = C/G input and Og = O/G output channels; weights [O, Cg, KH, KW];
// output channel o belongs to group o/Og and reads input channels (o/Og)·Cg … + Cg − 1; tap
// t = (c·KH + kh)·KW + kw with c the channel within the group; position q = oh·OW + ow; tap (c, kh, kw)
// of (oh, ow) reads xp(n, (o/Og)·Cg + c, oh·stride_h + kh·dilation_h − pad_top,
// ow·stride_w + kw·dilation_w − pad_left), where xp(n, c, h, w) = x[n, c, h, w] inside the image and
// +0.0f outside. Padded taps are terms of every chain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/math.h"
#include "ops/portable.h"

namespace tribunal {

/// Conv2d's ints: the short form {stride, pad} (one stride, symmetric padding, no dilation, one group)
/// or the general form {stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dilation_h,
/// dilation_w, groups} (ops/registry.h OpKind::Conv2d). The backward ops append two sizes to either.
inline constexpr size_t kConvShortInts = 2, kConvGeneralInts = 9;

/// The sizes of one convolution: x[N,C,H,W], w[O,C/groups,KH,KW], y[N,O,OH,OW].
struct ConvGeom {
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // weights
  int64_t stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dil_h, dil_w, groups;
  int64_t oh, ow;                                        // output
  TRIBUNAL_HD int64_t cg() const { return c / groups; }  // input channels per group
  TRIBUNAL_HD int64_t og() const { return o / groups; }  // output channels per group
  TRIBUNAL_HD int64_t taps() const { return cg() * kh * kw; }
  TRIBUNAL_HD int64_t positions() const { return oh * ow; }
};

/// The geometry of ints in the short (2) or general (9) form, `window` pointing at the first; the
/// output size is (in + pads − ((k − 1)·dilation + 1))/stride + 1 (the caller has validated them).
inline ConvGeom conv_geom_from(const int64_t* window, size_t count, int64_t n, int64_t c, int64_t h,
                               int64_t w, int64_t o, int64_t kh, int64_t kw) {
  ConvGeom g{n, c, h, w, o, kh, kw, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0};
  if (count == kConvGeneralInts) {
    g.stride_h = window[0];
    g.stride_w = window[1];
    g.pad_top = window[2];
    g.pad_left = window[3];
    g.pad_bottom = window[4];
    g.pad_right = window[5];
    g.dil_h = window[6];
    g.dil_w = window[7];
    g.groups = window[8];
  } else {
    g.stride_h = g.stride_w = window[0];
    g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = window[1];
  }
  g.oh = (h + g.pad_top + g.pad_bottom - ((kh - 1) * g.dil_h + 1)) / g.stride_h + 1;
  g.ow = (w + g.pad_left + g.pad_right - ((kw - 1) * g.dil_w + 1)) / g.stride_w + 1;
  return g;
}

/// xp(n, c, hh, ww): the input, or +0 in the padding.
TRIBUNAL_HD float conv_padded(const float* x, const ConvGeom& g, int64_t n, int64_t c, int64_t hh,
                              int64_t ww) {
  if (hh < 0 || hh >= g.h || ww < 0 || ww >= g.w) return 0.0f;
  return x[((n * g.c + c) * g.h + hh) * g.w + ww];
}

/// The unique output index idx with idx·stride + offset − pad = pos (offset = k·dilation), or −1.
TRIBUNAL_HD int64_t conv_source_index(int64_t pos, int64_t offset, int64_t stride, int64_t pad, int64_t out) {
  const int64_t d = pos + pad - offset;
  if (d < 0 || d % stride != 0) return -1;
  const int64_t idx = d / stride;
  return idx < out ? idx : -1;
}

/// conv2d's y[n,o,oh,ow]: acc = b[o]; for taps t of o's group in order: acc = fma(xp(tap t of q),
/// w[o,t], acc).
TRIBUNAL_HD float conv2d_output(const float* x, const float* w, const float* b, const ConvGeom& g, int64_t n,
                                int64_t o, int64_t oh, int64_t ow) {
  const int64_t cg = g.cg(), c0 = o / g.og() * cg;
  float acc = b[o];
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float xv = conv_padded(x, g, n, c0 + c, oh * g.stride_h + i * g.dil_h - g.pad_top,
                                     ow * g.stride_w + j * g.dil_w - g.pad_left);
        acc = fma32(xv, w[((o * cg + c) * g.kh + i) * g.kw + j], acc);  // padded taps included
      }
  return acc;
}

/// conv2d_backward_input's dx[n,c,h,ww]: +0, then for (kh, kw) row-major whose tap lands on (h, ww):
/// + dcol, where dcol = +0 then acc = fma(w[o,c mod Cg,kh,kw], dy[n,o,oh,ow], acc) for the O/G output
/// channels o of c's group in increasing order.
TRIBUNAL_HD float conv2d_input_grad(const float* w, const float* dy, const ConvGeom& g, int64_t n, int64_t c,
                                    int64_t h, int64_t ww) {
  const int64_t cg = g.cg(), og = g.og(), grp = c / cg, cl = c - grp * cg;
  float acc = 0.0f;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t oh = conv_source_index(h, i * g.dil_h, g.stride_h, g.pad_top, g.oh);
    if (oh < 0) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ow = conv_source_index(ww, j * g.dil_w, g.stride_w, g.pad_left, g.ow);
      if (ow < 0) continue;
      float dcol = 0.0f;  // dcol[n, (c,i,j), (oh,ow)]: a chain over the group's o from +0
      for (int64_t o = grp * og; o < (grp + 1) * og; ++o)
        dcol = fma32(w[((o * cg + cl) * g.kh + i) * g.kw + j], dy[((n * g.o + o) * g.oh + oh) * g.ow + ow],
                     dcol);
      acc = acc + dcol;
    }
  }
  return acc;
}

/// conv2d_backward_weight's dw[o,c,i,j] (c within o's group): acc = +0; for (n, oh, ow) in order:
/// acc = fma(dy[n,o,oh,ow], xp(tap (c,i,j) of (oh,ow)), acc).
TRIBUNAL_HD float conv2d_weight_grad(const float* x, const float* dy, const ConvGeom& g, int64_t o, int64_t c,
                                     int64_t i, int64_t j) {
  const int64_t cx = o / g.og() * g.cg() + c;  // the input channel
  float acc = 0.0f;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const float xv = conv_padded(x, g, n, cx, oh * g.stride_h + i * g.dil_h - g.pad_top,
                                     ow * g.stride_w + j * g.dil_w - g.pad_left);
        acc = fma32(dy[((n * g.o + o) * g.oh + oh) * g.ow + ow], xv, acc);  // padded taps included
      }
  return acc;
}

}  // namespace tribunal
