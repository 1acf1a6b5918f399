// Float64 row-wise ops: softmax cross-entropy and its backward, softmax (causal mask) and its backward,
// layer norm (biased variance) and its backward. Sums are sequential double sums, exp this library's
// own (ops/float64/exp.h: the same bits on every machine), log and sqrt the C library's. Labels are validated
// by the reference's class_id (ops/ids.h); the running maximum and the causal mask are the reference's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/float64/exp.h"
#include "ops/float64/internal.h"
#include "ops/ids.h"

namespace tribunal::f64 {
namespace {

/// e[0..n) = exp(z − m) with m the reference's sequential maximum (z[j] > m ? z[j] : m from z[0]);
/// returns (m, Σ e).
std::pair<double, double> exp_row(const float* z, int64_t n, double* e) {
  float m = z[0];
  for (int64_t j = 1; j < n; ++j) m = z[j] > m ? z[j] : m;
  for (int64_t j = 0; j < n; ++j) e[j] = static_cast<double>(z[j]) - static_cast<double>(m);
  exp(e, e, static_cast<size_t>(n));
  double s = 0.0;
  for (int64_t j = 0; j < n; ++j) s += e[j];
  return {m, s};
}

/// fn(b, y, m, s, e) for every row b of the logits z = in[0] [B, C], rows side by side on the pool: y its
/// label (in[1], checked by class_id naming `op`), e[0..C) = exp(z[b] − m) and s their sum (exp_row).
template <class F>
void for_each_logits_row(const Call& c, const char* op, F&& fn) {
  const Tensor &z = *c.in[0], &labels = *c.in[1];
  const int64_t batch = z.shape()[0], classes = z.shape()[1];
  for_each_range(
      c, batch,
      [&](int64_t b0, int64_t b1) {
        std::vector<double> e(static_cast<size_t>(classes));
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t y = class_id(labels, b, classes, op);
          const auto [m, s] = exp_row(z.data() + b * classes, classes, e.data());
          fn(b, y, m, s, e.data());
        }
      },
      std::max<int64_t>(1, kFloat64Grain / std::max<int64_t>(classes, 1)));
}

}  // namespace

/// loss = (1/B)·Σ_b (log Σ_j exp(z[b,j] − m_b) − (z[b,y_b] − m_b)): each row's term on the pool, then
/// their sum in increasing b, as one sequential loop would.
void softmax_cross_entropy(const Call& c) {
  const Tensor& z = *c.in[0];
  const int64_t batch = z.shape()[0], classes = z.shape()[1];
  std::vector<double> terms(static_cast<size_t>(batch));
  for_each_logits_row(
      c, "softmax_cross_entropy", [&](int64_t b, int64_t y, double m, double s, const double*) {
        terms[static_cast<size_t>(b)] = std::log(s) - (static_cast<double>(z[b * classes + y]) - m);
      });
  double total = 0.0;
  for (const double t : terms) total += t;
  c.out[0][0] = total / static_cast<double>(batch);
}

/// dz[b,j] = (softmax(z[b])_j − [j = y_b])·dloss/B.
void softmax_cross_entropy_backward(const Call& c) {
  const int64_t batch = c.in[0]->shape()[0], classes = c.in[0]->shape()[1];
  const double scale = static_cast<double>((*c.in[2])[0]) / static_cast<double>(batch);
  double* dz = c.out[0].data();
  for_each_logits_row(c, "softmax_cross_entropy_backward",
                      [&](int64_t b, int64_t y, double, double s, const double* e) {
                        for (int64_t j = 0; j < classes; ++j)
                          dz[b * classes + j] = (e[j] / s - (j == y ? 1.0 : 0.0)) * scale;
                      });
}

namespace {

/// Rows of the last axis of x[…, R, N] and how many columns of each are valid (the causal mask).
struct Rows {
  int64_t count, n, r_per_block;
  bool causal;
  int64_t valid(int64_t row) const { return causal ? std::min(row % r_per_block + 1, n) : n; }
  int64_t grain() const { return std::max<int64_t>(1, kFloat64Grain / n); }  ///< rows to a thread, at least
};

Rows rows_of(const Call& c) {
  const Shape& s = c.in[0]->shape();
  const int64_t n = s[s.rank() - 1];
  return {s.numel() / n, n, s[s.rank() - 2], c.attrs.ints[0] != 0};
}

}  // namespace

/// y[n] = exp(scale·x[n] − m)/Σ over the valid n (m their maximum), +0 at masked n.
void softmax(const Call& c) {
  const Rows r = rows_of(c);
  const double scale = c.attrs.floats[0];
  const float* x = c.in[0]->data();
  double* y = c.out[0].data();
  for_each_range(
      c, r.count,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const float* xr = x + i * r.n;
          double* yr = y + i * r.n;
          const int64_t nv = r.valid(i);
          double m = scale * xr[0];
          for (int64_t j = 1; j < nv; ++j) {
            const double v = scale * xr[j];
            m = v > m ? v : m;
          }
          for (int64_t j = 0; j < nv; ++j) yr[j] = scale * xr[j] - m;
          exp(yr, yr, static_cast<size_t>(nv));  // this library's exp, SIMD-wide (ops/float64/exp.h)
          double s = 0.0;
          for (int64_t j = 0; j < nv; ++j) s += yr[j];
          for (int64_t j = 0; j < nv; ++j) yr[j] /= s;
          for (int64_t j = nv; j < r.n; ++j) yr[j] = 0.0;
        }
      },
      r.grain());
}

