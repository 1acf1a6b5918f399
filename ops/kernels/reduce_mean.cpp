// ReduceMean, ReduceMeanBackward and Expand: the mean over one axis of RMSNorm (ONNX ReduceMean), its
// VJP, and NumPy broadcasting of a tensor to a shape (ONNX Expand: grouped-query attention's repeated
// keys and values; docs/onnx.md). Orders of operations: docs/numerics.md "Mean over an axis; expand".
// Each output element is computed by the same code whichever thread owns it, so the fast kernels (a
// static split over output elements) are bitwise equal to the references.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/kernels/op_table.h"
#include "ops/movement.h"
#include "ops/reduce.h"

namespace tribunal {
namespace {

constexpr int64_t kGrain = int64_t{1} << 14;

std::string str(int64_t v) {
  return std::to_string(v);
}

void require_rank(const char* op, const Shape& s, const char* what) {
  op_require(s.rank() >= 1 && s.rank() <= kMaxRank, op,
             std::string(what) + " must have rank 1 to " + str(kMaxRank) + ", got " + s.str());
}

int checked_axis(const char* op, int64_t axis, const Shape& s) {
  op_require(axis >= 0 && axis < s.rank(), op,
             "axis " + str(axis) + " is out of range for rank " + str(s.rank()) + " (" + s.str() + ")");
  return static_cast<int>(axis);
}

Shape with_dim(const Shape& s, int axis, int64_t dim) {
  std::vector<int64_t> d(s.dims().begin(), s.dims().end());
  d[static_cast<size_t>(axis)] = dim;
  return Shape(std::span<const int64_t>(d));
}

// ---- ReduceMean ------------------------------------------------------------------------------------

std::vector<Shape> reduce_mean_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "reduce_mean";
  op_require(attrs.ints.size() == 1, op, "expects ints = {axis}, got " + str(attrs.ints.size()) + " ints");
  require_rank(op, in[0], "x");
  const int axis = checked_axis(op, attrs.ints[0], in[0]);
  return {with_dim(in[0], axis, 1)};
}

/// y[j] for output elements j in [j0, j1): the canonical sum of the N elements along the axis (stride
/// inner), then one IEEE-754 division by float(N) (N = 0: 0/0 = NaN).
void reduce_mean_range(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                       int64_t j0, int64_t j1) {
  const Shape& xs = in[0]->shape();
  const AxisView v = axis_view(xs.dims().data(), xs.rank(), static_cast<int>(attrs.ints[0]));
  const float* x = in[0]->data();
  float* y = out[0]->data();
  const float n = static_cast<float>(v.dim);
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t o = j / v.inner, i = j % v.inner;
    y[j] = canonical_sum(x + o * v.dim * v.inner + i, v.dim, v.inner) / n;
  }
}

void reduce_mean_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  reduce_mean_range(a, in, out, 0, out[0]->numel());
}

void reduce_mean_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      ThreadPool& pool) {
  const int64_t n = out[0]->numel(), per = std::max<int64_t>(1, in[0]->numel() / std::max<int64_t>(1, n));
  pool.parallel_for(
      n, [&](int64_t j0, int64_t j1) { reduce_mean_range(a, in, out, j0, j1); },
      std::max<int64_t>(1, kGrain / per));
}

void reduce_mean_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  const int64_t axis = a.attrs.ints[0];
  const int64_t n = b.shape(a.inputs[0])[static_cast<int>(axis)];
  in_grads[0] = b.emit(OpKind::ReduceMeanBackward, {{axis, n}, {}}, {a.out_grads[0]});
}

// ---- ReduceMeanBackward ----------------------------------------------------------------------------

std::vector<Shape> reduce_mean_backward_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "reduce_mean_backward";
  op_require(attrs.ints.size() == 2, op, "expects ints = {axis, N}, got " + str(attrs.ints.size()) + " ints");
  require_rank(op, in[0], "dy");
  const int axis = checked_axis(op, attrs.ints[0], in[0]);
  op_require(in[0][axis] == 1, op, "dy must have dim 1 on axis " + str(axis) + ", got " + in[0].str());
  op_require(attrs.ints[1] >= 0, op, "N must be ≥ 0, got " + str(attrs.ints[1]));
  return {with_dim(in[0], axis, attrs.ints[1])};
}

/// dx[o, k, i] = dy[o, i] / float(N) for dx elements [i0, i1): one IEEE-754 division each.
void reduce_mean_backward_range(const Attrs& attrs, std::span<const Tensor* const> in,
                                std::span<Tensor* const> out, int64_t i0, int64_t i1) {
  const Shape& xs = out[0]->shape();
  const AxisView v = axis_view(xs.dims().data(), xs.rank(), static_cast<int>(attrs.ints[0]));
  const float* dy = in[0]->data();
  float* dx = out[0]->data();
  const float n = static_cast<float>(v.dim);
  for (int64_t e = i0; e < i1; ++e) dx[e] = dy[(e / (v.dim * v.inner)) * v.inner + e % v.inner] / n;
}

