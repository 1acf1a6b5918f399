// 2-D convolution and its three gradients (docs/numerics.md "Ops", conv2d*). NCHW layout, weights
// [O, C/G, KH, KW] for G groups; per-axis strides and dilations, zero padding per side (ops/registry.h
// OpKind::Conv2d: the short form {stride, pad} or the general form of nine ints).
//
// Notation: K = Cg·KH·KW taps per output (Cg = C/G channels of its group), tap t = (c·KH + kh)·KW + kw
// with c within the group (so t runs over (c, kh, kw) in row-major order, which is w[o]'s memory order);
// P = OH·OW output positions, q = oh·OW + ow;
//   xp(n, c, h, w) = x[n, c, h, w] inside the image, +0.0f outside (h or w out of range).
// The tap t of output q of channel o reads xp(n, (o/Og)·Cg + c, oh·stride_h + kh·dilation_h − pad_top,
// ow·stride_w + kw·dilation_w − pad_left).
//
// Contracts (the reference kernels below run them literally, one element at a time, with the per-element
// chains of ops/conv_elements.h, which the CUDA kernels share):
//   conv2d:           y[n,o,q]  = one fma chain: acc = b[o]; for t = 0..K−1: acc = fma(xp(tap t of q),
//                     w[o,t], acc)
//   backward_input:   dcol[n,t,q] = +0 then for the Og filters o of t's group in increasing order:
//                     acc = fma(w[o,t], dy[n,o,q], acc);
//                     dx[n,c,h,w] = +0, then for (kh, kw) row-major, if some (oh, ow) has its tap (c,kh,kw)
//                     at (h, w) (at most one does), dx += dcol[n, (c,kh,kw), (oh,ow)] (one add each)
//   backward_weight:  dw[o,t] = +0 then for (n, q) in order: acc = fma(dy[n,o,q], xp(n, tap t of q), acc)
//   backward_bias:    db[o] = canonical_sum (ops/reduce.h) of the sequence dy[n,o,q], (n, q) in order
//
// Why padded taps are part of the chain: the fast kernels lower convolution to the dot-product GEMM
// (im2col, Chellapilla et al. 2006): the im2col matrix holds a +0.0f wherever a tap falls in the
// padding, and the GEMM runs every element's chain over all K columns. A contract that skipped padded
// taps would need a different chain length per output position, which no GEMM computes. Including
// them is not a no-op in IEEE arithmetic, and the contract says so rather than hiding it:
//  * signed zero: fma(+0, w, acc) adds the exact product ±0 (sign of w); when acc is −0 and w ≥ +0 the
//    sum is +0, so a border output whose chain is −0 up to a padded tap becomes +0 (skipping the tap
//    would leave −0);
//  * non-finite weights: 0·inf is NaN, so an infinite weight poisons every output that has that tap in
//    the padding (a skipped tap would not).
// The same holds for conv2d_backward_weight (padded taps are +0 terms of the chain).
//
// Fast kernels: im2col + the packed GEMM of ops/kernels/matmul.h, arranged so that each output is
// exactly the chain above (checked bitwise against the references in tests/ops/test_ops_conv.cpp):
//  * conv2d, per image and group:   T[q, o] = Σ_t colsᵀ(q, t)·wᵀ(t, o) with bias b (the GEMM's chain
//    starts at bias[o] and runs t = 0..K−1), then y[n, o, q] = T[q, o] (a transpose: exact copies);
//  * backward_input, per image and group: dcol[t, q] = Σ_o wᵀ(t, o)·dy[n](o, q) from +0, then col2im
//    in (c, kh, kw) order, so each dx element receives its adds in (kh, kw) row-major order;
//  * backward_weight: cols of the whole batch as [G·K, N·P] (column n·P + q), dy regrouped as
//    [O, N·P]; per group dwᵀ = cols·dy'ᵀ, one GEMM whose chain index p = n·P + q runs over (n, oh, ow)
//    in order;
//  * backward_bias: per o, the 32 lane accumulators of the canonical sum fed in (n, q) order.
// Threads split independent images (conv2d, backward_input), output blocks (inside the GEMM) or
// output channels (backward_bias); never one element's chain.
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstring>
#include <string>
#include <vector>

