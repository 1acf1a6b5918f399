// Unary and UnaryBackward: the elementwise functions of exported graphs (ONNX Neg, Reciprocal, Sqrt, Exp,
// Log, Tanh, Erf, Sigmoid, Sin, Cos, Pow; docs/onnx.md). Each element is ops/unary.h's formula
// (docs/numerics.md "Elementwise functions"): the project's own float32 functions of ops/math.h, never
// libm's. The fast kernels split the elements statically over threads and run the same scalar code on
// each, so they are bitwise equal to the references on every path and thread count.
#include <cmath>
#include <string>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/unary.h"

namespace tribunal {
namespace {

/// Elements per thread at least: a transcendental element costs a few ns.
constexpr int64_t kGrain = 4096;

/// Checks ints = {fn} and floats = {p}: fn a known code, p finite, p = 0 unless fn is pow.
void check_unary_attrs(const Attrs& attrs, const char* op) {
  const int64_t fn = attrs.ints[0];
  op_require(fn >= 0 && fn < kUnaryFnCount, op,
             "function code must be 0 (neg) … 10 (pow), got " + std::to_string(fn));
  const float p = attrs.floats[0];
  op_require(std::isfinite(p), op, "the exponent p must be finite");
  op_require(fn == static_cast<int64_t>(UnaryFn::Pow) || p == 0.0f, op,
             "floats = {p} must be {0} for function code " + std::to_string(fn) + " (only pow, 10, takes p)");
}

std::vector<Shape> unary_infer(const Attrs& attrs, std::span<const Shape> in) {
  check_unary_attrs(attrs, "unary");
  return {in[0]};
}

std::vector<Shape> unary_backward_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "unary_backward";
  check_unary_attrs(attrs, op);
  op_require(
      in[0] == in[1] && in[0] == in[2], op,
      "x, y and dy must have equal shapes, got " + in[0].str() + ", " + in[1].str() + " and " + in[2].str());
  return {in[0]};
}

void unary_range(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                 int64_t i0, int64_t i1) {
  const int64_t fn = attrs.ints[0];
  const float p = attrs.floats[0];
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) y[i] = unary32(fn, x[i], p);
}

void unary_backward_range(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                          int64_t i0, int64_t i1) {
  const int64_t fn = attrs.ints[0];
  const float p = attrs.floats[0];
  const float *x = in[0]->data(), *y = in[1]->data(), *dy = in[2]->data();
  float* dx = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) dx[i] = unary_grad32(fn, x[i], y[i], dy[i], p);
}

void unary_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  unary_range(a, in, out, 0, in[0]->numel());
}

void unary_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                ThreadPool& pool) {
  pool.parallel_for(
      in[0]->numel(), [&](int64_t i0, int64_t i1) { unary_range(a, in, out, i0, i1); }, kGrain);
}

void unary_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                              std::span<Tensor* const> out) {
  unary_backward_range(a, in, out, 0, in[0]->numel());
}

void unary_backward_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                         ThreadPool& pool) {
  pool.parallel_for(
      in[0]->numel(), [&](int64_t i0, int64_t i1) { unary_backward_range(a, in, out, i0, i1); }, kGrain);
}

/// dx = UnaryBackward(x, y, dy) with the forward's attributes.
void unary_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0])
    in_grads[0] = b.emit(OpKind::UnaryBackward, a.attrs, {a.inputs[0], a.outputs[0], a.out_grads[0]});
}

}  // namespace

/// Unary: x (any shape); ints = {fn}; floats = {p} → y = f(x), same shape (ops/unary.h).
const OpInfo kUnaryOp{.kind = OpKind::Unary,
                      .name = "unary",
                      .num_inputs = 1,
                      .num_outputs = 1,
                      .num_ints = 1,
                      .num_floats = 1,
                      .infer = unary_infer,
                      .reference = unary_reference,
                      .fast = unary_fast,
                      .vjp = unary_vjp,
                      .float64 = f64::unary,
                      .float64_spread = Float64Spread::Libm};
/// UnaryBackward: x, y, dy (equal shapes); the forward's attrs → dx = dy·f'(x) (ops/unary.h).
const OpInfo kUnaryBackwardOp{.kind = OpKind::UnaryBackward,
                              .name = "unary_backward",
                              .num_inputs = 3,
                              .num_outputs = 1,
                              .num_ints = 1,
                              .num_floats = 1,
                              .infer = unary_backward_infer,
                              .reference = unary_backward_reference,
                              .fast = unary_backward_fast,
                              .vjp = nullptr,
                              .float64 = f64::unary_backward,
                              .float64_spread = Float64Spread::Libm};

}  // namespace tribunal
