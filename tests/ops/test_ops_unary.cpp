// Unary and UnaryBackward (ops/kernels/unary.cpp): their random cases, float64 model and bad inputs for the
// per-op checks of test_op_coverage.cpp, test_float64.cpp and test_backend_ops, plus hand-computed values at
// exact points, each function code's wiring to ops/math.h, the backward formulas' stated orders and the
// refusals' messages (docs/numerics.md "Elementwise functions").
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "ops/unary.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

/// One attribute variant: a function code, its exponent and the input range its derivative is well
/// conditioned on (`both_signs`: magnitudes in [lo, hi) with a random sign, away from a pole at 0).
struct Variant {
  int64_t fn;
  float p;
  float lo, hi;
  bool both_signs = false;
};

const Variant kVariants[] = {
    {0, 0.0f, -3.0f, 3.0f},   {1, 0.0f, 0.5f, 2.0f, true},   {2, 0.0f, 0.1f, 4.0f},   {3, 0.0f, -5.0f, 5.0f},
    {4, 0.0f, 0.1f, 4.0f},    {5, 0.0f, -3.0f, 3.0f},        {6, 0.0f, -3.5f, 3.5f},  {7, 0.0f, -8.0f, 8.0f},
    {8, 0.0f, -10.0f, 10.0f}, {9, 0.0f, -10.0f, 10.0f},      {10, 2.0f, -3.0f, 3.0f}, {10, 3.0f, -3.0f, 3.0f},
    {10, 0.5f, 0.1f, 4.0f},   {10, -1.0f, 0.5f, 2.0f, true}, {10, 1.5f, 0.1f, 4.0f},  {10, -0.5f, 0.1f, 4.0f},
};
constexpr int kVariantCount = static_cast<int>(std::size(kVariants));

Tensor inputs_of(const Variant& v, const Shape& s, std::mt19937& rng, bool specials) {
  Tensor t = random_tensor(s, rng, specials, v.lo, v.hi);
  if (v.both_signs)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (rng() % 2) t.data()[i] = -t[i];
  return t;
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  const Variant& v = kVariants[variant];
  const Shape s = big ? Shape{7, 31, 229} : random_shape(rng, 0, 4);
  Case c{kind, {{v.fn}, {v.p}}, {}};
  // Subnormal x where f or f' has a pole at 0 would overflow float32 where float64 does not (1/x, x^p with
  // p < 0 and the backward's x^(p−1)): those variants keep subnormals to dy.
  const bool pole = v.fn == 1 || (v.fn == 10 && v.p < 1.0f && v.p != 0.0f);
  Tensor x = inputs_of(v, s, rng, specials && !pole);
  if (kind == OpKind::Unary) {
    c.in.push_back(std::move(x));
    return c;
  }
  if (kind == OpKind::UnaryBackward) {
    Tensor y(s);
    for (int64_t i = 0; i < s.numel(); ++i) y.data()[i] = unary32(v.fn, x[i], v.p);
    c.in.push_back(std::move(x));
    c.in.push_back(std::move(y));
    c.in.push_back(random_tensor(s, rng, specials));
    return c;
  }
  return std::nullopt;
}

/// The function in double, written from its mathematical definition (libm as the oracle).
double f64(int64_t fn, double x, double p) {
  switch (fn) {
    case 0:
      return -x;
    case 1:
      return 1.0 / x;
    case 2:
      return std::sqrt(x);
    case 3:
      return std::exp(x);
    case 4:
      return std::log(x);
    case 5:
      return std::tanh(x);
    case 6:
      return std::erf(x);
    case 7:
      return 1.0 / (1.0 + std::exp(-x));
    case 8:
      return std::sin(x);
    case 9:
      return std::cos(x);
    default:
      return std::pow(x, p);
  }
}

