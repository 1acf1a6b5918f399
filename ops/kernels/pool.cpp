// 2×2 max pooling with stride 2 and its gradient (docs/numerics.md "Ops", max_pool2d*). NCHW.
//
// A maximum involves no rounding, so the contract only has to fix which element is *chosen*, which
// decides both the forward value's bits (−0 vs +0, NaN payloads) and where the gradient goes:
//   scan the window in order (0,0), (0,1), (1,0), (1,1); the chosen element is the first NaN if
//   there is one, else the first element equal to the maximum (a later equal element, e.g. +0 after
//   −0, does not replace it).
//   max_pool2d:          y = the chosen element (a copy: its sign and NaN payload are kept)
//   max_pool2d_backward: dx[chosen] = dy of the window (a copy), every other element of x gets +0
// PyTorch's CPU max_pool2d also propagates NaN and keeps the first maximum; the order is ours.
// Windows are independent, so the fast kernels (the same per-window code over a static partition of
// the N·C planes) are bitwise identical to the references by construction.
#include <algorithm>

#include "ops/kernels/op_table.h"
#include "ops/pointwise.h"

namespace tribunal {
namespace {

/// Checks x[N,C,H,W] with H, W even and ≥ 2.
void check_pool_input(const char* op, const Shape& x) {
  op_require(x.rank() == 4, op, "needs x[N,C,H,W], got " + x.str());
  op_require(x[0] >= 1 && x[1] >= 1 && x[2] >= 2 && x[3] >= 2 && x[2] % 2 == 0 && x[3] % 2 == 0, op,
             "needs N, C ≥ 1 and even H, W ≥ 2, got " + x.str());
}

/// The chosen element of a window: pool_choice (ops/pointwise.h, shared with the CUDA kernels).
inline int chosen(const float v[4]) {
  return pool_choice(v);
}

/// The window of output (r, s): pool_window (ops/pointwise.h, shared with the CUDA kernels).
inline void window(const float* plane, int64_t w, int64_t r, int64_t s, float v[4]) {
  pool_window(plane, w, r, s, v);
}

std::vector<Shape> pool_infer(const Attrs&, std::span<const Shape> in) {
  check_pool_input("max_pool2d", in[0]);
  return {Shape{in[0][0], in[0][1], in[0][2] / 2, in[0][3] / 2}};
}

/// Planes [pl0, pl1) of the N·C planes.
void pool_planes(const Tensor& x, Tensor& y, int64_t pl0, int64_t pl1) {
  const int64_t h = x.shape()[2], w = x.shape()[3], oh = h / 2, ow = w / 2;
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* plane = x.data() + pl * h * w;
    float* out = y.data() + pl * oh * ow;
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t s = 0; s < ow; ++s) {
        float v[4];
        window(plane, w, r, s, v);
        out[r * ow + s] = v[chosen(v)];
      }
  }
}

void pool_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  pool_planes(*in[0], *out[0], 0, in[0]->shape()[0] * in[0]->shape()[1]);
}

/// Planes per thread: at least 2^16 input elements (~100 µs), more than a parallel_for round trip
/// costs (25-55 µs, see matmul.cpp), so a small pooling stays on the caller.
int64_t plane_grain(const Shape& x) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / (x[2] * x[3]));
}

void pool_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
               ThreadPool& pool) {
  const Shape& s = in[0]->shape();
  pool.parallel_for(
      s[0] * s[1], [&](int64_t p0, int64_t p1) { pool_planes(*in[0], *out[0], p0, p1); }, plane_grain(s));
}

void pool_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::MaxPool2dBackward, {}, {a.inputs[0], a.out_grads[0]});
}

// ---- MaxPool2dBackward -------------------------------------------------------------------------------

std::vector<Shape> pool_backward_infer(const Attrs&, std::span<const Shape> in) {
  const char* op = "max_pool2d_backward";
  check_pool_input(op, in[0]);
  const Shape& x = in[0];
  const Shape want{x[0], x[1], x[2] / 2, x[3] / 2};
  op_require(in[1] == want, op, "dy must be " + want.str() + " for x " + x.str() + ", got " + in[1].str());
  return {x};
}

void pool_backward_planes(const Tensor& x, const Tensor& dy, Tensor& dx, int64_t pl0, int64_t pl1) {
  const int64_t h = x.shape()[2], w = x.shape()[3], oh = h / 2, ow = w / 2;
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* plane = x.data() + pl * h * w;
    const float* g = dy.data() + pl * oh * ow;
    float* d = dx.data() + pl * h * w;
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t s = 0; s < ow; ++s) {
        float v[4];
        window(plane, w, r, s, v);
        const int k = chosen(v);
        float* p = d + 2 * r * w + 2 * s;
        p[0] = p[1] = p[w] = p[w + 1] = 0.0f;
        p[(k >> 1) * w + (k & 1)] = g[r * ow + s];
      }
  }
}

void pool_backward_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  pool_backward_planes(*in[0], *in[1], *out[0], 0, in[0]->shape()[0] * in[0]->shape()[1]);
}

void pool_backward_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                        ThreadPool& pool) {
  const Shape& s = in[0]->shape();
  pool.parallel_for(
      s[0] * s[1], [&](int64_t p0, int64_t p1) { pool_backward_planes(*in[0], *in[1], *out[0], p0, p1); },
      plane_grain(s));
}

}  // namespace

const OpInfo kMaxPool2dOp{.kind = OpKind::MaxPool2d,
                          .name = "max_pool2d",
                          .num_inputs = 1,
                          .num_outputs = 1,
                          .num_ints = 0,
                          .num_floats = 0,
                          .infer = pool_infer,
                          .reference = pool_reference,
                          .fast = pool_fast,
                          .vjp = pool_vjp,
                          .float64 = f64::selected<OpKind::MaxPool2d>,
                          .float64_spread = Float64Spread::Exact};
const OpInfo kMaxPool2dBackwardOp{.kind = OpKind::MaxPool2dBackward,
                                  .name = "max_pool2d_backward",
                                  .num_inputs = 2,
                                  .num_outputs = 1,
                                  .num_ints = 0,
                                  .num_floats = 0,
                                  .infer = pool_backward_infer,
                                  .reference = pool_backward_reference,
                                  .fast = pool_backward_fast,
                                  .vjp = nullptr,
                                  .float64 = f64::selected<OpKind::MaxPool2dBackward>,
                                  .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
