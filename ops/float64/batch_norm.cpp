// Float64 batch normalization in training mode, its backward, the running statistics' update and the
// inference form: each channel's M = N·spatial elements
// (x[n, c, s], in increasing n·S + s) reduced by sequential double sums, sqrt the C library's.
#include <cmath>
#include <vector>

#include "ops/float64/internal.h"

namespace tribunal::f64 {
namespace {

/// x viewed as [n, c, s].
struct Geom {
  int64_t n, c, s;
  int64_t at(int64_t ch, int64_t k) const { return ((k / s) * c + ch) * s + k % s; }
  int64_t m() const { return n * s; }
};

Geom geom_of(const Tensor& x) {
  Geom g{x.shape()[0], x.shape()[1], 1};
  for (int d = 2; d < x.shape().rank(); ++d) g.s *= x.shape()[d];
  return g;
}

/// The mean and Σ(x − mean)² of channel ch.
struct Stats {
  double mean, sum_sq;
};

Stats channel_stats(const float* x, const Geom& g, int64_t ch) {
  double sum = 0.0;
  for (int64_t k = 0; k < g.m(); ++k) sum += x[g.at(ch, k)];
  const double mean = sum / static_cast<double>(g.m());
  double sq = 0.0;
  for (int64_t k = 0; k < g.m(); ++k) {
    const double d = static_cast<double>(x[g.at(ch, k)]) - mean;
    sq += d * d;
  }
  return {mean, sq};
}

double rstd_of(const Stats& s, const Geom& g, double eps) {
  return 1.0 / std::sqrt(s.sum_sq / static_cast<double>(g.m()) + eps);
}

}  // namespace

/// y = (x − mean_c)·rstd_c·γ_c + β_c with the channel's batch mean and biased variance.
void batch_norm(const Call& c) {
  const Tensor &x = *c.in[0], &gamma = *c.in[1], &beta = *c.in[2];
  const Geom g = geom_of(x);
  double* y = c.out[0].data();
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const Stats s = channel_stats(x.data(), g, ch);
    const double rstd = rstd_of(s, g, c.attrs.floats[0]);
    for (int64_t k = 0; k < g.m(); ++k) {
      const int64_t i = g.at(ch, k);
      y[i] = (static_cast<double>(x[i]) - s.mean) * rstd * static_cast<double>(gamma[ch]) +
             static_cast<double>(beta[ch]);
    }
  }
}

/// x̂ = (x − mean)·rstd, g = dy·γ: dx = rstd·((g − mean(g)) − x̂·mean(g·x̂)); dγ_c = Σ dy·x̂; dβ_c = Σ dy.
void batch_norm_backward(const Call& c) {
  const Tensor &x = *c.in[0], &gamma = *c.in[1], &dy = *c.in[2];
  const Geom g = geom_of(x);
  const double mf = static_cast<double>(g.m());
  double *dx = c.out[0].data(), *dgamma = c.out[1].data(), *dbeta = c.out[2].data();
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const Stats s = channel_stats(x.data(), g, ch);
    const double rstd = rstd_of(s, g, c.attrs.floats[0]);
    double sum_g = 0.0, sum_gx = 0.0;
    for (int64_t k = 0; k < g.m(); ++k) {
      const int64_t i = g.at(ch, k);
      const double xh = (static_cast<double>(x[i]) - s.mean) * rstd, dyi = dy[i];
      const double gi = dyi * static_cast<double>(gamma[ch]);
      sum_g += gi;
      sum_gx += gi * xh;
      dgamma[ch] += dyi * xh;
      dbeta[ch] += dyi;
    }
    const double a = sum_g / mf, b = sum_gx / mf;
    for (int64_t k = 0; k < g.m(); ++k) {
      const int64_t i = g.at(ch, k);
      const double xh = (static_cast<double>(x[i]) - s.mean) * rstd;
      dx[i] = rstd * ((static_cast<double>(dy[i]) * static_cast<double>(gamma[ch]) - a) - xh * b);
    }
  }
}

/// running' = running·momentum + stat·(1 − momentum), stat the channel's mean, Σ(x − mean)²/M or /(M − 1).
void batch_norm_running(const Call& c) {
  const Tensor &running = *c.in[0], &x = *c.in[1];
  const Geom g = geom_of(x);
  const double momentum = c.attrs.floats[0];
  for (int64_t ch = 0; ch < g.c; ++ch) {
    const Stats s = channel_stats(x.data(), g, ch);
    const int64_t stat = c.attrs.ints[0];
    const double v = stat == 0 ? s.mean : s.sum_sq / static_cast<double>(stat == 1 ? g.m() : g.m() - 1);
    c.out[0][static_cast<size_t>(ch)] = static_cast<double>(running[ch]) * momentum + v * (1.0 - momentum);
  }
}

/// y = (x − mean_c)/sqrt(var_c + ε)·γ_c + β_c.
void batch_norm_inference(const Call& c) {
  const Tensor &x = *c.in[0], &gamma = *c.in[1], &beta = *c.in[2], &mean = *c.in[3], &var = *c.in[4];
  const Geom g = geom_of(x);
  const double eps = c.attrs.floats[0];
  double* y = c.out[0].data();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t ch = (i / g.s) % g.c;
    const double rstd = 1.0 / std::sqrt(static_cast<double>(var[ch]) + eps);
    y[i] =
        (static_cast<double>(x[i]) - static_cast<double>(mean[ch])) * rstd * static_cast<double>(gamma[ch]) +
        static_cast<double>(beta[ch]);
  }
}

}  // namespace tribunal::f64