#include "ops/conv_elements.h"
#include "ops/kernels/matmul.h"
#include "ops/kernels/op_table.h"
#include "ops/kernels/scratch.h"
#include "ops/reduce.h"

namespace tribunal {
namespace {

/// A one-thread pool for GEMMs run inside another pool's task (ThreadPool is not reentrant; a
/// one-thread pool runs everything on the caller and touches no shared state).
ThreadPool& serial_pool() {
  thread_local ThreadPool serial(1);
  return serial;
}

// Below this many multiply-adds per thread, waking another thread costs more than it saves (the
// same measurement as matmul.cpp's kMinFmaPerThread: ~25-55 µs per parallel_for round trip).
constexpr int64_t kMinFmaPerThread = int64_t{1} << 20;

// Attribute bounds: keep every index product far from int64 overflow (shapes themselves are bounded
// by memory). A stride or image size of 2^24 is already absurd for this engine.
constexpr int64_t kMaxAttr = int64_t{1} << 24;

/// The sizes of one convolution (ops/conv_elements.h, shared with the CUDA kernels).
using Geom = ConvGeom;

/// Output size along one axis for a kernel of extent e = (k − 1)·dilation + 1, or an OpError naming the op.
int64_t out_size(const char* op, const char* axis, int64_t in, int64_t extent, int64_t stride, int64_t pad_a,
                 int64_t pad_b) {
  op_require(in + pad_a + pad_b >= extent, op,
             std::string("kernel ") + axis + " extent " + std::to_string(extent) +
                 " exceeds the padded input " + std::to_string(in) + " + " + std::to_string(pad_a) + " + " +
                 std::to_string(pad_b));
  return (in + pad_a + pad_b - extent) / stride + 1;
}

bool all_positive(const Shape& s) {
  for (int64_t d : s.dims())
    if (d < 1) return false;
  return true;
}

/// The ints of a node in the short or general form: `extra` sizes after the window (0 for conv2d, 2 for
/// the gradients), or an OpError naming the op.
void check_int_count(const char* op, const Attrs& a, size_t extra) {
  op_require(a.ints.size() == kConvShortInts + extra || a.ints.size() == kConvGeneralInts + extra, op,
             "expects " + std::to_string(kConvShortInts + extra) + " or " +
                 std::to_string(kConvGeneralInts + extra) + " integer attributes, got " +
                 std::to_string(a.ints.size()));
}

/// The geometry of the window ints (a.ints minus `extra` trailing sizes) for x[N,C,H,W] and a kernel
/// [O, C/groups, KH, KW]: checks strides, dilations and pads (each pad smaller than its kernel extent
/// (KH − 1)·dilation + 1, which keeps every window overlapping the image: a window of padding only would be
/// a constant the graph should not compute), the group count against C and O, and the output size.
Geom window_geom(const char* op, const Attrs& a, size_t extra, int64_t n, int64_t c, int64_t h, int64_t w,
                 int64_t o, int64_t kh, int64_t kw) {
  const size_t count = a.ints.size() - extra;
  const int64_t* v = a.ints.data();
  if (count == kConvShortInts) {
    const int64_t stride = v[0], pad = v[1];
    op_require(stride >= 1 && stride <= kMaxAttr, op,
               "stride must be in [1, 2^24], got " + std::to_string(stride));
    op_require(pad >= 0 && pad < kh && pad < kw, op,
               "pad must be ≥ 0 and smaller than the kernel " + std::to_string(kh) + "×" +
                   std::to_string(kw) + ", got " + std::to_string(pad));
  } else {
    for (int k : {0, 1, 6, 7})
      op_require(
          v[k] >= 1 && v[k] <= kMaxAttr, op,
          std::string(k < 2 ? "stride" : "dilation") + " must be in [1, 2^24], got " + std::to_string(v[k]));
    op_require(kh <= kMaxAttr && kw <= kMaxAttr, op, "kernel sides must be ≤ 2^24");
    const int64_t eh = (kh - 1) * v[6] + 1, ew = (kw - 1) * v[7] + 1;
    for (int k : {2, 3, 4, 5}) {
      const int64_t extent = k % 2 == 0 ? eh : ew;
      op_require(v[k] >= 0 && v[k] < extent, op,
                 "pads must be ≥ 0 and smaller than the kernel extent " + std::to_string(eh) + "×" +
                     std::to_string(ew) + ", got " + std::to_string(v[k]));
    }
    op_require(v[8] >= 1 && c % v[8] == 0 && o % v[8] == 0, op,
               "groups " + std::to_string(v[8]) + " must be ≥ 1 and divide C = " + std::to_string(c) +
                   " and O = " + std::to_string(o));
  }
  Geom g = conv_geom_from(v, count, n, c, h, w, o, kh, kw);
  g.oh = out_size(op, "height", h, (kh - 1) * g.dil_h + 1, g.stride_h, g.pad_top, g.pad_bottom);
  g.ow = out_size(op, "width", w, (kw - 1) * g.dil_w + 1, g.stride_w, g.pad_left, g.pad_right);
  return g;
}

/// Geometry of a conv2d node: x[N,C,H,W], w[O,C/G,KH,KW], b[O]; ints {stride, pad} or the general 9.
Geom conv_geom(const Attrs& a, const Shape& x, const Shape& w, const Shape& b) {
  const char* op = "conv2d";
  check_int_count(op, a, 0);
  op_require(x.rank() == 4 && w.rank() == 4 && b.rank() == 1, op,
             "needs x[N,C,H,W], w[O,C/groups,KH,KW], b[O]; got " + x.str() + ", " + w.str() + ", " + b.str());
  op_require(all_positive(x) && all_positive(w), op,
             "sizes must be ≥ 1, got x " + x.str() + ", w " + w.str());
  const int64_t groups = a.ints.size() == kConvGeneralInts ? a.ints[8] : 1;
  op_require(groups >= 1 && groups <= kMaxAttr, op,
             "groups must be in [1, 2^24], got " + std::to_string(groups));
  op_require(
      x[1] == w[1] * groups, op,
      "channels disagree: x " + x.str() + ", w " + w.str() + " with " + std::to_string(groups) + " groups");
  op_require(b[0] == w[0], op, "bias " + b.str() + " does not match O of w " + w.str());
  return window_geom(op, a, 0, x[0], x[1], x[2], x[3], w[0], w[2], w[3]);
}

/// Geometry of conv2d_backward_input: w[O,C/G,KH,KW], dy[N,O,OH,OW]; ints {forward's…, H, W}.
Geom backward_input_geom(const Attrs& a, const Shape& w, const Shape& dy) {
  const char* op = "conv2d_backward_input";
  check_int_count(op, a, 2);
  op_require(w.rank() == 4 && dy.rank() == 4, op,
             "needs w[O,C/groups,KH,KW], dy[N,O,OH,OW]; got " + w.str() + ", " + dy.str());
  op_require(all_positive(w) && all_positive(dy), op,
             "sizes must be ≥ 1, got w " + w.str() + ", dy " + dy.str());
  op_require(dy[1] == w[0], op, "output channels disagree: w " + w.str() + ", dy " + dy.str());
  const size_t m = a.ints.size();
  const int64_t h = a.ints[m - 2], wd = a.ints[m - 1];
  op_require(h >= 1 && wd >= 1 && h <= kMaxAttr && wd <= kMaxAttr, op,
             "H and W must be in [1, 2^24], got " + std::to_string(h) + ", " + std::to_string(wd));
  const int64_t groups = m == kConvGeneralInts + 2 ? a.ints[8] : 1;
  op_require(groups >= 1 && groups <= kMaxAttr, op,
             "groups must be in [1, 2^24], got " + std::to_string(groups));
  const Geom g = window_geom(op, a, 2, dy[0], w[1] * groups, h, wd, w[0], w[2], w[3]);
  op_require(g.oh == dy[2] && g.ow == dy[3], op,
             "dy " + dy.str() + " is not the output size " + std::to_string(g.oh) + "×" +
                 std::to_string(g.ow) + " of a " + std::to_string(h) + "×" + std::to_string(wd) + " input");
  return g;
}

/// Geometry of conv2d_backward_weight: x[N,C,H,W], dy[N,O,OH,OW]; ints {forward's…, KH, KW}.
Geom backward_weight_geom(const Attrs& a, const Shape& x, const Shape& dy) {
  const char* op = "conv2d_backward_weight";
  check_int_count(op, a, 2);
  op_require(x.rank() == 4 && dy.rank() == 4, op,
             "needs x[N,C,H,W], dy[N,O,OH,OW]; got " + x.str() + ", " + dy.str());
  op_require(all_positive(x) && all_positive(dy), op,
             "sizes must be ≥ 1, got x " + x.str() + ", dy " + dy.str());
  op_require(dy[0] == x[0], op, "batch sizes disagree: x " + x.str() + ", dy " + dy.str());
  const size_t m = a.ints.size();
  const int64_t kh = a.ints[m - 2], kw = a.ints[m - 1];
  op_require(kh >= 1 && kw >= 1 && kh <= kMaxAttr && kw <= kMaxAttr, op,
             "KH and KW must be in [1, 2^24], got " + std::to_string(kh) + ", " + std::to_string(kw));
  const Geom g = window_geom(op, a, 2, x[0], x[1], x[2], x[3], dy[1], kh, kw);
  op_require(g.oh == dy[2] && g.ow == dy[3], op,
             "dy " + dy.str() + " is not the output size " + std::to_string(g.oh) + "×" +
                 std::to_string(g.ow) + " of x " + x.str() + " with a " + std::to_string(kh) + "×" +
                 std::to_string(kw) + " kernel");
  return g;
}

/// Copies image n into xpad[C, H + pad_top + pad_bottom, W + pad_left + pad_right] with a border of +0:
/// the padded input xp.
void pad_image(const float* x, const Geom& g, int64_t n, float* xpad) {
  const int64_t hp = g.h + g.pad_top + g.pad_bottom, wp = g.w + g.pad_left + g.pad_right;
  std::fill(xpad, xpad + g.c * hp * wp, 0.0f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t hh = 0; hh < g.h; ++hh)
      std::memcpy(xpad + (c * hp + hh + g.pad_top) * wp + g.pad_left, x + ((n * g.c + c) * g.h + hh) * g.w,
                  sizeof(float) * static_cast<size_t>(g.w));
}

/// im2col of image n: cols[t·ld + col0 + q] = xp(n, tap t of position q) for every channel's taps
/// t = (c·KH + kh)·KW + kw (c over all C input channels, so group gr's taps are the Cg·KH·KW rows from
/// gr·Cg·KH·KW) and every position q. Pure copies (of the image or of the +0 border), so the layout
/// cannot change a result. Reads a padded copy of the image, so the inner loops are branch-free copies.
void im2col(const float* x, const Geom& g, int64_t n, float* cols, int64_t ld, int64_t col0) {
  thread_local ScratchBuffer pad_buf;
  const int64_t hp = g.h + g.pad_top + g.pad_bottom, wp = g.w + g.pad_left + g.pad_right;
  const int64_t sh = g.stride_h, sw = g.stride_w;
  float* xpad = scratch(pad_buf, g.c * hp * wp);
  pad_image(x, g, n, xpad);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = cols + ((c * g.kh + i) * g.kw + j) * ld + col0;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          // xp(n, c, oh·sh + i·dh − pad_top, j·dw − pad_left + ow·sw)
          const float* src = xpad + (c * hp + oh * sh + i * g.dil_h) * wp + j * g.dil_w;
          float* dst = row + oh * g.ow;
          if (sw == 1) {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow] = src[ow];
          } else {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow] = src[ow * sw];
          }
        }
      }
}

