// Float64 Unary and UnaryBackward (rounding-log mode): the functions of ops/unary.h in double with libm,
// as the other float64 ops use it (Float64Spread::Libm). Where the float32 contract defines a value by a
// rule rather than by the function (sin and cos beyond kTrigMax, pow's cases), the float64 kernel follows
// the same rule, so both modes agree on which elements are NaN.
#include <cmath>

#include "ops/float64/internal.h"
#include "ops/math.h"
#include "ops/unary.h"

namespace tribunal::f64 {
namespace {

bool in_trig_range(double x) {
  return x <= kTrigMax && x >= -kTrigMax;
}

/// pow32's rule in double: p = 0 → 1; p = 0.5 → +0 at ±0, else sqrt; x < 0 with a non-integer p → NaN;
/// otherwise std::pow (exact sign handling for integer p).
double pow64(double x, double p) {
  if (p == 0.0) return 1.0;
  if (p == 0.5) return x == 0.0 ? 0.0 : std::sqrt(x);
  if (x < 0.0 && std::trunc(p) != p) return NAN;
  return std::pow(x, p);
}

double unary64(int64_t fn, double x, double p) {
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
      return x >= 0.0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    case 8:
      return in_trig_range(x) ? std::sin(x) : NAN;
    case 9:
      return in_trig_range(x) ? std::cos(x) : NAN;
    default:
      return pow64(x, p);
  }
}

double unary_grad64(int64_t fn, double x, double y, double dy, double p) {
  switch (fn) {
    case 0:
      return -dy;
    case 1:
      return -dy * y * y;
    case 2:
      return dy * 0.5 / y;
    case 3:
      return dy * y;
    case 4:
      return dy / x;
    case 5:
      return dy * (1.0 - y * y);
    case 6:
      return dy * (2.0 / std::sqrt(M_PI)) * std::exp(-x * x);
    case 7:
      return dy * y * (1.0 - y);
    case 8:
      return in_trig_range(x) ? dy * std::cos(x) : NAN;
    case 9:
      return in_trig_range(x) ? -dy * std::sin(x) : NAN;
    default:
      return p == 0.0 ? dy * 0.0 : dy * p * pow64(x, p - 1.0);
  }
}

}  // namespace

/// f(x) in double per element (ops/unary.h's function codes).
void unary(const Call& c) {
  const int64_t fn = c.attrs.ints[0];
  const double p = c.attrs.floats[0];
  const float* x = c.in[0]->data();
  double* y = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = unary64(fn, x[i], p);
  });
}

/// dy·f'(x) in double per element, from the float32 inputs x, y (the forward output) and dy.
void unary_backward(const Call& c) {
  const int64_t fn = c.attrs.ints[0];
  const double p = c.attrs.floats[0];
  const float *x = c.in[0]->data(), *y = c.in[1]->data(), *dy = c.in[2]->data();
  double* dx = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dx[i] = unary_grad64(fn, x[i], y[i], dy[i], p);
  });
}

}  // namespace tribunal::f64
