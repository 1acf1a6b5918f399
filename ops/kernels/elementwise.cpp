// Add, Relu and ReluBackward: one IEEE operation (or a comparison) per element, so any split over
// threads or SIMD lanes is bitwise identical to the reference loop.
#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

std::vector<Shape> same_shape_infer(const char* op, std::span<const Shape> in) {
  for (const Shape& s : in)
    op_require(s == in[0], op, "inputs must have equal shapes, got " + in[0].str() + " and " + s.str());
  return {in[0]};
}

// Add: y = a + b.
void add_range(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out, int64_t i0,
               int64_t i1) {
  const float *a = in[0]->data(), *b = in[1]->data();
  float* y = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) y[i] = a[i] + b[i];
}

// Relu: y = x > 0 ? x : +0 (so NaN → +0 and −0 → +0).
void relu_range(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out, int64_t i0,
                int64_t i1) {
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// ReluBackward: dx = x > 0 ? dy : +0.
void relu_backward_range(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                         int64_t i0, int64_t i1) {
  const float *x = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

std::vector<Shape> add_infer(const Attrs&, std::span<const Shape> in) {
  return same_shape_infer("add", in);
}
std::vector<Shape> relu_infer(const Attrs&, std::span<const Shape> in) {
  return same_shape_infer("relu", in);
}
std::vector<Shape> relu_backward_infer(const Attrs&, std::span<const Shape> in) {
  return same_shape_infer("relu_backward", in);
}

void add_vjp(VjpBuilder&, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = a.out_grads[0];
  if (a.needs_grad[1]) in_grads[1] = a.out_grads[0];
}

void relu_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::ReluBackward, {}, {a.inputs[0], a.out_grads[0]});
}

}  // namespace

const OpInfo kAddOp{.kind = OpKind::Add,
                    .name = "add",
                    .num_inputs = 2,
                    .num_outputs = 1,
                    .num_ints = 0,
                    .num_floats = 0,
                    .infer = add_infer,
                    .reference = whole_range<add_range>,
                    .fast = split_range<add_range>,
                    .vjp = add_vjp,
                    .float64 = f64::add,
                    .float64_spread = Float64Spread::Exact};
const OpInfo kReluOp{.kind = OpKind::Relu,
                     .name = "relu",
                     .num_inputs = 1,
                     .num_outputs = 1,
                     .num_ints = 0,
                     .num_floats = 0,
                     .infer = relu_infer,
                     .reference = whole_range<relu_range>,
                     .fast = split_range<relu_range>,
                     .vjp = relu_vjp,
                     .float64 = f64::selected<OpKind::Relu>,
                     .float64_spread = Float64Spread::Exact};
const OpInfo kReluBackwardOp{.kind = OpKind::ReluBackward,
                             .name = "relu_backward",
                             .num_inputs = 2,
                             .num_outputs = 1,
                             .num_ints = 0,
                             .num_floats = 0,
                             .infer = relu_backward_infer,
                             .reference = whole_range<relu_backward_range>,
                             .fast = split_range<relu_backward_range>,
                             .vjp = nullptr,
                             .float64 = f64::selected<OpKind::ReluBackward>,
                             .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