/// Grain (in images) so that each thread gets at least kMinFmaPerThread multiply-adds.
int64_t image_grain(const Geom& g) {
  const int64_t per_image = std::max<int64_t>(1, g.positions() * g.o * g.taps());
  return std::max<int64_t>(1, kMinFmaPerThread / per_image);
}

/// Runs fn(n, gemm_pool) for every image n: over images on the pool's threads (each image's GEMM on
/// its own thread) when there are several images, else on the caller with the GEMM using the pool.
template <class Fn>
void for_each_image(const Geom& g, ThreadPool& pool, Fn fn) {
  if (g.n == 1 || pool.size() == 1) {
    for (int64_t n = 0; n < g.n; ++n) fn(n, pool);
    return;
  }
  pool.parallel_for(
      g.n,
      [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) fn(n, serial_pool());
      },
      image_grain(g));
}

// ---- Conv2d ----------------------------------------------------------------------------------------

std::vector<Shape> conv_infer(const Attrs& a, std::span<const Shape> in) {
  const Geom g = conv_geom(a, in[0], in[1], in[2]);
  return {Shape{g.n, g.o, g.oh, g.ow}};
}

void conv_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Geom g = conv_geom(a, in[0]->shape(), in[1]->shape(), in[2]->shape());
  const float *x = in[0]->data(), *w = in[1]->data(), *b = in[2]->data();
  float* y = out[0]->data();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t oh = 0; oh < g.oh; ++oh)
        for (int64_t ow = 0; ow < g.ow; ++ow)
          y[((n * g.o + o) * g.oh + oh) * g.ow + ow] = conv2d_output(x, w, b, g, n, o, oh, ow);
}

