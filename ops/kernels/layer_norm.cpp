// Layer normalization over the last axis (Ba, Kiros & Hinton, "Layer Normalization", 2016; PyTorch
// nn.LayerNorm with the biased variance), docs/numerics.md "LayerNorm". x[M, D], γ[D], β[D];
// floats = {ε}. With Df = float(D) (exact for D ≤ 2^24), per row:
//   mean  = canonical_sum(x[0..D)) / Df
//   d[i]  = x[i] − mean
//   var   = canonical_sum(d[i]·d[i]) / Df
//   rstd  = 1 / sqrt(var + ε)
//   y[i]  = fma(d[i]·rstd, γ[i], β[i])
// Backward (x, γ, dy → dx, dγ, dβ), mean and rstd recomputed by the same sequence, x̂[i] = d[i]·rstd:
//   g[i]  = dy[i]·γ[i]
//   a     = canonical_sum(g[i]) / Df;   b = canonical_sum(g[i]·x̂[i]) / Df
//   dx[i] = rstd·((g[i] − a) − x̂[i]·b)
//   dγ[j] = canonical sum over rows m of dy[m,j]·x̂[m,j];   dβ[j] = canonical sum over rows m of dy[m,j]
// which is PyTorch's layer_norm backward written with the canonical reduction.
//
// Threads split rows for y; for the backward, see layer_norm_backward_fast. SIMD lanes hold the row
// sums' 32 canonical lanes (vec_math.h); the column sums keep theirs as the 32 rows of a [32][D] buffer
// (lane k: the rows r with r mod 32 = k, in order), folded by the same tree: every path and thread count
// gives the same bits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/kernels/scratch.h"
#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

/// Elements per thread at least.
constexpr int64_t kGrainElements = 4096;

/// Columns of dγ and dβ accumulated in one pass of the SIMD backward: 2 × 32 lanes of 2^15 floats, 8 MiB.
constexpr int64_t kLaneColumns = int64_t{1} << 15;

struct RowStats {
  float mean, rstd;
};

/// rstd from the canonical sum of d·d, shared by every path: 1 / sqrt(sum/Df + ε).
inline float rstd_of(float sum_sq, float df, float eps) {
  return 1.0f / std::sqrt(sum_sq / df + eps);
}

// ---- Scalar: the contract, literally ------------------------------------------------------------

/// Row statistics; `tmp` holds at least d floats.
RowStats stats_scalar(const float* x, int64_t d, float eps, float* tmp) {
  const float df = static_cast<float>(d);
  const float mean = canonical_sum(x, d) / df;
  for (int64_t i = 0; i < d; ++i) {
    const float di = x[i] - mean;
    tmp[i] = di * di;
  }
  return {mean, rstd_of(canonical_sum(tmp, d), df, eps)};
}

void norm_row_scalar(const float* x, const float* gamma, const float* beta, float* y, int64_t d, float eps,
                     float* tmp) {
  const RowStats s = stats_scalar(x, d, eps, tmp);
  for (int64_t i = 0; i < d; ++i) y[i] = fma32((x[i] - s.mean) * s.rstd, gamma[i], beta[i]);
}

/// dx of one row; returns its statistics (for the column sums). `tmp` holds at least 2·d floats.
RowStats norm_grad_row_scalar(const float* x, const float* gamma, const float* dy, float* dx, int64_t d,
                              float eps, float* tmp) {
  const RowStats s = stats_scalar(x, d, eps, tmp);
  const float df = static_cast<float>(d);
  float *g = tmp, *gx = tmp + d;
  for (int64_t i = 0; i < d; ++i) {
    g[i] = dy[i] * gamma[i];
    gx[i] = g[i] * ((x[i] - s.mean) * s.rstd);
  }
  const float a = canonical_sum(g, d) / df, b = canonical_sum(gx, d) / df;
  for (int64_t i = 0; i < d; ++i) dx[i] = s.rstd * ((g[i] - a) - ((x[i] - s.mean) * s.rstd) * b);
  return s;
}