void reduce_mean_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                                    std::span<Tensor* const> out) {
  reduce_mean_backward_range(a, in, out, 0, out[0]->numel());
}

void reduce_mean_backward_fast(const Attrs& a, std::span<const Tensor* const> in,
                               std::span<Tensor* const> out, ThreadPool& pool) {
  pool.parallel_for(
      out[0]->numel(), [&](int64_t i0, int64_t i1) { reduce_mean_backward_range(a, in, out, i0, i1); },
      kGrain);
}

// dx = dy/N broadcast is linear in dy; its transpose sums g along the axis and divides by N: ReduceMean.
void reduce_mean_backward_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = b.emit(OpKind::ReduceMean, {{a.attrs.ints[0]}, {}}, {a.out_grads[0]});
}

// ---- Expand ----------------------------------------------------------------------------------------

std::vector<Shape> expand_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "expand";
  op_require(
      attrs.ints.size() <= static_cast<size_t>(kMaxRank), op,
      "the target shape has " + str(attrs.ints.size()) + " dims, at most " + str(kMaxRank) + " allowed");
  for (int64_t d : attrs.ints) op_require(d >= 0, op, "the target shape has a negative dim " + str(d));
  const Shape target(std::span<const int64_t>(attrs.ints));
  const Shape& x = in[0];
  bool ok = x.rank() <= target.rank();
  for (int d = 0; ok && d < x.rank(); ++d) {
    const int64_t v = x[d], t = target[target.rank() - x.rank() + d];
    ok = v == t || v == 1;
  }
  op_require(ok, op, "the input's shape " + x.str() + " does not broadcast to the target " + target.str());
  return {target};
}

/// x's element map onto y (BinaryGeom::sa; x against itself, so sb is unused).
BinaryGeom expand_geom_of(const Shape& x, const Shape& y) {
  return binary_geom(x.dims().data(), x.rank(), x.dims().data(), x.rank(), y.dims().data(), y.rank());
}

/// y[i] = x[offset(dims, sa, i)] for output elements [i0, i1): a bit copy.
void expand_range(std::span<const Tensor* const> in, std::span<Tensor* const> out, int64_t i0, int64_t i1) {
  const BinaryGeom g = expand_geom_of(in[0]->shape(), out[0]->shape());
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) y[i] = x[broadcast_offset(g.dims, g.sa, i)];
}

void expand_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  expand_range(in, out, 0, out[0]->numel());
}

void expand_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                 ThreadPool& pool) {
  pool.parallel_for(
      out[0]->numel(), [&](int64_t i0, int64_t i1) { expand_range(in, out, i0, i1); }, kGrain);
}

void expand_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = reduce_to(b, a.out_grads[0], a.inputs[0], 1.0f);
}

}  // namespace

const OpInfo kReduceMeanOp{.kind = OpKind::ReduceMean,
                           .name = "reduce_mean",
                           .num_inputs = 1,
                           .num_outputs = 1,
                           .num_ints = 1,
                           .num_floats = 0,
                           .infer = reduce_mean_infer,
                           .reference = reduce_mean_reference,
                           .fast = reduce_mean_fast,
                           .vjp = reduce_mean_vjp,
                           .float64 = f64::reduce_mean,
                           .float64_spread = Float64Spread::Sum};
const OpInfo kReduceMeanBackwardOp{.kind = OpKind::ReduceMeanBackward,
                                   .name = "reduce_mean_backward",
                                   .num_inputs = 1,
                                   .num_outputs = 1,
                                   .num_ints = 2,
                                   .num_floats = 0,
                                   .infer = reduce_mean_backward_infer,
                                   .reference = reduce_mean_backward_reference,
                                   .fast = reduce_mean_backward_fast,
                                   .vjp = reduce_mean_backward_vjp,
                                   .float64 = f64::reduce_mean_backward,
                                   .float64_spread = Float64Spread::Exact};
const OpInfo kExpandOp{.kind = OpKind::Expand,
                       .name = "expand",
                       .num_inputs = 1,
                       .num_outputs = 1,
                       .num_ints = -1,
                       .num_floats = 0,
                       .infer = expand_infer,
                       .reference = expand_reference,
                       .fast = expand_fast,
                       .vjp = expand_vjp,
                       .float64 = f64::selected<OpKind::Expand>,
                       .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