void conv_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
               ThreadPool& pool) {
  const Geom g = conv_geom(a, in[0]->shape(), in[1]->shape(), in[2]->shape());
  const float *x = in[0]->data(), *w = in[1]->data(), *b = in[2]->data();
  float* y = out[0]->data();
  const int64_t k = g.taps(), p = g.positions(), og = g.og();
  for_each_image(g, pool, [&](int64_t n, ThreadPool& gemm_pool) {
    thread_local ScratchBuffer cols_buf, t_buf;
    float* cols = scratch(cols_buf, g.groups * k * p);
    float* t = scratch(t_buf, p * og);
    im2col(x, g, n, cols, p, 0);
    for (int64_t gr = 0; gr < g.groups; ++gr) {
      // Group gr: T[q, o] = bias[o] + Σ_t cols[t, q]·w[o, t] over its K taps and Og filters: A = colsᵀ
      // (trans_a, M = P), B = wᵀ (trans_b, w's rows gr·Og … are [Og, K]).
      matmul(MatmulArgs{cols + gr * k * p, w + gr * og * k, b + gr * og, t, p, og, k, true, true}, gemm_pool);
      float* yn = y + (n * g.o + gr * og) * p;
      for (int64_t q = 0; q < p; ++q)
        for (int64_t o = 0; o < og; ++o) yn[o * p + q] = t[q * og + o];
    }
  });
}