/// dγ[j], dβ[j] for columns [j0, j1); `tmp` holds at least m floats.
void columns_scalar(const float* x, const float* dy, const RowStats* st, int64_t m, int64_t d, int64_t j0,
                    int64_t j1, float* dgamma, float* dbeta, float* tmp) {
  for (int64_t j = j0; j < j1; ++j) {
    for (int64_t r = 0; r < m; ++r) tmp[r] = dy[r * d + j] * ((x[r * d + j] - st[r].mean) * st[r].rstd);
    dgamma[j] = canonical_sum(tmp, m);
    dbeta[j] = canonical_sum(dy + j, m, d);
  }
}

// ---- SIMD ---------------------------------------------------------------------------------------

#define TRIBUNAL_LAYER_NORM_KERNELS(NS, TARGET, V)                                                        \
  namespace NS {                                                                                          \
  /* The first n (1..W) floats at p as a vector, +0 past them. */                                         \
  TARGET inline V::vf ld(const float* p, int n) {                                                         \
    return n == V::W ? V::load(p) : V::loadn(p, n);                                                       \
  }                                                                                                       \
  TARGET inline void st(float* p, V::vf v, int n) {                                                       \
    if (n == V::W)                                                                                        \
      V::store(p, v);                                                                                     \
    else                                                                                                  \
      V::storen(p, v, n);                                                                                 \
  }                                                                                                       \
  TARGET RowStats stats(const float* x, int64_t d, float eps) {                                           \
    const float df = static_cast<float>(d);                                                               \
    V::Acc32 acc = V::acc_zero();                                                                         \
    for (int64_t j = 0; j < d; j += kReduceLanes)                                                         \
      for (int p = 0; p < V::Acc32::kParts && j + p * V::W < d; ++p) {                                    \
        const int c = static_cast<int>(std::min<int64_t>(V::W, d - j - p * V::W));                        \
        V::acc_add(acc, p, ld(x + j + p * V::W, c), c);                                                   \
      }                                                                                                   \
    const float mean = V::acc_fold(acc) / df;                                                             \
    const V::vf vm = V::set1(mean);                                                                       \
    acc = V::acc_zero();                                                                                  \
    for (int64_t j = 0; j < d; j += kReduceLanes)                                                         \
      for (int p = 0; p < V::Acc32::kParts && j + p * V::W < d; ++p) {                                    \
        const int c = static_cast<int>(std::min<int64_t>(V::W, d - j - p * V::W));                        \
        const V::vf di = V::sub(ld(x + j + p * V::W, c), vm);                                             \
        V::acc_add(acc, p, V::mul(di, di), c);                                                            \
      }                                                                                                   \
    return {mean, rstd_of(V::acc_fold(acc), df, eps)};                                                    \
  }                                                                                                       \
  TARGET void norm_row(const float* x, const float* gamma, const float* beta, float* y, int64_t d,        \
                       float eps) {                                                                       \
    const RowStats s = stats(x, d, eps);                                                                  \
    const V::vf vm = V::set1(s.mean), vr = V::set1(s.rstd);                                               \
    for (int64_t j = 0; j < d; j += V::W) {                                                               \
      const int c = static_cast<int>(std::min<int64_t>(V::W, d - j));                                     \
      st(y + j, V::fma(V::mul(V::sub(ld(x + j, c), vm), vr), ld(gamma + j, c), ld(beta + j, c)), c);      \
    }                                                                                                     \
  }                                                                                                       \
  /* dx[j0, j1) of one row, and the row's terms added to its canonical lane of those columns' sums:       \
     lane_g[j − j0] += dy[j]·x̂[j] (dγ), lane_b[j − j0] += dy[j] (dβ). */                         \
  TARGET void norm_grad_row(const float* x, const float* gamma, const float* dy, float* dx, int64_t d,    \
                            float eps, int64_t j0, int64_t j1, float* lane_g, float* lane_b) {            \
    const RowStats s = stats(x, d, eps);                                                                  \
    const float df = static_cast<float>(d);                                                               \
    const V::vf vm = V::set1(s.mean), vr = V::set1(s.rstd);                                               \
    V::Acc32 acc_g = V::acc_zero(), acc_gx = V::acc_zero();                                               \
    for (int64_t j = 0; j < d; j += kReduceLanes)                                                         \
      for (int p = 0; p < V::Acc32::kParts && j + p * V::W < d; ++p) {                                    \
        const int64_t o = j + p * V::W;                                                                   \
        const int c = static_cast<int>(std::min<int64_t>(V::W, d - o));                                   \
        const V::vf g = V::mul(ld(dy + o, c), ld(gamma + o, c));                                          \
        const V::vf xh = V::mul(V::sub(ld(x + o, c), vm), vr);                                            \
        V::acc_add(acc_g, p, g, c);                                                                       \
        V::acc_add(acc_gx, p, V::mul(g, xh), c);                                                          \
      }                                                                                                   \
    const V::vf va = V::set1(V::acc_fold(acc_g) / df), vb = V::set1(V::acc_fold(acc_gx) / df);            \
    for (int64_t j = j0; j < j1; j += V::W) {                                                             \
      const int c = static_cast<int>(std::min<int64_t>(V::W, j1 - j));                                    \
      const V::vf vdy = ld(dy + j, c), g = V::mul(vdy, ld(gamma + j, c));                                 \
      const V::vf xh = V::mul(V::sub(ld(x + j, c), vm), vr);                                              \
      st(dx + j, V::mul(vr, V::sub(V::sub(g, va), V::mul(xh, vb))), c);                                   \
      st(lane_g + (j - j0), V::add(ld(lane_g + (j - j0), c), V::mul(vdy, xh)), c);                        \
      st(lane_b + (j - j0), V::add(ld(lane_b + (j - j0), c), vdy), c);                                    \
    }                                                                                                     \
  }                                                                                                       \
  /* The canonical fold of the 32 lanes [kReduceLanes][d] of each column, in place; lane 0 is the sum. */ \
  TARGET void fold_lanes(float* lanes, int64_t d) {                                                       \
    for (int w = kReduceLanes / 2; w >= 1; w /= 2)                                                        \
      for (int k = 0; k < w; ++k)                                                                         \
        for (int64_t j = 0; j < d; j += V::W) {                                                           \
          const int c = static_cast<int>(std::min<int64_t>(V::W, d - j));                                 \
          st(lanes + k * d + j, V::add(ld(lanes + k * d + j, c), ld(lanes + (k + w) * d + j, c)), c);     \
        }                                                                                                 \
  }                                                                                                       \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_LAYER_NORM_KERNELS)
