// BroadcastBinary and SumToShape: elementwise arithmetic with NumPy broadcasting (ONNX Add, Sub, Mul,
// Div; docs/onnx.md) and its VJP's reduction. Orders of operations: docs/numerics.md "Broadcasting
// arithmetic". Each output element is computed by the same code whichever thread owns it, so the
// fast kernels (a static split over output elements) are bitwise equal to the references.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/kernels/op_table.h"
#include "ops/reduce.h"

namespace tribunal {
namespace {

constexpr int64_t kGrain = int64_t{1} << 14;

// ---- BroadcastBinary -------------------------------------------------------------------------------

std::vector<Shape> broadcast_binary_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "broadcast_binary";
  op_require(attrs.ints.size() == 1, op,
             "expects ints = {op}, got " + std::to_string(attrs.ints.size()) + " ints");
  op_require(attrs.ints[0] >= 0 && attrs.ints[0] <= 3, op,
             "op code must be 0 (add), 1 (sub), 2 (mul) or 3 (div), got " + std::to_string(attrs.ints[0]));
  const Shape &a = in[0], &b = in[1];
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) {
    const int ia = a.rank() - rank + d, ib = b.rank() - rank + d;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    op_require(da == db || da == 1 || db == 1, op,
               "shapes " + a.str() + " and " + b.str() + " do not broadcast (dim " + std::to_string(d) +
                   " of the aligned shapes: " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    dims[static_cast<size_t>(d)] = da == 1 ? db : da;
  }
  return {Shape(std::span<const int64_t>(dims))};
}

BinaryGeom binary_geom_of(const Shape& a, const Shape& b, const Shape& y) {
  return binary_geom(a.dims().data(), a.rank(), b.dims().data(), b.rank(), y.dims().data(), y.rank());
}

/// y[i] = a[·] op b[·] for output elements [i0, i1): one IEEE-754 float32 operation each.
void broadcast_binary_range(const Attrs& attrs, std::span<const Tensor* const> in,
                            std::span<Tensor* const> out, int64_t i0, int64_t i1) {
  const BinaryGeom g = binary_geom_of(in[0]->shape(), in[1]->shape(), out[0]->shape());
  const float *a = in[0]->data(), *b = in[1]->data();
  float* y = out[0]->data();
  const int64_t code = attrs.ints[0];
  for (int64_t i = i0; i < i1; ++i) {
    const float x = a[broadcast_offset(g.dims, g.sa, i)], z = b[broadcast_offset(g.dims, g.sb, i)];
    switch (code) {
      case 0:
        y[i] = x + z;
        break;
      case 1:
        y[i] = x - z;
        break;
      case 2:
        y[i] = x * z;
        break;
      default:
        y[i] = x / z;
        break;
    }
  }
}

void broadcast_binary_reference(const Attrs& a, std::span<const Tensor* const> in,
                                std::span<Tensor* const> out) {
  broadcast_binary_range(a, in, out, 0, out[0]->numel());
}

void broadcast_binary_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                           ThreadPool& pool) {
  pool.parallel_for(
      out[0]->numel(), [&](int64_t i0, int64_t i1) { broadcast_binary_range(a, in, out, i0, i1); }, kGrain);
}

}  // namespace

// Declared in ops/kernels/op_table.h: where's VJP reduces its gradients the same way.
ValueRef reduce_to(VjpBuilder& b, ValueRef g, ValueRef v, float sign) {
  const Shape target = b.shape(v), have = b.shape(g);
  if (target == have && sign > 0) return g;
  Attrs attrs{{target.dims().begin(), target.dims().end()}, {sign}};
  return b.emit(OpKind::SumToShape, std::move(attrs), {g});
}

namespace {

ValueRef binary(VjpBuilder& b, int64_t code, ValueRef x, ValueRef z) {
  return b.emit(OpKind::BroadcastBinary, {{code}, {}}, {x, z});
}

void broadcast_binary_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const ValueRef x = a.inputs[0], z = a.inputs[1], g = a.out_grads[0];
  switch (a.attrs.ints[0]) {
    case 0:  // d(x + z) = dx + dz
      if (a.needs_grad[0]) in_grads[0] = reduce_to(b, g, x, 1.0f);
      if (a.needs_grad[1]) in_grads[1] = reduce_to(b, g, z, 1.0f);
      break;
    case 1:  // d(x − z) = dx − dz
      if (a.needs_grad[0]) in_grads[0] = reduce_to(b, g, x, 1.0f);
      if (a.needs_grad[1]) in_grads[1] = reduce_to(b, g, z, -1.0f);
      break;
    case 2:  // d(x·z) = z·dx + x·dz
      if (a.needs_grad[0]) in_grads[0] = reduce_to(b, binary(b, 2, g, z), x, 1.0f);
      if (a.needs_grad[1]) in_grads[1] = reduce_to(b, binary(b, 2, g, x), z, 1.0f);
      break;
    default:  // d(x/z) = dx/z − (y/z)·dz with y = x/z the forward output
      if (a.needs_grad[0]) in_grads[0] = reduce_to(b, binary(b, 3, g, z), x, 1.0f);
      if (a.needs_grad[1])
        in_grads[1] = reduce_to(b, binary(b, 3, binary(b, 2, g, a.outputs[0]), z), z, -1.0f);
      break;
  }
}