// The gradient nodes take the forward's ints plus H, W or KH, KW: dy alone does not determine them when
// a stride is > 1. The short form's gradients keep the short form ({stride, pad, ·, ·}).
void conv_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const ValueRef x = a.inputs[0], w = a.inputs[1], dy = a.out_grads[0];
  const auto with = [&](int64_t s0, int64_t s1) {
    std::vector<int64_t> ints = a.attrs.ints;
    ints.push_back(s0);
    ints.push_back(s1);
    return Attrs{std::move(ints), {}};
  };
  if (a.needs_grad[0]) {
    const Shape xs = g.shape(x);
    in_grads[0] = g.emit(OpKind::Conv2dBackwardInput, with(xs[2], xs[3]), {w, dy});
  }
  if (a.needs_grad[1]) {
    const Shape ws = g.shape(w);
    in_grads[1] = g.emit(OpKind::Conv2dBackwardWeight, with(ws[2], ws[3]), {x, dy});
  }
  if (a.needs_grad[2]) in_grads[2] = g.emit(OpKind::Conv2dBackwardBias, {}, {dy});
}

// ---- Conv2dBackwardInput ---------------------------------------------------------------------------

std::vector<Shape> backward_input_infer(const Attrs& a, std::span<const Shape> in) {
  const Geom g = backward_input_geom(a, in[0], in[1]);
  return {Shape{g.n, g.c, g.h, g.w}};
}