/// dy·f'(x) in double, using the forward output y where the contract does.
double df64(int64_t fn, double x, double y, double dy, double p) {
  switch (fn) {
    case 0:
      return -dy;
    case 1:
      return -dy * y * y;
    case 2:
      return dy / (2.0 * y);
    case 3:
      return dy * y;
    case 4:
      return dy / x;
    case 5:
      return dy * (1.0 - y * y);
    case 6:
      return dy * 2.0 / std::sqrt(M_PI) * std::exp(-x * x);
    case 7:
      return dy * y * (1.0 - y);
    case 8:
      return dy * std::cos(x);
    case 9:
      return -dy * std::sin(x);
    default:
      return dy * p * std::pow(x, p - 1.0);
  }
}

std::optional<std::vector<Expected>> expect(const Case& c) {
  const int64_t fn = c.attrs.ints[0];
  const double p = c.attrs.floats[0];
  Expected e;
  for (int64_t i = 0; i < c.in[0].numel(); ++i) {
    const double r =
        c.kind == OpKind::Unary ? f64(fn, c.in[0][i], p) : df64(fn, c.in[0][i], c.in[1][i], c.in[2][i], p);
    e.want.push_back(r);
    // Every function is within a few ulp, its derivative's factors too (pow's exp–log path within 31).
    e.tol.push_back(kRel * std::fabs(r) + 1e-37);
  }
  return std::vector<Expected>{e};
}

const std::vector<BadCase> kBad = {
    {{{11}, {0.0f}}, {Shape{3}}, "function code 11"},
    {{{-1}, {0.0f}}, {Shape{3}}, "function code -1"},
    {{{3}, {2.0f}}, {Shape{3}}, "exp with p = 2"},
    {{{10}, {std::numeric_limits<float>::quiet_NaN()}}, {Shape{3}}, "pow with p = NaN"},
    {{{10}, {std::numeric_limits<float>::infinity()}}, {Shape{3}}, "pow with p = inf"},
    {{{3}, {}}, {Shape{3}}, "no floats"},
    {{{3, 1}, {0.0f}}, {Shape{3}}, "two ints"},
};

std::vector<BadCase> backward_bad() {
  std::vector<BadCase> bad;
  for (const BadCase& b : kBad) bad.push_back({b.attrs, {b.in[0], b.in[0], b.in[0]}, b.why});
  bad.push_back({{{3}, {0.0f}}, {Shape{3}, Shape{3}, Shape{4}}, "dy of another shape"});
  bad.push_back({{{3}, {0.0f}}, {Shape{2, 3}, Shape{3}, Shape{2, 3}}, "y of another shape"});
  bad.push_back({{{3}, {0.0f}}, {Shape{3}, Shape{3}}, "two inputs"});
  return bad;
}

const RegisterOpTests kUnaryTests(OpKind::Unary, {kVariantCount, make_case, expect, kBad, {0}});
const RegisterOpTests kUnaryBackwardTests(OpKind::UnaryBackward,
                                          {kVariantCount, make_case, expect, backward_bad()});

std::vector<float> run_unary(int64_t fn, float p, const std::vector<float>& x) {
  const Tensor t(Shape{static_cast<int64_t>(x.size())}, x);
  const Tensor y = run_everywhere({OpKind::Unary, {{fn}, {p}}, {t}})[0];
  return {y.values().begin(), y.values().end()};
}

}  // namespace

