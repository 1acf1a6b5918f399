// Float64 elementwise ops: Add, Gelu, GeluBackward, Dropout, DropoutBackward, Scale.
// One double expression per element; the selects (x > 0, GELU's saturation, the dropout mask) are
// decided as the float32 reference decides them.
#include <cmath>

#include "ops/float64/internal.h"
#include "ops/pointwise.h"

namespace tribunal::f64 {
namespace {

constexpr double kGeluC = 0.79788456080286535588;  // √(2/π)
constexpr double kGeluK = 0.044715;

}  // namespace

void add(const Call& c) {
  const float *a = c.in[0]->data(), *b = c.in[1]->data();
  double* y = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) y[i] = static_cast<double>(a[i]) + static_cast<double>(b[i]);
}

/// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), written h·t + h with h = 0.5·x (so gelu(±0) = +0 and
/// gelu(−inf) = NaN, as the reference).
void gelu(const Call& c) {
  const float* xf = c.in[0]->data();
  double* y = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) {
    const double x = xf[i];
    const double t = std::tanh(kGeluC * (x + kGeluK * (x * x * x)));
    const double h = 0.5 * x;
    y[i] = h * t + h;
  }
}

/// dy·(½(1 + t) + ½x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)); the second term is skipped where 1 − t² is
/// not > 0 (tanh saturated, ±inf included: keeps 0·inf from giving NaN, as the reference's select).
void gelu_backward(const Call& c) {
  const float *xf = c.in[0]->data(), *dyf = c.in[1]->data();
  double* dx = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) {
    const double x = xf[i], x2 = x * x;
    const double t = std::tanh(kGeluC * (x + kGeluK * (x2 * x)));
    const double left = 0.5 + 0.5 * t;
    const double sech2 = 1.0 - t * t;
    const double du = kGeluC * (1.0 + 3.0 * kGeluK * x2);
    const double g = sech2 > 0.0 ? (0.5 * x) * sech2 * du + left : left;
    dx[i] = static_cast<double>(dyf[i]) * g;
  }
}

/// keepᵢ ? xᵢ/(1 − p) : +0, keepᵢ from Philox exactly as the reference (dropout_keep with the float p);
/// the backward maps dy the same way.
void dropout(const Call& c) {
  const auto seed = static_cast<uint64_t>(c.attrs.ints[0]);
  const auto step = static_cast<uint32_t>(c.attrs.ints[1]), site = static_cast<uint32_t>(c.attrs.ints[2]);
  const float p = c.attrs.floats[0];
  const double s = 1.0 / (1.0 - static_cast<double>(p));
  const float* x = c.in[0]->data();
  double* y = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i)
    y[i] = dropout_keep(seed, step, site, p, static_cast<int64_t>(i)) ? static_cast<double>(x[i]) * s : 0.0;
}

void scale(const Call& c) {
  const float* x = c.in[0]->data();
  const double s = (*c.in[1])[0];
  double* y = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) y[i] = static_cast<double>(x[i]) * s;
}

}  // namespace tribunal::f64