void backward_input_reference(const Attrs& a, std::span<const Tensor* const> in,
                              std::span<Tensor* const> out) {
  const Geom g = backward_input_geom(a, in[0]->shape(), in[1]->shape());
  const float *w = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t h = 0; h < g.h; ++h)
        for (int64_t ww = 0; ww < g.w; ++ww)
          dx[((n * g.c + c) * g.h + h) * g.w + ww] = conv2d_input_grad(w, dy, g, n, c, h, ww);
}

/// col2im of image n: dx[c] = +0, then for each tap (c, kh, kw) in order, every position q adds
/// dcol[t, q] to the pixel its tap lands on (dcol's rows run over all C channels' taps, as im2col's).
/// For one tap two positions never land on the same pixel, so every pixel receives its adds in
/// (kh, kw) row-major order, as the contract says. The adds go into a padded plane (so the loops need
/// no bounds checks); taps landing in the border accumulate there and are dropped, exactly as the
/// contract never adds them to an image pixel.
void col2im(const float* dcol, const Geom& g, float* dxn) {
  thread_local ScratchBuffer pad_buf;
  const int64_t hp = g.h + g.pad_top + g.pad_bottom, wp = g.w + g.pad_left + g.pad_right;
  const int64_t sh = g.stride_h, sw = g.stride_w, p = g.positions();
  float* dpad = scratch(pad_buf, hp * wp);
  for (int64_t c = 0; c < g.c; ++c) {
    std::fill(dpad, dpad + hp * wp, 0.0f);
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float* row = dcol + ((c * g.kh + i) * g.kw + j) * p;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          float* dst = dpad + (oh * sh + i * g.dil_h) * wp + j * g.dil_w;
          const float* src = row + oh * g.ow;
          if (sw == 1) {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow] = dst[ow] + src[ow];
          } else {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow * sw] = dst[ow * sw] + src[ow];
          }
        }
      }
    for (int64_t hh = 0; hh < g.h; ++hh)
      std::memcpy(dxn + (c * g.h + hh) * g.w, dpad + (hh + g.pad_top) * wp + g.pad_left,
                  sizeof(float) * static_cast<size_t>(g.w));
  }
}

void backward_input_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                         ThreadPool& pool) {
  const Geom g = backward_input_geom(a, in[0]->shape(), in[1]->shape());
  const float *w = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  const int64_t k = g.taps(), p = g.positions(), og = g.og();
  for_each_image(g, pool, [&](int64_t n, ThreadPool& gemm_pool) {
    thread_local ScratchBuffer dcol_buf;
    float* dcol = scratch(dcol_buf, g.groups * k * p);
    // Group gr's taps: dcol[t, q] = Σ_o w[o, t]·dy[n, o, q] from +0 over its Og filters: A = wᵀ (trans_a;
    // w's rows gr·Og … are [Og, K]), B = dy[n]'s rows gr·Og … as [Og, P].
    for (int64_t gr = 0; gr < g.groups; ++gr)
      matmul(MatmulArgs{w + gr * og * k, dy + (n * g.o + gr * og) * p, nullptr, dcol + gr * k * p, k, p, og,
                        true, false},
             gemm_pool);
    col2im(dcol, g, dx + n * g.c * g.h * g.w);
  });
}

// ---- Conv2dBackwardWeight --------------------------------------------------------------------------

std::vector<Shape> backward_weight_infer(const Attrs& a, std::span<const Shape> in) {
  const Geom g = backward_weight_geom(a, in[0], in[1]);
  return {Shape{g.o, g.cg(), g.kh, g.kw}};
}

void backward_weight_reference(const Attrs& a, std::span<const Tensor* const> in,
                               std::span<Tensor* const> out) {
  const Geom g = backward_weight_geom(a, in[0]->shape(), in[1]->shape());
  const float *x = in[0]->data(), *dy = in[1]->data();
  float* dw = out[0]->data();
  for (int64_t o = 0; o < g.o; ++o)
    for (int64_t c = 0; c < g.cg(); ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j)
          dw[((o * g.cg() + c) * g.kh + i) * g.kw + j] = conv2d_weight_grad(x, dy, g, o, c, i, j);
}

