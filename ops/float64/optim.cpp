// Float64 optimizer updates and gradient clipping: SgdMomentum, AdamW (all outputs), SumSquares,
// ClipCoefficient. The reference's update formulas (docs/numerics.md "SGD with momentum", "AdamW",
// "Gradient clipping") with every operation in double.
#include <cmath>

#include "ops/float64/internal.h"

namespace tribunal::f64 {

/// floats {lr, μ, wd}: g′ = g + wd·p (wd ≠ 0); v′ = μ·v + g′; p′ = p − lr·v′.
void sgd_momentum(const Call& c) {
  const double lr = c.attrs.floats[0], mu = c.attrs.floats[1], wd = c.attrs.floats[2];
  const float *p = c.in[0]->data(), *g = c.in[1]->data(), *v = c.in[2]->data();
  double *p2 = c.out[0].data(), *v2 = c.out[1].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) {
    const double pi = p[i];
    const double gi = wd != 0.0 ? static_cast<double>(g[i]) + wd * pi : static_cast<double>(g[i]);
    const double vi = mu * static_cast<double>(v[i]) + gi;
    v2[i] = vi;
    p2[i] = pi - lr * vi;
  }
}

namespace {

/// b^t by square-and-multiply over the bits of t from the lowest (the reference's powi, in double).
double powi(double b, int64_t t) {
  double result = 1.0;
  for (double base = b; t > 0; t >>= 1) {
    if (t & 1) result = result * base;
    base = base * base;
  }
  return result;
}

}  // namespace

/// floats {lr, β1, β2, ε, wd}, ints {t}: bc1 = 1 − β1^t, bc2 = 1 − β2^t, step = lr/bc1, decay = 1 − lr·wd;
/// m′ = β1·m + (1−β1)·g; v′ = β2·v + (1−β2)·g²; p′ = p·decay − step·m′/(sqrt(v′)/sqrt(bc2) + ε).
void adamw(const Call& c) {
  const double lr = c.attrs.floats[0], b1 = c.attrs.floats[1], b2 = c.attrs.floats[2],
               eps = c.attrs.floats[3], wd = c.attrs.floats[4];
  const int64_t t = c.attrs.ints[0];
  const double bc1 = 1.0 - powi(b1, t), bc2 = 1.0 - powi(b2, t);
  const double step = lr / bc1, sbc2 = std::sqrt(bc2), decay = 1.0 - lr * wd;
  const double omb1 = 1.0 - b1, omb2 = 1.0 - b2;
  const float *p = c.in[0]->data(), *g = c.in[1]->data(), *m = c.in[2]->data(), *v = c.in[3]->data();
  double *p2 = c.out[0].data(), *m2 = c.out[1].data(), *v2 = c.out[2].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const double gi = g[i];
      const double mi = b1 * static_cast<double>(m[i]) + omb1 * gi;
      const double vi = b2 * static_cast<double>(v[i]) + omb2 * (gi * gi);
      m2[i] = mi;
      v2[i] = vi;
      p2[i] = static_cast<double>(p[i]) * decay - step * (mi / (std::sqrt(vi) / sbc2 + eps));
    }
  });
}

/// Σ xᵢ², i in row-major order.
void sum_squares(const Call& c) {
  const Tensor& x = *c.in[0];
  double s = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) s += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  c.out[0][0] = s;
}

/// min(1, max_norm/(sqrt(Σ sᵢ) + 1e-6)); written c > 1 ? 1 : c, so a NaN stays NaN (as the reference).
void clip_coefficient(const Call& c) {
  double total = 0.0;
  for (const Tensor* s : c.in) total += (*s)[0];
  const double coef = static_cast<double>(c.attrs.floats[0]) / (std::sqrt(total) + 1e-6);
  c.out[0][0] = coef > 1.0 ? 1.0 : coef;
}

}  // namespace tribunal::f64
