// 2-D convolution and its three gradients (docs/numerics.md "Ops", conv2d*). NCHW layout, weights
// [O, C, KH, KW], square stride and symmetric zero padding, no dilation or groups.
//
// Notation: K = C·KH·KW taps per output, tap t = (c·KH + kh)·KW + kw (so t runs over (c, kh, kw) in
// row-major order, which is w[o]'s memory order); P = OH·OW output positions, q = oh·OW + ow;
//   xp(n, c, h, w) = x[n, c, h, w] inside the image, +0.0f outside (h or w out of range).
// The tap t of output q reads xp(n, c, oh·stride + kh − pad, ow·stride + kw − pad).
//
// Contracts (the reference kernels below run them literally, one element at a time, with the per-element
// chains of ops/conv_elements.h, which the CUDA kernels share):
//   conv2d:           y[n,o,q]  = one fma chain: acc = b[o]; for t = 0..K−1: acc = fma(xp(tap t of q),
//   w[o,t], acc) backward_input:   dcol[n,t,q] = +0 then for o = 0..O−1: acc = fma(w[o,t], dy[n,o,q], acc);
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
//  * conv2d, per image:   T[q, o] = Σ_t colsᵀ(q, t)·wᵀ(t, o) with bias b (the GEMM's chain starts at
//    bias[o] and runs t = 0..K−1), then y[n, o, q] = T[q, o] (a transpose: exact copies);
//  * backward_input, per image: dcol[t, q] = Σ_o wᵀ(t, o)·dy[n](o, q) from +0, then col2im in
//    (c, kh, kw) order, so each dx element receives its adds in (kh, kw) row-major order;
//  * backward_weight: cols of the whole batch as [K, N·P] (column n·P + q), dy regrouped as
//    [O, N·P]; dwᵀ = cols·dy'ᵀ, one GEMM whose chain index p = n·P + q runs over (n, oh, ow) in order;
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
#include "ops/reduce.h"