void backward_weight_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                          ThreadPool& pool) {
  const Geom g = backward_weight_geom(a, in[0]->shape(), in[1]->shape());
  const float *x = in[0]->data(), *dy = in[1]->data();
  const int64_t k = g.taps(), p = g.positions(), np = g.n * p, og = g.og();
  thread_local ScratchBuffer cols_buf, dyr_buf;
  float* cols = scratch(cols_buf, g.groups * k * np);  // [G·K, N·P], column n·P + q
  float* dyr = scratch(dyr_buf, g.o * np);             // [O, N·P]
  const int64_t copy_grain =
      std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, (g.groups * k + g.o) * p));
  pool.parallel_for(
      g.n,
      [&](int64_t n0, int64_t n1) {
        for (int64_t n = n0; n < n1; ++n) {
          im2col(x, g, n, cols, np, n * p);
          for (int64_t o = 0; o < g.o; ++o)
            std::memcpy(dyr + o * np + n * p, dy + (n * g.o + o) * p, sizeof(float) * static_cast<size_t>(p));
        }
      },
      copy_grain);
  // dwᵀ[t, o] = Σ_{p = n·P + q} cols[t, p]·dyr[o, p] from +0 (A = cols, B = dyrᵀ via trans_b): the chain
  // over p in order, with the factors of each product swapped (exact). This orientation packs the
  // small dyr instead of transposing the whole batch's cols: 2.5× faster than dw = dyr·colsᵀ.
  // One GEMM per group: its K rows of cols against its Og rows of dyr.
  thread_local ScratchBuffer dwt_buf;
  float* dwt = scratch(dwt_buf, k * og);
  float* dw = out[0]->data();
  for (int64_t gr = 0; gr < g.groups; ++gr) {
    matmul(MatmulArgs{cols + gr * k * np, dyr + gr * og * np, nullptr, dwt, k, og, np, false, true}, pool);
    float* dwg = dw + gr * og * k;
    for (int64_t t = 0; t < k; ++t)
      for (int64_t o = 0; o < og; ++o) dwg[o * k + t] = dwt[t * og + o];
  }
}

// ---- Conv2dBackwardBias ----------------------------------------------------------------------------

std::vector<Shape> backward_bias_infer(const Attrs&, std::span<const Shape> in) {
  op_require(in[0].rank() == 4 && all_positive(in[0]), "conv2d_backward_bias",
             "needs dy[N,O,OH,OW] with sizes ≥ 1, got " + in[0].str());
  return {Shape{in[0][1]}};
}

void backward_bias_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& s = in[0]->shape();
  const int64_t n = s[0], o = s[1], p = s[2] * s[3];
  std::vector<float> seq(static_cast<size_t>(n * p));
  for (int64_t oc = 0; oc < o; ++oc) {
    for (int64_t b = 0; b < n; ++b)  // the sequence (n, oh, ow) of channel oc, in order
      for (int64_t q = 0; q < p; ++q) seq[static_cast<size_t>(b * p + q)] = (*in[0])[(b * o + oc) * p + q];
    (*out[0])[oc] = canonical_sum(seq.data(), n * p);
  }
}

void backward_bias_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                        ThreadPool& pool) {
  const Shape& s = in[0]->shape();
  const int64_t n = s[0], o = s[1], p = s[2] * s[3];
  const float* dy = in[0]->data();
  float* db = out[0]->data();
  pool.parallel_for(
      o,
      [&](int64_t o0, int64_t o1) {
        for (int64_t oc = o0; oc < o1; ++oc) {
          // ops/reduce.h's canonical sum, fed without gathering: element i of the sequence goes to lane i
          // mod 32.
          float lane[kReduceLanes] = {};
          int l = 0;
          for (int64_t b = 0; b < n; ++b) {
            const float* src = dy + (b * o + oc) * p;
            int64_t q = 0;
            for (; q < p && l != 0; ++q, l = (l + 1) % kReduceLanes) lane[l] = lane[l] + src[q];
            for (; q + kReduceLanes <= p; q += kReduceLanes)  // whole lane rounds: lane j += src[q + j]
              for (int j = 0; j < kReduceLanes; ++j) lane[j] = lane[j] + src[q + j];
            for (; q < p; ++q, l = (l + 1) % kReduceLanes) lane[l] = lane[l] + src[q];
          }
          for (int wdt = kReduceLanes / 2; wdt >= 1; wdt /= 2)
            for (int j = 0; j < wdt; ++j) lane[j] = lane[j] + lane[j + wdt];
          db[oc] = lane[0];
        }
      },
      std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, n * p)));  // ≥ 2^18 adds per thread
}

