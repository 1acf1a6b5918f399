// Unary and UnaryBackward: the elementwise functions of exported graphs (ONNX Neg, Reciprocal, Sqrt, Exp,
// Log, Tanh, Erf, Sigmoid, Sin, Cos, Pow; docs/onnx.md). Each element is ops/unary.h's formula
// (docs/numerics.md "Elementwise functions"): the project's own float32 functions of ops/math.h, never
// libm's. The fast kernels split the elements statically over threads; neg, reciprocal, exp, tanh, erf and
// sigmoid run lane-wise SIMD forms of the scalar sequences (vec_math.h: the same IEEE operations, the same
// constants and order, branches computed both ways and selected per lane), the other functions and every
// backward run the scalar code, so the fast kernels are bitwise equal to the references on every path and
// thread count.
#include <cmath>
#include <string>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/simd.h"
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

// erf32's polynomial coefficients (ops/math.h), highest degree first, for the lane-wise form. They must
// equal erf32's literals: test_op_coverage's memcmp of every SIMD path against the reference enforces it.
constexpr float kErfE[8] = {-9.6670446510e-06f, 1.1265958892e-04f, -8.4840803174e-04f, 5.2210316062e-03f,
                            -2.6865430176e-02f, 1.1283782125e-01f, -3.7612637877e-01f, 1.2837916613e-01f};
constexpr float kErfQ1[9] = {2.3661853629e-04f,  -7.0431263885e-04f, 1.8836128293e-03f,
                             -5.1379203796e-03f, 1.3377516530e-02f,  -3.2931465656e-02f,
                             7.6151035726e-02f,  -1.6362290084e-01f, 3.2158541679e-01f};
constexpr float kErfQ2[9] = {5.8510736380e-06f,  -2.4003793442e-05f, 8.3012593677e-05f,
                             -3.2180661219e-04f, 1.2231910368e-03f,  -4.4800820760e-03f,
                             1.5884360299e-02f,  -5.4372210056e-02f, 1.7900115252e-01f};

// The lane-wise forms, once per ISA (TRIBUNAL_SIMD_KERNELS in vec_math.h). erf_v: every branch of
// erf32 on a = |x|, selected per lane, then x's sign bit; sigmoid_v: both forms of sigmoid32, selected by
// x > 0 (x = ±0 gives 0.5 either way; NaN takes the second form, as the scalar's x ≥ 0 test does).
#define TRIBUNAL_UNARY_KERNELS(NS, TARGET, V)                                                          \
  namespace NS {                                                                                       \
  TARGET inline V::vf erf_v(V::vf x) {                                                                 \
    const V::vf a = V::abs(x), one = V::set1(1.0f);                                                    \
    const V::vf z = V::mul(a, a);                                                                      \
    V::vf p = V::set1(kErfE[0]);                                                                       \
    for (int i = 1; i < 8; ++i) p = V::fma(p, z, V::set1(kErfE[i]));                                   \
    const V::vf y_small = V::fma(a, p, a);                                                             \
    const V::vf lo = V::fma(a, a, V::neg(z));                                                          \
    const V::vf e = V::exp(V::neg(z));                                                                 \
    const V::vf c = V::fma(V::neg(e), lo, e);                                                          \
    const V::vf s1 = V::sub(a, V::set1(1.5f)), s2 = V::sub(a, V::set1(3.0f));                          \
    V::vf q1 = V::set1(kErfQ1[0]), q2 = V::set1(kErfQ2[0]);                                            \
    for (int i = 1; i < 9; ++i) {                                                                      \
      q1 = V::fma(q1, s1, V::set1(kErfQ1[i]));                                                         \
      q2 = V::fma(q2, s2, V::set1(kErfQ2[i]));                                                         \
    }                                                                                                  \
    const V::vf q = V::select(V::lt(a, V::set1(2.0f)), q1, q2);                                        \
    const V::vf y_mid = V::fma(V::neg(c), q, one);                                                     \
    const V::vf y = V::select(V::lt(a, one), y_small, V::select(V::lt(a, V::set1(4.0f)), y_mid, one)); \
    return V::select(V::is_nan(x), V::add(x, x), V::or_sign(y, x));                                    \
  }                                                                                                    \
  TARGET inline V::vf sigmoid_v(V::vf x) {                                                             \
    const V::vf one = V::set1(1.0f);                                                                   \
    const V::vf pos = V::div(one, V::add(one, V::exp(V::neg(x))));                                     \
    const V::vf e = V::exp(x);                                                                         \
    return V::select_pos(x, pos, V::div(e, V::add(one, e)));                                           \
  }                                                                                                    \
  TARGET inline V::vf apply(int64_t fn, V::vf x) {                                                     \
    switch (fn) {                                                                                      \
      case 0:                                                                                          \
        return V::neg(x);                                                                              \
      case 1:                                                                                          \
        return V::div(V::set1(1.0f), x);                                                               \
      case 3:                                                                                          \
        return V::exp(x);                                                                              \
      case 5:                                                                                          \
        return V::tanh(x);                                                                             \
      case 6:                                                                                          \
        return erf_v(x);                                                                               \
      default:                                                                                         \
        return sigmoid_v(x);                                                                           \
    }                                                                                                  \
  }                                                                                                    \
  TARGET void unary(int64_t fn, const float* x, float* y, int64_t n) {                                 \
    int64_t i = 0;                                                                                     \
    for (; i + V::W <= n; i += V::W) V::store(y + i, apply(fn, V::load(x + i)));                       \
    if (i < n) {                                                                                       \
      const int c = static_cast<int>(n - i);                                                           \
      V::storen(y + i, apply(fn, V::loadn(x + i, c)), c);                                              \
    }                                                                                                  \
  }                                                                                                    \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_UNARY_KERNELS)
#undef TRIBUNAL_UNARY_KERNELS

/// Whether function code `fn` has a lane-wise form above.
bool vectorised(int64_t fn) {
  return fn == 0 || fn == 1 || fn == 3 || fn == 5 || fn == 6 || fn == 7;
}

void unary_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  unary_range(a, in, out, 0, in[0]->numel());
}

void unary_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                ThreadPool& pool) {
  const SimdPath path = vectorised(a.ints[0]) ? active_simd_path() : SimdPath::Scalar;
  const int64_t fn = a.ints[0];
  const float* x = in[0]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::unary(fn, x + i0, y + i0, i1 - i0))
          case SimdPath::Scalar:
            unary_range(a, in, out, i0, i1);
            break;
        }
      },
      kGrain);
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
