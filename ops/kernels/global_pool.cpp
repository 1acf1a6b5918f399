// Global average pooling and its gradient (docs/numerics.md "Global average pooling"). NCHW.
//   global_avg_pool:          y[n,c,0,0] = canonical_sum(x[n,c,·,·] over H·W in row-major order) / float(H·W)
//   global_avg_pool_backward: dx[n,c,i,j] = dy[n,c,0,0] / float(H·W)
// float(H·W) is the count rounded to nearest (exact up to 2²⁴); each output is one canonical sum and one
// IEEE division (backward: one division), never a multiplication by a reciprocal. Planes are independent,
// so the fast kernels (the same per-plane code over a static partition of the N·C planes) are bitwise
// identical to the references by construction.
#include <algorithm>
#include <string>

#include "ops/kernels/op_table.h"
#include "ops/reduce.h"

namespace tribunal {
namespace {

/// Planes per thread: at least 2^16 input elements, so a small pooling stays on the caller (pool.cpp).
int64_t plane_grain(int64_t plane_elements) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, plane_elements));
}

std::vector<Shape> gap_infer(const Attrs&, std::span<const Shape> in) {
  const Shape& x = in[0];
  op_require(x.rank() == 4, "global_avg_pool", "needs x[N,C,H,W], got " + x.str());
  op_require(x[2] >= 1 && x[3] >= 1, "global_avg_pool", "needs H, W ≥ 1, got " + x.str());
  return {Shape{x[0], x[1], 1, 1}};
}

void gap_planes(const Tensor& x, Tensor& y, int64_t pl0, int64_t pl1) {
  const int64_t hw = x.shape()[2] * x.shape()[3];
  const float count = static_cast<float>(hw);
  for (int64_t pl = pl0; pl < pl1; ++pl) y.data()[pl] = canonical_sum(x.data() + pl * hw, hw) / count;
}

void gap_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  gap_planes(*in[0], *out[0], 0, in[0]->shape()[0] * in[0]->shape()[1]);
}

void gap_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
              ThreadPool& pool) {
  const Shape& s = in[0]->shape();
  pool.parallel_for(
      s[0] * s[1], [&](int64_t p0, int64_t p1) { gap_planes(*in[0], *out[0], p0, p1); },
      plane_grain(s[2] * s[3]));
}

void gap_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  const Shape& x = g.shape(a.inputs[0]);
  in_grads[0] = g.emit(OpKind::GlobalAvgPoolBackward, {{x[2], x[3]}, {}}, {a.out_grads[0]});
}

// ---- GlobalAvgPoolBackward ---------------------------------------------------------------------------

std::vector<Shape> gap_backward_infer(const Attrs& a, std::span<const Shape> in) {
  const char* op = "global_avg_pool_backward";
  const Shape& dy = in[0];
  op_require(dy.rank() == 4 && dy[2] == 1 && dy[3] == 1, op, "needs dy[N,C,1,1], got " + dy.str());
  const int64_t h = a.ints[0], w = a.ints[1];
  op_require(h >= 1 && w >= 1 && h <= (int64_t{1} << 31) && w <= (int64_t{1} << 31), op,
             "needs ints {H, W} in [1, 2^31], got {" + std::to_string(h) + ", " + std::to_string(w) + "}");
  return {Shape{dy[0], dy[1], h, w}};
}

void gap_backward_planes(const Tensor& dy, Tensor& dx, int64_t pl0, int64_t pl1) {
  const int64_t hw = dx.shape()[2] * dx.shape()[3];
  const float count = static_cast<float>(hw);
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float v = dy.data()[pl] / count;
    std::fill(dx.data() + pl * hw, dx.data() + (pl + 1) * hw, v);
  }
}

void gap_backward_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  gap_backward_planes(*in[0], *out[0], 0, in[0]->shape()[0] * in[0]->shape()[1]);
}

void gap_backward_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                       ThreadPool& pool) {
  const Shape& s = out[0]->shape();
  pool.parallel_for(
      s[0] * s[1], [&](int64_t p0, int64_t p1) { gap_backward_planes(*in[0], *out[0], p0, p1); },
      plane_grain(s[2] * s[3]));
}

}  // namespace

const OpInfo kGlobalAvgPoolOp{.kind = OpKind::GlobalAvgPool,
                              .name = "global_avg_pool",
                              .num_inputs = 1,
                              .num_outputs = 1,
                              .num_ints = 0,
                              .num_floats = 0,
                              .infer = gap_infer,
                              .reference = gap_reference,
                              .fast = gap_fast,
                              .vjp = gap_vjp,
                              .float64 = f64::global_avg_pool,
                              .float64_spread = Float64Spread::Sum};
const OpInfo kGlobalAvgPoolBackwardOp{.kind = OpKind::GlobalAvgPoolBackward,
                                      .name = "global_avg_pool_backward",
                                      .num_inputs = 1,
                                      .num_outputs = 1,
                                      .num_ints = 2,
                                      .num_floats = 0,
                                      .infer = gap_backward_infer,
                                      .reference = gap_backward_reference,
                                      .fast = gap_backward_fast,
                                      .vjp = nullptr,
                                      .float64 = f64::global_avg_pool_backward,
                                      .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