// The dispute cost's fma chain per output element (OpInfo::fma_chain).
uint64_t conv2d_fma_chain(const Attrs&, std::span<const Shape> in) {  // w[O,C,KH,KW]: C·KH·KW taps
  return static_cast<uint64_t>(in[1][1] * in[1][2] * in[1][3]);
}
uint64_t backward_input_fma_chain(const Attrs& a, std::span<const Shape> in) {  // ≤ (O/G)·KH·KW taps of w
  const int64_t groups = a.ints.size() == kConvGeneralInts + 2 ? a.ints[8] : 1;
  return static_cast<uint64_t>(in[0][0] / groups * in[0][2] * in[0][3]);
}
uint64_t backward_weight_fma_chain(const Attrs&, std::span<const Shape> in) {  // N·OH·OW of dy
  return static_cast<uint64_t>(in[1][0] * in[1][2] * in[1][3]);
}

}  // namespace

const OpInfo kConv2dOp{.kind = OpKind::Conv2d,
                       .name = "conv2d",
                       .num_inputs = 3,
                       .num_outputs = 1,
                       .num_ints = -1,
                       .num_floats = 0,
                       .infer = conv_infer,
                       .reference = conv_reference,
                       .fast = conv_fast,
                       .vjp = conv_vjp,
                       .float64 = f64::conv2d,
                       .float64_spread = Float64Spread::Sum,
                       .fma_chain = conv2d_fma_chain,
                       .quanta = f64::conv2d_quanta};
const OpInfo kConv2dBackwardInputOp{.kind = OpKind::Conv2dBackwardInput,
                                    .name = "conv2d_backward_input",
                                    .num_inputs = 2,
                                    .num_outputs = 1,
                                    .num_ints = -1,
                                    .num_floats = 0,
                                    .infer = backward_input_infer,
                                    .reference = backward_input_reference,
                                    .fast = backward_input_fast,
                                    .vjp = nullptr,
                                    .float64 = f64::conv2d_backward_input,
                                    .float64_spread = Float64Spread::Sum,
                                    .fma_chain = backward_input_fma_chain,
                                    .quanta = f64::conv2d_backward_input_quanta};
const OpInfo kConv2dBackwardWeightOp{.kind = OpKind::Conv2dBackwardWeight,
                                     .name = "conv2d_backward_weight",
                                     .num_inputs = 2,
                                     .num_outputs = 1,
                                     .num_ints = -1,
                                     .num_floats = 0,
                                     .infer = backward_weight_infer,
                                     .reference = backward_weight_reference,
                                     .fast = backward_weight_fast,
                                     .vjp = nullptr,
                                     .float64 = f64::conv2d_backward_weight,
                                     .float64_spread = Float64Spread::Sum,
                                     .fma_chain = backward_weight_fma_chain,
                                     .quanta = f64::conv2d_backward_weight_quanta};
const OpInfo kConv2dBackwardBiasOp{.kind = OpKind::Conv2dBackwardBias,
                                   .name = "conv2d_backward_bias",
                                   .num_inputs = 1,
                                   .num_outputs = 1,
                                   .num_ints = 0,
                                   .num_floats = 0,
                                   .infer = backward_bias_infer,
                                   .reference = backward_bias_reference,
                                   .fast = backward_bias_fast,
                                   .vjp = nullptr,
                                   .float64 = f64::conv2d_backward_bias,
                                   .float64_spread = Float64Spread::Sum};

}  // namespace tribunal