/// dx[n] = scale·y[n]·(dy[n] − Σ_valid y·dy), +0 at masked n.
void softmax_backward(const Call& c) {
  const Rows r = rows_of(c);
  const double scale = c.attrs.floats[0];
  const float *y = c.in[0]->data(), *dy = c.in[1]->data();
  double* dx = c.out[0].data();
  for_each_range(
      c, r.count,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t o = i * r.n, nv = r.valid(i);
          double d = 0.0;
          for (int64_t j = 0; j < nv; ++j)
            d += static_cast<double>(y[o + j]) * static_cast<double>(dy[o + j]);
          for (int64_t j = 0; j < nv; ++j)
            dx[o + j] = scale * (static_cast<double>(y[o + j]) * (static_cast<double>(dy[o + j]) - d));
          for (int64_t j = nv; j < r.n; ++j) dx[o + j] = 0.0;
        }
      },
      r.grain());
}

namespace {

struct Stats {
  double mean, rstd;
};

/// mean and 1/sqrt(var + ε) of one row (biased variance).
Stats row_stats(const float* x, int64_t d, double eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(d);
  double sq = 0.0;
  for (int64_t i = 0; i < d; ++i) {
    const double di = static_cast<double>(x[i]) - mean;
    sq += di * di;
  }
  return {mean, 1.0 / std::sqrt(sq / static_cast<double>(d) + eps)};
}

}  // namespace

/// y[m,i] = (x[m,i] − mean_m)·rstd_m·γ[i] + β[i].
void layer_norm(const Call& c) {
  const Tensor &x = *c.in[0], &gamma = *c.in[1], &beta = *c.in[2];
  const int64_t m = x.shape()[0], d = x.shape()[1];
  const double eps = c.attrs.floats[0];
  double* y = c.out[0].data();
  for_each_range(
      c, m,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const float* xr = x.data() + r * d;
          const Stats s = row_stats(xr, d, eps);
          for (int64_t i = 0; i < d; ++i)
            y[r * d + i] = (static_cast<double>(xr[i]) - s.mean) * s.rstd * static_cast<double>(gamma[i]) +
                           static_cast<double>(beta[i]);
        }
      },
      std::max<int64_t>(1, kFloat64Grain / std::max<int64_t>(d, 1)));
}

/// x̂ = (x − mean)·rstd, g = dy·γ: dx = rstd·((g − mean(g)) − x̂·mean(g·x̂)); dγ[j] = Σ_m dy·x̂;
/// dβ[j] = Σ_m dy (rows in increasing m).
void layer_norm_backward(const Call& c) {
  const Tensor &x = *c.in[0], &gamma = *c.in[1], &dy = *c.in[2];
  const int64_t m = x.shape()[0], d = x.shape()[1];
  const double eps = c.attrs.floats[0], df = static_cast<double>(d);
  double *dx = c.out[0].data(), *dgamma = c.out[1].data(), *dbeta = c.out[2].data();
  // dx row by row on the pool, keeping each row's statistics; then dγ and dβ column by column on the
  // pool, each a sum over the rows in increasing m: every value's operations and order are one
  // sequential loop's, whatever the split.
  std::vector<Stats> stats(static_cast<size_t>(m));
  for_each_range(
      c, m,
      [&](int64_t r0, int64_t r1) {
        std::vector<double> xhat(static_cast<size_t>(d)), g(static_cast<size_t>(d));
        for (int64_t r = r0; r < r1; ++r) {
          const float *xr = x.data() + r * d, *dyr = dy.data() + r * d;
          const Stats s = stats[static_cast<size_t>(r)] = row_stats(xr, d, eps);
          double sum_g = 0.0, sum_gx = 0.0;
          for (int64_t i = 0; i < d; ++i) {
            const auto k = static_cast<size_t>(i);
            xhat[k] = (static_cast<double>(xr[i]) - s.mean) * s.rstd;
            g[k] = static_cast<double>(dyr[i]) * static_cast<double>(gamma[i]);
            sum_g += g[k];
            sum_gx += g[k] * xhat[k];
          }
          const double a = sum_g / df, b = sum_gx / df;
          for (int64_t i = 0; i < d; ++i) {
            const auto k = static_cast<size_t>(i);
            dx[r * d + i] = s.rstd * ((g[k] - a) - xhat[k] * b);
          }
        }
      },
      std::max<int64_t>(1, kFloat64Grain / std::max<int64_t>(d, 1)));
  for_each_range(
      c, d,
      [&](int64_t i0, int64_t i1) {
        std::fill(dgamma + i0, dgamma + i1, 0.0);  // sums (run_float64 does not zero them)
        std::fill(dbeta + i0, dbeta + i1, 0.0);
        for (int64_t r = 0; r < m; ++r) {
          const float *xr = x.data() + r * d, *dyr = dy.data() + r * d;
          const Stats s = stats[static_cast<size_t>(r)];
          for (int64_t i = i0; i < i1; ++i) {
            dgamma[i] += static_cast<double>(dyr[i]) * ((static_cast<double>(xr[i]) - s.mean) * s.rstd);
            dbeta[i] += dyr[i];
          }
        }
      },
      std::max<int64_t>(64, kFloat64Grain / std::max<int64_t>(m, 1)));  // whole cache lines of columns
}

}  // namespace tribunal::f64