namespace tribunal {
namespace {

using Buffer = std::vector<float, AlignedAllocator<float>>;

float* scratch(Buffer& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

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

/// Output size along one axis, or an OpError naming the op.
int64_t out_size(const char* op, const char* axis, int64_t in, int64_t k, int64_t stride, int64_t pad) {
  op_require(in + 2 * pad >= k, op,
             std::string("kernel ") + axis + " = " + std::to_string(k) + " exceeds the padded input " +
                 std::to_string(in) + " + 2·" + std::to_string(pad));
  return (in + 2 * pad - k) / stride + 1;
}

/// Checks stride, pad and the kernel size against each other. pad < kernel keeps every window
/// overlapping the image (a window of padding only would be a constant the graph should not compute).
void check_window(const char* op, int64_t stride, int64_t pad, int64_t kh, int64_t kw) {
  op_require(stride >= 1 && stride <= kMaxAttr, op,
             "stride must be in [1, 2^24], got " + std::to_string(stride));
  op_require(pad >= 0 && pad < kh && pad < kw, op,
             "pad must be ≥ 0 and smaller than the kernel " + std::to_string(kh) + "×" + std::to_string(kw) +
                 ", got " + std::to_string(pad));
}

bool all_positive(const Shape& s) {
  for (int64_t d : s.dims())
    if (d < 1) return false;
  return true;
}

/// Geometry of a conv2d node: x[N,C,H,W], w[O,C,KH,KW], b[O]; ints {stride, pad}.
Geom conv_geom(const Attrs& a, const Shape& x, const Shape& w, const Shape& b) {
  const char* op = "conv2d";
  op_require(x.rank() == 4 && w.rank() == 4 && b.rank() == 1, op,
             "needs x[N,C,H,W], w[O,C,KH,KW], b[O]; got " + x.str() + ", " + w.str() + ", " + b.str());
  op_require(all_positive(x) && all_positive(w), op,
             "sizes must be ≥ 1, got x " + x.str() + ", w " + w.str());
  op_require(x[1] == w[1], op, "channels disagree: x " + x.str() + ", w " + w.str());
  op_require(b[0] == w[0], op, "bias " + b.str() + " does not match O of w " + w.str());
  check_window(op, a.ints[0], a.ints[1], w[2], w[3]);
  Geom g{x[0], x[1], x[2], x[3], w[0], w[2], w[3], a.ints[0], a.ints[1], 0, 0};
  g.oh = out_size(op, "height", g.h, g.kh, g.stride, g.pad);
  g.ow = out_size(op, "width", g.w, g.kw, g.stride, g.pad);
  return g;
}

/// Geometry of conv2d_backward_input: w[O,C,KH,KW], dy[N,O,OH,OW]; ints {stride, pad, H, W}.
Geom backward_input_geom(const Attrs& a, const Shape& w, const Shape& dy) {
  const char* op = "conv2d_backward_input";
  op_require(w.rank() == 4 && dy.rank() == 4, op,
             "needs w[O,C,KH,KW], dy[N,O,OH,OW]; got " + w.str() + ", " + dy.str());
  op_require(all_positive(w) && all_positive(dy), op,
             "sizes must be ≥ 1, got w " + w.str() + ", dy " + dy.str());
  op_require(dy[1] == w[0], op, "output channels disagree: w " + w.str() + ", dy " + dy.str());
  check_window(op, a.ints[0], a.ints[1], w[2], w[3]);
  const int64_t h = a.ints[2], wd = a.ints[3];
  op_require(h >= 1 && wd >= 1 && h <= kMaxAttr && wd <= kMaxAttr, op,
             "H and W must be in [1, 2^24], got " + std::to_string(h) + ", " + std::to_string(wd));
  Geom g{dy[0], w[1], h, wd, w[0], w[2], w[3], a.ints[0], a.ints[1], 0, 0};
  g.oh = out_size(op, "height", g.h, g.kh, g.stride, g.pad);
  g.ow = out_size(op, "width", g.w, g.kw, g.stride, g.pad);
  op_require(g.oh == dy[2] && g.ow == dy[3], op,
             "dy " + dy.str() + " is not the output size " + std::to_string(g.oh) + "×" +
                 std::to_string(g.ow) + " of a " + std::to_string(h) + "×" + std::to_string(wd) + " input");
  return g;
}

/// Geometry of conv2d_backward_weight: x[N,C,H,W], dy[N,O,OH,OW]; ints {stride, pad, KH, KW}.
Geom backward_weight_geom(const Attrs& a, const Shape& x, const Shape& dy) {
  const char* op = "conv2d_backward_weight";
  op_require(x.rank() == 4 && dy.rank() == 4, op,
             "needs x[N,C,H,W], dy[N,O,OH,OW]; got " + x.str() + ", " + dy.str());
  op_require(all_positive(x) && all_positive(dy), op,
             "sizes must be ≥ 1, got x " + x.str() + ", dy " + dy.str());
  op_require(dy[0] == x[0], op, "batch sizes disagree: x " + x.str() + ", dy " + dy.str());
  const int64_t kh = a.ints[2], kw = a.ints[3];
  op_require(kh >= 1 && kw >= 1 && kh <= kMaxAttr && kw <= kMaxAttr, op,
             "KH and KW must be in [1, 2^24], got " + std::to_string(kh) + ", " + std::to_string(kw));
  check_window(op, a.ints[0], a.ints[1], kh, kw);
  Geom g{x[0], x[1], x[2], x[3], dy[1], kh, kw, a.ints[0], a.ints[1], 0, 0};
  g.oh = out_size(op, "height", g.h, g.kh, g.stride, g.pad);
  g.ow = out_size(op, "width", g.w, g.kw, g.stride, g.pad);
  op_require(g.oh == dy[2] && g.ow == dy[3], op,
             "dy " + dy.str() + " is not the output size " + std::to_string(g.oh) + "×" +
                 std::to_string(g.ow) + " of x " + x.str() + " with a " + std::to_string(kh) + "×" +
                 std::to_string(kw) + " kernel");
  return g;
}

/// Copies image n into xpad[C, H + 2·pad, W + 2·pad] with a border of +0: the padded input xp.
void pad_image(const float* x, const Geom& g, int64_t n, float* xpad) {
  const int64_t hp = g.h + 2 * g.pad, wp = g.w + 2 * g.pad;
  std::fill(xpad, xpad + g.c * hp * wp, 0.0f);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t hh = 0; hh < g.h; ++hh)
      std::memcpy(xpad + (c * hp + hh + g.pad) * wp + g.pad, x + ((n * g.c + c) * g.h + hh) * g.w,
                  sizeof(float) * static_cast<size_t>(g.w));
}

/// im2col of image n: cols[t·ld + col0 + q] = xp(n, tap t of position q) for every tap t and
/// position q. Pure copies (of the image or of the +0 border), so the layout cannot change a result.
/// Reads a padded copy of the image, so the inner loops are branch-free copies of OW floats.
void im2col(const float* x, const Geom& g, int64_t n, float* cols, int64_t ld, int64_t col0) {
  thread_local Buffer pad_buf;
  const int64_t hp = g.h + 2 * g.pad, wp = g.w + 2 * g.pad, s = g.stride;
  float* xpad = scratch(pad_buf, g.c * hp * wp);
  pad_image(x, g, n, xpad);
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        float* row = cols + ((c * g.kh + i) * g.kw + j) * ld + col0;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          const float* src = xpad + (c * hp + oh * s + i) * wp + j;  // xp(n, c, oh·s + i − pad, j − pad)
          float* dst = row + oh * g.ow;
          if (s == 1) {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow] = src[ow];
          } else {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow] = src[ow * s];
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
  const int64_t k = g.taps(), p = g.positions();
  for_each_image(g, pool, [&](int64_t n, ThreadPool& gemm_pool) {
    thread_local Buffer cols_buf, t_buf;
    float* cols = scratch(cols_buf, k * p);
    float* t = scratch(t_buf, p * g.o);
    im2col(x, g, n, cols, p, 0);
    // T[q, o] = bias[o] + Σ_t cols[t, q]·w[o, t]: A = colsᵀ (trans_a, M = P), B = wᵀ (trans_b, w is [O, K]).
    matmul(MatmulArgs{cols, w, b, t, p, g.o, k, true, true}, gemm_pool);
    float* yn = y + n * g.o * p;
    for (int64_t q = 0; q < p; ++q)
      for (int64_t o = 0; o < g.o; ++o) yn[o * p + q] = t[q * g.o + o];
  });
}

// The gradient nodes take H, W and KH, KW as attributes: dy alone does not determine them when stride > 1.
void conv_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const ValueRef x = a.inputs[0], w = a.inputs[1], dy = a.out_grads[0];
  const int64_t stride = a.attrs.ints[0], pad = a.attrs.ints[1];
  if (a.needs_grad[0]) {
    const Shape xs = g.shape(x);
    in_grads[0] = g.emit(OpKind::Conv2dBackwardInput, {{stride, pad, xs[2], xs[3]}, {}}, {w, dy});
  }
  if (a.needs_grad[1]) {
    const Shape ws = g.shape(w);
    in_grads[1] = g.emit(OpKind::Conv2dBackwardWeight, {{stride, pad, ws[2], ws[3]}, {}}, {x, dy});
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
/// dcol[t, q] to the pixel its tap lands on. For one tap two positions never land on the same pixel,
/// so every pixel receives its adds in (kh, kw) row-major order, as the contract says. The adds go
/// into a padded plane (so the loops need no bounds checks); taps landing in the border accumulate
/// there and are dropped, exactly as the contract never adds them to an image pixel.
void col2im(const float* dcol, const Geom& g, float* dxn) {
  thread_local Buffer pad_buf;
  const int64_t hp = g.h + 2 * g.pad, wp = g.w + 2 * g.pad, s = g.stride, p = g.positions();
  float* dpad = scratch(pad_buf, hp * wp);
  for (int64_t c = 0; c < g.c; ++c) {
    std::fill(dpad, dpad + hp * wp, 0.0f);
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        const float* row = dcol + ((c * g.kh + i) * g.kw + j) * p;
        for (int64_t oh = 0; oh < g.oh; ++oh) {
          float* dst = dpad + (oh * s + i) * wp + j;
          const float* src = row + oh * g.ow;
          if (s == 1) {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow] = dst[ow] + src[ow];
          } else {
            for (int64_t ow = 0; ow < g.ow; ++ow) dst[ow * s] = dst[ow * s] + src[ow];
          }
        }
      }
    for (int64_t hh = 0; hh < g.h; ++hh)
      std::memcpy(dxn + (c * g.h + hh) * g.w, dpad + (hh + g.pad) * wp + g.pad,
                  sizeof(float) * static_cast<size_t>(g.w));
  }
}