// ---- SumToShape ------------------------------------------------------------------------------------

std::vector<Shape> sum_to_shape_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "sum_to_shape";
  const Shape& x = in[0];
  op_require(attrs.ints.size() <= static_cast<size_t>(kMaxRank), op,
             "the target shape has " + std::to_string(attrs.ints.size()) + " dims, at most " +
                 std::to_string(kMaxRank) + " allowed");
  for (int64_t d : attrs.ints)
    op_require(d >= 0, op, "the target shape has a negative dim " + std::to_string(d));
  const Shape target(std::span<const int64_t>(attrs.ints));
  op_require(attrs.floats.size() == 1 && (attrs.floats[0] == 1.0f || attrs.floats[0] == -1.0f), op,
             "expects floats = {sign} with sign +1 or -1");
  bool ok = target.rank() <= x.rank();
  for (int d = 0; ok && d < target.rank(); ++d) {
    const int64_t t = target[d], v = x[x.rank() - target.rank() + d];
    ok = t == v || t == 1;
  }
  op_require(ok, op, "target " + target.str() + " does not broadcast to the input's shape " + x.str());
  return {target};
}

SumGeom sum_geom_of(const Shape& x, const Shape& target) {
  return sum_geom(x.dims().data(), x.rank(), target.dims().data(), target.rank());
}

/// y[j] for j in [j0, j1): the canonical sum of x's elements broadcast from j, gathered in increasing
/// flat index of x, then negated when sign is −1 (the sign bit flipped, NaN included).
void sum_to_shape_range(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                        int64_t j0, int64_t j1) {
  const SumGeom g = sum_geom_of(in[0]->shape(), out[0]->shape());
  const float* x = in[0]->data();
  float* y = out[0]->data();
  const bool negate = attrs.floats[0] < 0.0f;
  std::vector<float> buf(static_cast<size_t>(g.n));
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t base = broadcast_offset(g.out_dims, g.out_strides, j);
    for (int64_t i = 0; i < g.n; ++i)
      buf[static_cast<size_t>(i)] = x[base + broadcast_offset(g.red_dims, g.red_strides, i)];
    const float s = canonical_sum(buf.data(), g.n);
    y[j] = negate ? -s : s;
  }
}

void sum_to_shape_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  sum_to_shape_range(a, in, out, 0, out[0]->numel());
}

void sum_to_shape_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                       ThreadPool& pool) {
  const int64_t n = out[0]->numel(), per = std::max<int64_t>(1, in[0]->numel() / std::max<int64_t>(1, n));
  pool.parallel_for(
      n, [&](int64_t j0, int64_t j1) { sum_to_shape_range(a, in, out, j0, j1); },
      std::max<int64_t>(1, kGrain / per));
}

}  // namespace

const OpInfo kBroadcastBinaryOp{.kind = OpKind::BroadcastBinary,
                                .name = "broadcast_binary",
                                .num_inputs = 2,
                                .num_outputs = 1,
                                .num_ints = 1,
                                .num_floats = 0,
                                .infer = broadcast_binary_infer,
                                .reference = broadcast_binary_reference,
                                .fast = broadcast_binary_fast,
                                .vjp = broadcast_binary_vjp,
                                .float64 = f64::broadcast_binary,
                                .float64_spread = Float64Spread::Exact};
const OpInfo kSumToShapeOp{.kind = OpKind::SumToShape,
                           .name = "sum_to_shape",
                           .num_inputs = 1,
                           .num_outputs = 1,
                           .num_ints = -1,
                           .num_floats = 1,
                           .infer = sum_to_shape_infer,
                           .reference = sum_to_shape_reference,
                           .fast = sum_to_shape_fast,
                           .vjp = nullptr,
                           .float64 = f64::sum_to_shape,
                           .float64_spread = Float64Spread::Sum};

}  // namespace tribunal
