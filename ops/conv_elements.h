// The convolution contract per output element (docs/numerics.md "Convolution"), shared by the CPU
// reference kernels (ops/kernels/conv.cpp) and the CUDA kernels (ops/cuda/kernels/conv.cuh): one
// definition of each chain, so both execute the same operation sequence. TRIBUNAL_HD: host and device.
//
// Notation: NCHW, weights [O, C, KH, KW]; tap t = (c·KH + kh)·KW + kw; position q = oh·OW + ow;
// xp(n, c, h, w) = x[n, c, h, w] inside the image, +0.0f outside. Padded taps are terms of every chain.
#pragma once

#include <cstdint>

#include "ops/math.h"
#include "ops/portable.h"

namespace tribunal {

/// The sizes of one convolution: x[N,C,H,W], w[O,C,KH,KW], y[N,O,OH,OW].
struct ConvGeom {
  int64_t n, c, h, w;  // input
  int64_t o, kh, kw;   // weights
  int64_t stride, pad;
  int64_t oh, ow;  // output
  TRIBUNAL_HD int64_t taps() const { return c * kh * kw; }
  TRIBUNAL_HD int64_t positions() const { return oh * ow; }
};

/// xp(n, c, hh, ww): the input, or +0 in the padding.
TRIBUNAL_HD float conv_padded(const float* x, const ConvGeom& g, int64_t n, int64_t c, int64_t hh,
                              int64_t ww) {
  if (hh < 0 || hh >= g.h || ww < 0 || ww >= g.w) return 0.0f;
  return x[((n * g.c + c) * g.h + hh) * g.w + ww];
}

/// The unique output index idx with idx·stride + k − pad = pos, or −1.
TRIBUNAL_HD int64_t conv_source_index(int64_t pos, int64_t k, int64_t stride, int64_t pad, int64_t out) {
  const int64_t d = pos + pad - k;
  if (d < 0 || d % stride != 0) return -1;
  const int64_t idx = d / stride;
  return idx < out ? idx : -1;
}

/// conv2d's y[n,o,oh,ow]: acc = b[o]; for taps t in order: acc = fma(xp(tap t of q), w[o,t], acc).
TRIBUNAL_HD float conv2d_output(const float* x, const float* w, const float* b, const ConvGeom& g, int64_t n,
                                int64_t o, int64_t oh, int64_t ow) {
  float acc = b[o];
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float xv = conv_padded(x, g, n, c, oh * g.stride + i - g.pad, ow * g.stride + j - g.pad);
        acc = fma32(xv, w[((o * g.c + c) * g.kh + i) * g.kw + j], acc);  // padded taps included
      }
  return acc;
}

/// conv2d_backward_input's dx[n,c,h,ww]: +0, then for (kh, kw) row-major whose tap lands on (h, ww):
/// + dcol, where dcol = +0 then acc = fma(w[o,c,kh,kw], dy[n,o,oh,ow], acc) for o = 0..O−1.
TRIBUNAL_HD float conv2d_input_grad(const float* w, const float* dy, const ConvGeom& g, int64_t n, int64_t c,
                                    int64_t h, int64_t ww) {
  float acc = 0.0f;
  for (int64_t i = 0; i < g.kh; ++i) {
    const int64_t oh = conv_source_index(h, i, g.stride, g.pad, g.oh);
    if (oh < 0) continue;
    for (int64_t j = 0; j < g.kw; ++j) {
      const int64_t ow = conv_source_index(ww, j, g.stride, g.pad, g.ow);
      if (ow < 0) continue;
      float dcol = 0.0f;  // dcol[n, (c,i,j), (oh,ow)]: a chain over o from +0
      for (int64_t o = 0; o < g.o; ++o)
        dcol = fma32(w[((o * g.c + c) * g.kh + i) * g.kw + j], dy[((n * g.o + o) * g.oh + oh) * g.ow + ow],
                     dcol);
      acc = acc + dcol;
    }
  }
  return acc;
}

/// conv2d_backward_weight's dw[o,c,i,j]: acc = +0; for (n, oh, ow) in order:
/// acc = fma(dy[n,o,oh,ow], xp(tap (c,i,j) of (oh,ow)), acc).
TRIBUNAL_HD float conv2d_weight_grad(const float* x, const float* dy, const ConvGeom& g, int64_t o, int64_t c,
                                     int64_t i, int64_t j) {
  float acc = 0.0f;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oh = 0; oh < g.oh; ++oh)
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const float xv = conv_padded(x, g, n, c, oh * g.stride + i - g.pad, ow * g.stride + j - g.pad);
        acc = fma32(dy[((n * g.o + o) * g.oh + oh) * g.ow + ow], xv, acc);  // padded taps included
      }
  return acc;
}

}  // namespace tribunal