TEST_CASE("unary: hand-computed values at exact points") {
  CHECK(run_unary(0, 0, {2.0f, -0.0f, 0.0f}) == std::vector<float>{-2.0f, 0.0f, -0.0f});
  CHECK(float_bits(run_unary(0, 0, {0.0f})[0]) == 0x80000000u);  // −(+0) = −0
  CHECK(run_unary(1, 0, {4.0f, -0.5f}) == std::vector<float>{0.25f, -2.0f});
  CHECK(run_unary(2, 0, {4.0f, 0.25f, 2.0f}) == std::vector<float>{2.0f, 0.5f, std::sqrt(2.0f)});
  CHECK(run_unary(3, 0, {0.0f})[0] == 1.0f);
  CHECK(run_unary(4, 0, {1.0f})[0] == 0.0f);
  CHECK(run_unary(5, 0, {0.0f})[0] == 0.0f);
  CHECK(run_unary(6, 0, {0.0f, 5.0f, -5.0f}) == std::vector<float>{0.0f, 1.0f, -1.0f});
  CHECK(run_unary(7, 0, {0.0f})[0] == 0.5f);
  CHECK(run_unary(8, 0, {0.0f})[0] == 0.0f);
  CHECK(run_unary(9, 0, {0.0f})[0] == 1.0f);
  // pow: x^2 = x·x and x^3 = (x·x)·x bitwise; x^0.5 = sqrt; x^-1 = 1/x; x^0 = 1.
  const std::vector<float> x{0.7f, -1.3f, 3.1f, 1e-3f};
  const std::vector<float> sq = run_unary(10, 2.0f, x), cu = run_unary(10, 3.0f, x),
                           rt = run_unary(10, 0.5f, {2.0f}), inv = run_unary(10, -1.0f, x),
                           one = run_unary(10, 0.0f, x);
  for (size_t i = 0; i < x.size(); ++i) {
    CHECK(float_bits(sq[i]) == float_bits(x[i] * x[i]));
    CHECK(float_bits(cu[i]) == float_bits((x[i] * x[i]) * x[i]));
    CHECK(float_bits(inv[i]) == float_bits(1.0f / x[i]));
    CHECK(one[i] == 1.0f);
  }
  CHECK(rt[0] == std::sqrt(2.0f));
}

TEST_CASE("unary: each function code is ops/math.h's function, NaN, infinities and subnormals included") {
  const float inf = std::numeric_limits<float>::infinity(), sub = std::numeric_limits<float>::denorm_min();
  std::vector<float> x{std::nanf(""), inf, -inf, -0.0f, 0.0f, sub, -sub, 0.3f, -2.7f, 13.5f, 90.0f, -110.0f};
  std::mt19937 rng(5);
  for (int i = 0; i < 5000; ++i) x.push_back(std::uniform_real_distribution<float>(-20.0f, 20.0f)(rng));
  float (*const fns[])(float) = {nullptr, nullptr, sqrt32,    exp32, log32,
                                 tanh32,  erf32,   sigmoid32, sin32, cos32};
  for (int64_t fn = 0; fn < kUnaryFnCount; ++fn) {
    for (float p : fn == 10 ? std::vector<float>{2.0f, 3.0f, 0.5f, -1.0f, 1.5f, -0.5f, 7.0f}
                            : std::vector<float>{0.0f}) {
      CAPTURE(fn);
      CAPTURE(p);
      const std::vector<float> y = run_unary(fn, p, x);
      for (size_t i = 0; i < x.size(); ++i) {
        const float want = fn == 0    ? -x[i]
                           : fn == 1  ? 1.0f / x[i]
                           : fn == 10 ? pow32(x[i], p)
                                      : fns[fn](x[i]);
        if (std::isnan(want))
          CHECK(std::isnan(y[i]));
        else
          CHECK(float_bits(y[i]) == float_bits(want));
      }
    }
  }
}