#undef TRIBUNAL_LAYER_NORM_KERNELS

// ---- Shapes and dispatch -------------------------------------------------------------------------

void check_common(const char* op, const Attrs& a, std::span<const Shape> in) {
  const Shape &x = in[0], &gamma = in[1];
  op_require(x.rank() == 2 && x[0] >= 1 && x[1] >= 1, op, "x must be [M ≥ 1, D ≥ 1], got " + x.str());
  op_require(x[1] <= (int64_t{1} << 24), op, "D must be ≤ 2^24 (so float(D) is exact), got " + x.str());
  op_require(gamma.rank() == 1 && gamma[0] == x[1], op,
             "γ must be [" + std::to_string(x[1]) + "], got " + gamma.str());
  op_require(std::isfinite(a.floats[0]) && a.floats[0] >= 0.0f, op,
             "ε must be finite and ≥ 0, got " + std::to_string(a.floats[0]));
}

std::vector<Shape> layer_norm_infer(const Attrs& a, std::span<const Shape> in) {
  check_common("layer_norm", a, in);
  op_require(in[2] == in[1], "layer_norm",
             "β must be [" + std::to_string(in[0][1]) + "], got " + in[2].str());
  return {in[0]};
}

std::vector<Shape> layer_norm_backward_infer(const Attrs& a, std::span<const Shape> in) {
  check_common("layer_norm_backward", a, in);
  op_require(in[2] == in[0], "layer_norm_backward",
             "dy must have x's shape " + in[0].str() + ", got " + in[2].str());
  return {in[0], in[1], in[1]};
}