void backward_input_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                         ThreadPool& pool) {
  const Geom g = backward_input_geom(a, in[0]->shape(), in[1]->shape());
  const float *w = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  const int64_t k = g.taps(), p = g.positions();
  for_each_image(g, pool, [&](int64_t n, ThreadPool& gemm_pool) {
    thread_local Buffer dcol_buf;
    float* dcol = scratch(dcol_buf, k * p);
    // dcol[t, q] = Σ_o w[o, t]·dy[n, o, q] from +0: A = wᵀ (trans_a; w is [O, K]), B = dy[n] as [O, P].
    matmul(MatmulArgs{w, dy + n * g.o * p, nullptr, dcol, k, p, g.o, true, false}, gemm_pool);
    col2im(dcol, g, dx + n * g.c * g.h * g.w);
  });
}

// ---- Conv2dBackwardWeight --------------------------------------------------------------------------

std::vector<Shape> backward_weight_infer(const Attrs& a, std::span<const Shape> in) {
  const Geom g = backward_weight_geom(a, in[0], in[1]);
  return {Shape{g.o, g.c, g.kh, g.kw}};
}

void backward_weight_reference(const Attrs& a, std::span<const Tensor* const> in,
                               std::span<Tensor* const> out) {
  const Geom g = backward_weight_geom(a, in[0]->shape(), in[1]->shape());
  const float *x = in[0]->data(), *dy = in[1]->data();
  float* dw = out[0]->data();
  for (int64_t o = 0; o < g.o; ++o)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j)
          dw[((o * g.c + c) * g.kh + i) * g.kw + j] = conv2d_weight_grad(x, dy, g, o, c, i, j);
}