TEST_CASE("unary_backward: the stated order of each function's derivative") {
  const float x = 0.7f, dy = -1.3f;
  auto grad = [&](int64_t fn, float p) {
    const float y = unary32(fn, x, p);
    const Tensor t(Shape{1}, std::vector<float>{x}), ty(Shape{1}, std::vector<float>{y}),
        td(Shape{1}, std::vector<float>{dy});
    return run_everywhere({OpKind::UnaryBackward, {{fn}, {p}}, {t, ty, td}})[0][0];
  };
  auto same = [](float a, float b) { return float_bits(a) == float_bits(b); };
  CHECK(same(grad(0, 0), -dy));
  const float r = 1.0f / x;
  CHECK(same(grad(1, 0), dy * -(r * r)));
  CHECK(same(grad(2, 0), (dy * 0.5f) / std::sqrt(x)));
  CHECK(same(grad(3, 0), dy * exp32(x)));
  CHECK(same(grad(4, 0), dy / x));
  const float t = tanh32(x);
  CHECK(same(grad(5, 0), dy * std::fma(-t, t, 1.0f)));
  CHECK(same(grad(6, 0), dy * (1.12837922573089599609375f * exp32(-(x * x)))));
  const float s = sigmoid32(x);
  CHECK(same(grad(7, 0), dy * (s * (1.0f - s))));
  CHECK(same(grad(8, 0), dy * cos32(x)));
  CHECK(same(grad(9, 0), dy * -sin32(x)));
  CHECK(same(grad(10, 2.0f), dy * (2.0f * x)));
  CHECK(same(grad(10, 3.0f), dy * (3.0f * (x * x))));
  CHECK(same(grad(10, 1.5f), dy * (1.5f * std::sqrt(x))));
  CHECK(same(grad(10, -1.0f), dy * (-1.0f * (1.0f / (x * x)))));
  CHECK(same(grad(10, 0.0f), dy * 0.0f));
  // Against the calculus at a few points (the derivatives, not just their formulas).
  CHECK(grad(6, 0) == doctest::Approx(dy * 2.0 / std::sqrt(M_PI) * std::exp(-0.49)).epsilon(1e-6));
  CHECK(grad(7, 0) == doctest::Approx(dy * s * (1.0 - s)).epsilon(1e-6));
  CHECK(grad(8, 0) == doctest::Approx(dy * std::cos(0.7)).epsilon(1e-6));
}

TEST_CASE("unary's VJP emits unary_backward(x, y, dy) with the forward's attributes") {
  std::mt19937 rng(9);
  EagerVjpBuilder b;
  const Tensor xt = random_tensor(Shape{3, 5}, rng, false, 0.1f, 2.0f);
  const ValueRef x = b.add(xt);
  const Attrs attrs{{10}, {1.5f}};
  const ValueRef y = b.emit(OpKind::Unary, attrs, {x});
  const Tensor gt = random_tensor(Shape{3, 5}, rng, false);
  const ValueRef g = b.add(gt);
  const std::vector<ValueRef> inputs{x}, outputs{y}, grads{g};
  const bool need[1] = {true};
  std::vector<ValueRef> in_grads(1, 0);
  op_info(OpKind::Unary).vjp(b, VjpArgs{attrs, inputs, outputs, grads, need}, in_grads);
  const Tensor& dx = b.value(in_grads[0]);
  const Tensor want = run_everywhere({OpKind::UnaryBackward, attrs, {xt, b.value(y), gt}})[0];
  CHECK(bitwise_equal(dx, want));
  for (int64_t i = 0; i < xt.numel(); ++i)
    CHECK(dx[i] == doctest::Approx(1.5 * std::sqrt(static_cast<double>(xt[i])) * gt[i]).epsilon(1e-5));
}

TEST_CASE("unary refuses bad attributes with messages that say what") {
  auto refuse = [](OpKind k, Attrs a, std::vector<Shape> in, const char* what) {
    CHECK_THROWS_WITH_AS(infer_shapes(k, a, in), doctest::Contains(what), OpError);
  };
  refuse(OpKind::Unary, {{11}, {0.0f}}, {Shape{3}},
         "unary: function code must be 0 (neg) … 10 (pow), got 11");
  refuse(OpKind::Unary, {{3}, {2.0f}}, {Shape{3}}, "must be {0} for function code 3 (only pow, 10, takes p)");
  refuse(OpKind::Unary, {{10}, {INFINITY}}, {Shape{3}}, "the exponent p must be finite");
  refuse(OpKind::UnaryBackward, {{3}, {0.0f}}, {Shape{3}, Shape{3}, Shape{4}},
         "unary_backward: x, y and dy must have equal shapes, got [3], [3] and [4]");
}