int64_t grain_for(int64_t len) {
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, len));
}

void layer_norm_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const int64_t m = in[0]->shape()[0], d = in[0]->shape()[1];
  std::vector<float> tmp(static_cast<size_t>(d));
  for (int64_t r = 0; r < m; ++r)
    norm_row_scalar(in[0]->data() + r * d, in[1]->data(), in[2]->data(), out[0]->data() + r * d, d,
                    a.floats[0], tmp.data());
}

void layer_norm_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                     ThreadPool& pool) {
  const int64_t m = in[0]->shape()[0], d = in[0]->shape()[1];
  const float eps = a.floats[0];
  const SimdPath path = active_simd_path();
  const float *x = in[0]->data(), *gamma = in[1]->data(), *beta = in[2]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      m,
      [&](int64_t r0, int64_t r1) {
        std::vector<float> tmp(path == SimdPath::Scalar ? static_cast<size_t>(d) : 0);
        for (int64_t r = r0; r < r1; ++r) {
          switch (path) {
            TRIBUNAL_SIMD_CASES(isa::norm_row(x + r * d, gamma, beta, y + r * d, d, eps))
            case SimdPath::Scalar:
              norm_row_scalar(x + r * d, gamma, beta, y + r * d, d, eps, tmp.data());
              break;
          }
        }
      },
      grain_for(d));
}

void layer_norm_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                                   std::span<Tensor* const> out) {
  const int64_t m = in[0]->shape()[0], d = in[0]->shape()[1];
  const float *x = in[0]->data(), *dy = in[2]->data();
  std::vector<float> tmp(static_cast<size_t>(std::max(2 * d, m)));
  std::vector<RowStats> stats(static_cast<size_t>(m));
  for (int64_t r = 0; r < m; ++r)
    stats[static_cast<size_t>(r)] = norm_grad_row_scalar(x + r * d, in[1]->data(), dy + r * d,
                                                         out[0]->data() + r * d, d, a.floats[0], tmp.data());
  columns_scalar(x, dy, stats.data(), m, d, 0, d, out[1]->data(), out[2]->data(), tmp.data());
}

/// The scalar path: the reference's two passes (rows, then columns), threads splitting each.
void layer_norm_backward_scalar(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                                float* dbeta, int64_t m, int64_t d, float eps, ThreadPool& pool) {
  std::vector<RowStats> stats(static_cast<size_t>(m));
  pool.parallel_for(
      m,
      [&](int64_t r0, int64_t r1) {
        std::vector<float> tmp(static_cast<size_t>(2 * d));
        for (int64_t r = r0; r < r1; ++r)
          stats[static_cast<size_t>(r)] =
              norm_grad_row_scalar(x + r * d, gamma, dy + r * d, dx + r * d, d, eps, tmp.data());
      },
      grain_for(d));
  pool.parallel_for(
      d,
      [&](int64_t j0, int64_t j1) {
        std::vector<float> tmp(static_cast<size_t>(m));
        columns_scalar(x, dy, stats.data(), m, d, j0, j1, dgamma, dbeta, tmp.data());
      },
      grain_for(m));
}