void backward_weight_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                          ThreadPool& pool) {
  const Geom g = backward_weight_geom(a, in[0]->shape(), in[1]->shape());
  const float *x = in[0]->data(), *dy = in[1]->data();
  const int64_t k = g.taps(), p = g.positions(), np = g.n * p;
  thread_local Buffer cols_buf, dyr_buf;
  float* cols = scratch(cols_buf, k * np);  // [K, N·P], column n·P + q
  float* dyr = scratch(dyr_buf, g.o * np);  // [O, N·P]
  const int64_t copy_grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, (k + g.o) * p));
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
  thread_local Buffer dwt_buf;
  float* dwt = scratch(dwt_buf, k * g.o);
  matmul(MatmulArgs{cols, dyr, nullptr, dwt, k, g.o, np, false, true}, pool);
  float* dw = out[0]->data();
  for (int64_t t = 0; t < k; ++t)
    for (int64_t o = 0; o < g.o; ++o) dw[o * k + t] = dwt[t * g.o + o];
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
uint64_t backward_input_fma_chain(const Attrs&, std::span<const Shape> in) {  // ≤ O·KH·KW taps of w
  return static_cast<uint64_t>(in[0][0] * in[0][2] * in[0][3]);
}
uint64_t backward_weight_fma_chain(const Attrs&, std::span<const Shape> in) {  // N·OH·OW of dy
  return static_cast<uint64_t>(in[1][0] * in[1][2] * in[1][3]);
}

}  // namespace

const OpInfo kConv2dOp{.kind = OpKind::Conv2d,
                       .name = "conv2d",
                       .num_inputs = 3,
                       .num_outputs = 1,
                       .num_ints = 2,
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
                                    .num_ints = 4,
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
                                     .num_ints = 4,
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