// The SIMD paths read x and dy once: each row's pass adds its dγ and dβ terms to the canonical lane
// r mod 32 of every column sum, and threads split the 32 lanes (each thread takes the rows of its lanes,
// in order), so every lane's chain stays on one thread in the order of the contract; the lanes are
// folded after. A pass over columns instead strides through x and dy a row apart, which the hardware
// prefetchers do not follow (more than 2 KiB): twice the op's time at GPT-2-small dimensions. Rows
// wider than kLaneColumns are done in blocks of columns (each block's pass recomputes the row's
// statistics), so the lanes stay within 8 MiB for any D.
void layer_norm_backward_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                              ThreadPool& pool) {
  const int64_t m = in[0]->shape()[0], d = in[0]->shape()[1];
  const float eps = a.floats[0];
  const SimdPath path = active_simd_path();
  const float *x = in[0]->data(), *gamma = in[1]->data(), *dy = in[2]->data();
  float *dx = out[0]->data(), *dgamma = out[1]->data(), *dbeta = out[2]->data();
  if (path == SimdPath::Scalar)
    return layer_norm_backward_scalar(x, gamma, dy, dx, dgamma, dbeta, m, d, eps, pool);
  thread_local ScratchBuffer lanes_buf;
  const int64_t width = std::min(d, kLaneColumns);
  float* lane_g = scratch(lanes_buf, 2 * kReduceLanes * width);  // [kReduceLanes][width] for dγ, then dβ
  float* lane_b = lane_g + kReduceLanes * width;
  const int64_t rows_per_lane = (m + kReduceLanes - 1) / kReduceLanes;
  for (int64_t j0 = 0; j0 < d; j0 += width) {
    const int64_t j1 = std::min(d, j0 + width), w = j1 - j0;
    std::fill(lane_g, lane_g + 2 * kReduceLanes * width, 0.0f);
    pool.parallel_for(
        kReduceLanes,
        [&](int64_t l0, int64_t l1) {
          for (int64_t base = 0; base < m; base += kReduceLanes)
            for (int64_t l = l0; l < l1 && base + l < m; ++l) {
              const int64_t o = (base + l) * d;
              switch (path) {
                TRIBUNAL_SIMD_CASES(isa::norm_grad_row(x + o, gamma, dy + o, dx + o, d, eps, j0, j1,
                                                       lane_g + l * w, lane_b + l * w))
                case SimdPath::Scalar:
                  break;  // handled above
              }
            }
        },
        grain_for(rows_per_lane * d));
    switch (path) {
      TRIBUNAL_SIMD_CASES(isa::fold_lanes(lane_g, w); isa::fold_lanes(lane_b, w))
      case SimdPath::Scalar:
        break;
    }
    std::copy(lane_g, lane_g + w, dgamma + j0);
    std::copy(lane_b, lane_b + w, dbeta + j0);
  }
}

void layer_norm_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0] && !a.needs_grad[1] && !a.needs_grad[2]) return;
  const std::vector<ValueRef> grads =
      g.emit_all(OpKind::LayerNormBackward, a.attrs, {a.inputs[0], a.inputs[1], a.out_grads[0]});
  for (size_t i = 0; i < 3; ++i)
    if (a.needs_grad[i]) in_grads[i] = grads[i];
}

}  // namespace

/// LayerNorm: x[M ≥ 1, D ≥ 1], γ[D], β[D]; floats {ε ≥ 0, finite} → y[M, D] (Ba et al. 2016, biased
/// variance). OpError on mismatched shapes or a bad ε.
const OpInfo kLayerNormOp{.kind = OpKind::LayerNorm,
                          .name = "layer_norm",
                          .num_inputs = 3,
                          .num_outputs = 1,
                          .num_ints = 0,
                          .num_floats = 1,
                          .infer = layer_norm_infer,
                          .reference = layer_norm_reference,
                          .fast = layer_norm_fast,
                          .vjp = layer_norm_vjp,
                          .float64 = f64::layer_norm,
                          .float64_spread = Float64Spread::Sum};
/// LayerNormBackward: x[M, D], γ[D], dy[M, D]; floats {ε} → dx[M, D], dγ[D], dβ[D].
const OpInfo kLayerNormBackwardOp{.kind = OpKind::LayerNormBackward,
                                  .name = "layer_norm_backward",
                                  .num_inputs = 3,
                                  .num_outputs = 3,
                                  .num_ints = 0,
                                  .num_floats = 1,
                                  .infer = layer_norm_backward_infer,
                                  .reference = layer_norm_backward_reference,
                                  .fast = layer_norm_backward_fast,
                                  .vjp = nullptr,
                                  .float64 = f64::layer_norm_backward,
                                  .float64_spread = Float64Spread::Sum};

}  // namespace tribunal
