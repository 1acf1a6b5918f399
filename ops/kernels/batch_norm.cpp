// Batch normalization (Ioffe & Szegedy, "Batch Normalization", ICML 2015; ONNX BatchNormalization-15,
// PyTorch nn.BatchNorm1d/2d), docs/numerics.md "Batch normalization". x[N, C] or [N, C, L] or
// [N, C, H, W]: channel axis 1, S = the product of the dims after it (1 for rank 2). Channel c's
// M = N·S elements, in the canonical order k = n·S + s (x[n, c, s] with the spatial dims flattened), are
// reduced exactly as one LayerNorm row of length M; with Mf = float(M) (exact for M ≤ 2^24):
//   mean   = canonical_sum(x_k) / Mf
//   sum_sq = canonical_sum((x_k − mean)·(x_k − mean));   var = sum_sq / Mf  (biased)
//   rstd   = 1 / sqrt(var + ε)
//   y_k    = fma((x_k − mean)·rstd, γ_c, β_c)
// Backward (x, γ, dy → dx, dγ, dβ), the statistics recomputed by the same function, x̂_k = (x_k − mean)·rstd:
//   g_k   = dy_k·γ_c;   a = canonical_sum(g_k) / Mf;   b = canonical_sum(g_k·x̂_k) / Mf
//   dx_k  = rstd·((g_k − a) − x̂_k·b);   dγ_c = canonical_sum(dy_k·x̂_k);   dβ_c = canonical_sum(dy_k)
// which is LayerNorm's backward with the reduction axes changed (PyTorch's batch_norm backward in
// training mode).
// Running statistics (running[C], x; ints {stat}; floats {momentum}), ONNX's convention (momentum weighs
// the old value): stat_c = mean (0), var = sum_sq / Mf (1) or sum_sq / float(M − 1) (2, PyTorch's
// unbiased running_var; M ≥ 2), then running'_c = running_c·momentum + stat_c·(1 − momentum): two
// rounded products and one add, 1 − momentum rounded once.
// Inference (x, γ, β, mean[C], var[C]; floats {ε}): rstd_c = 1 / sqrt(var_c + ε);
// y = fma((x − mean_c)·rstd_c, γ_c, β_c), the training form's expression on given statistics.
//
// Every channel is independent: threads split the channels, and each channel's sums run in the contract's
// scalar order on a contiguous copy of the channel, so every SIMD path and thread count gives the
// reference's bits. The sums are ops/reduce.h's canonical_sum written 32 elements at a time (lane_sum):
// the same additions in the same order, in a form the compiler can keep in vector registers. The fast
// forward runs y's fma lane by lane on the active SIMD path (vec_math.h), the scalar sequence per lane.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

/// Channels per thread at least, scaled by the channel length (grain_for below).
constexpr int64_t kGrainElements = 4096;
constexpr int64_t kMaxChannelElements = int64_t{1} << 24;

/// x viewed as [n, c, s].
struct BnGeom {
  int64_t n = 0, c = 0, s = 0;
  int64_t m() const { return n * s; }
};

BnGeom geom_of(const Shape& x) {
  BnGeom g{x[0], x[1], 1};
  for (int d = 2; d < x.rank(); ++d) g.s *= x[d];
  return g;
}

/// Channel c's elements in the canonical order k = n·S + s, copied to xc[0..M).
void gather_channel(const float* x, const BnGeom& g, int64_t c, float* xc) {
  for (int64_t n = 0; n < g.n; ++n)
    std::memcpy(xc + n * g.s, x + (n * g.c + c) * g.s, static_cast<size_t>(g.s) * sizeof(float));
}

/// yc[0..M) written back to channel c of y (the inverse of gather_channel).
void scatter_channel(const float* yc, const BnGeom& g, int64_t c, float* y) {
  for (int64_t n = 0; n < g.n; ++n)
    std::memcpy(y + (n * g.c + c) * g.s, yc + n * g.s, static_cast<size_t>(g.s) * sizeof(float));
}

/// The canonical sum (ops/reduce.h) of f(k), k in [0, n): lane j adds f(j), f(j + 32), … from +0, then
/// the fixed tree. Written block by block so that each block's 32 independent adds can be vectorized.
template <class F>
float lane_sum(int64_t n, F f) {
  float lane[kReduceLanes];
  for (int j = 0; j < kReduceLanes; ++j) lane[j] = 0.0f;
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes)
    for (int j = 0; j < kReduceLanes; ++j) lane[j] = lane[j] + f(i + j);
  for (int j = 0; i + j < n; ++j) lane[j] = lane[j] + f(i + j);
  for (int w = kReduceLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = lane[j] + lane[j + w];
  return lane[0];
}

/// The statistics of one channel: mean and the canonical sum of squared deviations.
struct ChannelStats {
  float mean, sum_sq;
};

/// The one per-channel statistic of batch_norm, batch_norm_backward and batch_norm_running, so the three
/// agree bit for bit: xc is the gathered channel (M ≥ 1 elements).
ChannelStats channel_stats(const float* xc, int64_t m) {
  const float mf = static_cast<float>(m);
  const float mean = lane_sum(m, [=](int64_t k) { return xc[k]; }) / mf;
  const float sum_sq = lane_sum(m, [=](int64_t k) {
    const float d = xc[k] - mean;
    return d * d;
  });
  return {mean, sum_sq};
}

/// The biased variance Σ(x − mean)²/M.
inline float biased_var(const ChannelStats& s, int64_t m) {
  return s.sum_sq / static_cast<float>(m);
}

/// 1 / sqrt(var + ε), LayerNorm's rstd_of.
inline float rstd_of(const ChannelStats& s, int64_t m, float eps) {
  return 1.0f / std::sqrt(biased_var(s, m) + eps);
}

/// Per-thread buffers of channel length.
struct Scratch {
  std::vector<float> a, b, c, d;
  explicit Scratch(int64_t m, int count) {
    for (std::vector<float>* v : {&a, &b, &c, &d})
      if (count-- > 0) v->resize(static_cast<size_t>(m));
  }
};

// ---- batch_norm --------------------------------------------------------------------------------

#define TRIBUNAL_BATCH_NORM_KERNELS(NS, TARGET, V)                                                              \
  namespace NS {                                                                                                \
  /* yc[k] = fma((xc[k] − mean)·rstd, γ, β): the scalar sequence lane by lane, the tail in scalar form. */ \
  TARGET void affine(const float* xc, float* yc, int64_t m, float mean, float rstd, float gamma,                \
                     float beta) {                                                                              \
    const V::vf vm = V::set1(mean), vr = V::set1(rstd), vg = V::set1(gamma), vb = V::set1(beta);                \
    int64_t k = 0;                                                                                              \
    for (; k + V::W <= m; k += V::W)                                                                            \
      V::store(yc + k, V::fma(V::mul(V::sub(V::load(xc + k), vm), vr), vg, vb));                                \
    for (; k < m; ++k) yc[k] = fma32((xc[k] - mean) * rstd, gamma, beta);                                       \
  }                                                                                                             \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_BATCH_NORM_KERNELS)
#undef TRIBUNAL_BATCH_NORM_KERNELS

/// Channel c of y; `path` only chooses how the elementwise fma runs (the same bits on every path).
void norm_channel(const float* x, const float* gamma, const float* beta, float* y, const BnGeom& g, int64_t c,
                  float eps, Scratch& t, SimdPath path) {
  const int64_t m = g.m();
  float *xc = t.a.data(), *yc = t.b.data();
  gather_channel(x, g, c, xc);
  const ChannelStats s = channel_stats(xc, m);
  const float rstd = rstd_of(s, m, eps);
  switch (path) {
    TRIBUNAL_SIMD_CASES(isa::affine(xc, yc, m, s.mean, rstd, gamma[c], beta[c]))
    case SimdPath::Scalar:
      for (int64_t k = 0; k < m; ++k) yc[k] = fma32((xc[k] - s.mean) * rstd, gamma[c], beta[c]);
      break;
  }
  scatter_channel(yc, g, c, y);
}

/// Channels [c0, c1) over at least kGrainElements elements per thread.
int64_t grain_for(int64_t m) {
  return std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, m));
}

void batch_norm_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const BnGeom g = geom_of(in[0]->shape());
  Scratch t(g.m(), 2);
  for (int64_t c = 0; c < g.c; ++c)
    norm_channel(in[0]->data(), in[1]->data(), in[2]->data(), out[0]->data(), g, c, a.floats[0], t,
                 SimdPath::Scalar);
}

void batch_norm_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                     ThreadPool& pool) {
  const BnGeom g = geom_of(in[0]->shape());
  const SimdPath path = active_simd_path();
  pool.parallel_for(
      g.c,
      [&](int64_t c0, int64_t c1) {
        Scratch t(g.m(), 2);
        for (int64_t c = c0; c < c1; ++c)
          norm_channel(in[0]->data(), in[1]->data(), in[2]->data(), out[0]->data(), g, c, a.floats[0], t,
                       path);
      },
      grain_for(g.m()));
}

// ---- batch_norm_backward -----------------------------------------------------------------------

void norm_grad_channel(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                       float* dbeta, const BnGeom& g, int64_t c, float eps, Scratch& t) {
  const int64_t m = g.m();
  const float mf = static_cast<float>(m);
  float *xc = t.a.data(), *dyc = t.b.data(), *u = t.c.data(), *v = t.d.data();
  gather_channel(x, g, c, xc);
  gather_channel(dy, g, c, dyc);
  const ChannelStats s = channel_stats(xc, m);
  const float rstd = rstd_of(s, m, eps);
  const float gm = gamma[c], mean = s.mean;
  for (int64_t k = 0; k < m; ++k) {
    u[k] = dyc[k] * gm;            // g_k
    v[k] = (xc[k] - mean) * rstd;  // x̂_k
  }
  const float ga = lane_sum(m, [=](int64_t k) { return u[k]; }) / mf;
  const float gb = lane_sum(m, [=](int64_t k) { return u[k] * v[k]; }) / mf;
  dgamma[c] = lane_sum(m, [=](int64_t k) { return dyc[k] * v[k]; });
  dbeta[c] = lane_sum(m, [=](int64_t k) { return dyc[k]; });
  for (int64_t k = 0; k < m; ++k) u[k] = rstd * ((u[k] - ga) - v[k] * gb);
  scatter_channel(u, g, c, dx);
}

void batch_norm_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                                   std::span<Tensor* const> out) {
  const BnGeom g = geom_of(in[0]->shape());
  Scratch t(g.m(), 4);
  for (int64_t c = 0; c < g.c; ++c)
    norm_grad_channel(in[0]->data(), in[1]->data(), in[2]->data(), out[0]->data(), out[1]->data(),
                      out[2]->data(), g, c, a.floats[0], t);
}

void batch_norm_backward_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                              ThreadPool& pool) {
  const BnGeom g = geom_of(in[0]->shape());
  pool.parallel_for(
      g.c,
      [&](int64_t c0, int64_t c1) {
        Scratch t(g.m(), 4);
        for (int64_t c = c0; c < c1; ++c)
          norm_grad_channel(in[0]->data(), in[1]->data(), in[2]->data(), out[0]->data(), out[1]->data(),
                            out[2]->data(), g, c, a.floats[0], t);
      },
      grain_for(g.m()));
}

// ---- batch_norm_running ------------------------------------------------------------------------

enum class RunningStat : int64_t { Mean = 0, BiasedVar = 1, UnbiasedVar = 2 };

/// running'_c from channel c's statistic.
float running_channel(const float* x, float running, const BnGeom& g, int64_t c, RunningStat stat,
                      float momentum, Scratch& t) {
  const int64_t m = g.m();
  gather_channel(x, g, c, t.a.data());
  const ChannelStats s = channel_stats(t.a.data(), m);
  const float v = stat == RunningStat::Mean        ? s.mean
                  : stat == RunningStat::BiasedVar ? biased_var(s, m)
                                                   : s.sum_sq / static_cast<float>(m - 1);
  const float take = 1.0f - momentum;
  return running * momentum + v * take;
}

void batch_norm_running_reference(const Attrs& a, std::span<const Tensor* const> in,
                                  std::span<Tensor* const> out) {
  const BnGeom g = geom_of(in[1]->shape());
  Scratch t(g.m(), 1);
  for (int64_t c = 0; c < g.c; ++c)
    out[0]->data()[c] = running_channel(in[1]->data(), in[0]->data()[c], g, c,
                                        static_cast<RunningStat>(a.ints[0]), a.floats[0], t);
}

void batch_norm_running_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                             ThreadPool& pool) {
  const BnGeom g = geom_of(in[1]->shape());
  pool.parallel_for(
      g.c,
      [&](int64_t c0, int64_t c1) {
        Scratch t(g.m(), 1);
        for (int64_t c = c0; c < c1; ++c)
          out[0]->data()[c] = running_channel(in[1]->data(), in[0]->data()[c], g, c,
                                              static_cast<RunningStat>(a.ints[0]), a.floats[0], t);
      },
      grain_for(g.m()));
}

// ---- batch_norm_inference ----------------------------------------------------------------------

/// Elements [i0, i1) of y; each finds its channel and recomputes the channel's rstd (the same value).
void batch_norm_inference_range(const Attrs& a, std::span<const Tensor* const> in,
                                std::span<Tensor* const> out, int64_t i0, int64_t i1) {
  const BnGeom g = geom_of(in[0]->shape());
  const float *x = in[0]->data(), *gamma = in[1]->data(), *beta = in[2]->data(), *mean = in[3]->data(),
              *var = in[4]->data();
  const float eps = a.floats[0];
  float* y = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t c = (i / g.s) % g.c;
    const float rstd = 1.0f / std::sqrt(var[c] + eps);
    y[i] = fma32((x[i] - mean[c]) * rstd, gamma[c], beta[c]);
  }
}

// ---- Shapes -------------------------------------------------------------------------------------

/// x rank 2..4 with every dim ≥ 1 and M ≤ 2^24; returns C.
int64_t check_x(const char* op, const Shape& x) {
  op_require(x.rank() >= 2 && x.rank() <= 4, op,
             "x must be [N, C], [N, C, L] or [N, C, H, W] (channel axis 1), got " + x.str());
  for (int d = 0; d < x.rank(); ++d) op_require(x[d] >= 1, op, "x must have no empty dim, got " + x.str());
  const BnGeom g = geom_of(x);
  op_require(g.m() <= kMaxChannelElements, op,
             "each channel's N·(spatial size) elements must be ≤ 2^24 (so float(M) is exact), got " +
                 std::to_string(g.m()) + " for x " + x.str());
  return x[1];
}

void check_channel_vector(const char* op, const char* what, const Shape& v, int64_t c, const Shape& x) {
  op_require(v.rank() == 1 && v[0] == c, op,
             std::string(what) + " must be [" + std::to_string(c) + "] (x " + x.str() + " has " +
                 std::to_string(c) + " channels), got " + v.str());
}

void check_eps(const char* op, const Attrs& a) {
  op_require(std::isfinite(a.floats[0]) && a.floats[0] >= 0.0f, op,
             "ε must be finite and ≥ 0, got " + std::to_string(a.floats[0]));
}

std::vector<Shape> batch_norm_infer(const Attrs& a, std::span<const Shape> in) {
  const int64_t c = check_x("batch_norm", in[0]);
  check_channel_vector("batch_norm", "γ", in[1], c, in[0]);
  check_channel_vector("batch_norm", "β", in[2], c, in[0]);
  check_eps("batch_norm", a);
  return {in[0]};
}

std::vector<Shape> batch_norm_backward_infer(const Attrs& a, std::span<const Shape> in) {
  const int64_t c = check_x("batch_norm_backward", in[0]);
  check_channel_vector("batch_norm_backward", "γ", in[1], c, in[0]);
  op_require(in[2] == in[0], "batch_norm_backward",
             "dy must have x's shape " + in[0].str() + ", got " + in[2].str());
  check_eps("batch_norm_backward", a);
  return {in[0], in[1], in[1]};
}

std::vector<Shape> batch_norm_running_infer(const Attrs& a, std::span<const Shape> in) {
  const char* op = "batch_norm_running";
  const int64_t c = check_x(op, in[1]);
  check_channel_vector(op, "running", in[0], c, in[1]);
  op_require(a.ints[0] >= 0 && a.ints[0] <= 2, op,
             "stat must be 0 (mean), 1 (biased variance) or 2 (unbiased variance), got " +
                 std::to_string(a.ints[0]));
  // PyTorch refuses M = 1 in training ("Expected more than 1 value per channel"); its unbiased
  // variance would divide 0 by 0.
  op_require(
      a.ints[0] != 2 || geom_of(in[1]).m() >= 2, op,
      "the unbiased variance needs M = N·(spatial size) ≥ 2 elements per channel, got x " + in[1].str());
  op_require(std::isfinite(a.floats[0]) && a.floats[0] >= 0.0f && a.floats[0] <= 1.0f, op,
             "momentum must be in [0, 1], got " + std::to_string(a.floats[0]));
  return {in[0]};
}

std::vector<Shape> batch_norm_inference_infer(const Attrs& a, std::span<const Shape> in) {
  const char* op = "batch_norm_inference";
  const int64_t c = check_x(op, in[0]);
  check_channel_vector(op, "γ", in[1], c, in[0]);
  check_channel_vector(op, "β", in[2], c, in[0]);
  check_channel_vector(op, "mean", in[3], c, in[0]);
  check_channel_vector(op, "var", in[4], c, in[0]);
  check_eps(op, a);
  return {in[0]};
}

void batch_norm_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0] && !a.needs_grad[1] && !a.needs_grad[2]) return;
  const std::vector<ValueRef> grads =
      g.emit_all(OpKind::BatchNormBackward, a.attrs, {a.inputs[0], a.inputs[1], a.out_grads[0]});
  for (size_t i = 0; i < 3; ++i)
    if (a.needs_grad[i]) in_grads[i] = grads[i];
}

}  // namespace

/// BatchNorm (training mode): x [N, C, …] (rank 2..4, channel axis 1, M = N·spatial ≤ 2^24), γ[C], β[C];
/// floats {ε ≥ 0, finite} → y (x's shape), normalized with each channel's batch mean and biased
/// variance. OpError naming the shapes on a mismatch.
const OpInfo kBatchNormOp{.kind = OpKind::BatchNorm,
                          .name = "batch_norm",
                          .num_inputs = 3,
                          .num_outputs = 1,
                          .num_ints = 0,
                          .num_floats = 1,
                          .infer = batch_norm_infer,
                          .reference = batch_norm_reference,
                          .fast = batch_norm_fast,
                          .vjp = batch_norm_vjp,
                          .float64 = f64::batch_norm,
                          .float64_spread = Float64Spread::Sum};
/// BatchNormBackward: x, γ[C], dy (x's shape); floats {ε} → dx, dγ[C], dβ[C] (BatchNorm's VJP).
const OpInfo kBatchNormBackwardOp{.kind = OpKind::BatchNormBackward,
                                  .name = "batch_norm_backward",
                                  .num_inputs = 3,
                                  .num_outputs = 3,
                                  .num_ints = 0,
                                  .num_floats = 1,
                                  .infer = batch_norm_backward_infer,
                                  .reference = batch_norm_backward_reference,
                                  .fast = batch_norm_backward_fast,
                                  .vjp = nullptr,
                                  .float64 = f64::batch_norm_backward,
                                  .float64_spread = Float64Spread::Sum};
/// BatchNormRunning: running[C], x (the batch_norm's input); ints {stat: 0 mean, 1 biased variance,
/// 2 unbiased variance (M ≥ 2)}; floats {momentum ∈ [0, 1]} → running'[C] = running·momentum +
/// stat·(1 − momentum) (ONNX's momentum; PyTorch's 0.1 is 0.9 here). Not differentiable: it updates
/// state, like the optimizer ops.
const OpInfo kBatchNormRunningOp{.kind = OpKind::BatchNormRunning,
                                 .name = "batch_norm_running",
                                 .num_inputs = 2,
                                 .num_outputs = 1,
                                 .num_ints = 1,
                                 .num_floats = 1,
                                 .infer = batch_norm_running_infer,
                                 .reference = batch_norm_running_reference,
                                 .fast = batch_norm_running_fast,
                                 .vjp = nullptr,
                                 .float64 = f64::batch_norm_running,
                                 .float64_spread = Float64Spread::Sum};
/// BatchNormInference: x[N, C, …], γ, β, mean, var (each [C]); floats {ε} → y = (x − mean)·rstd·γ + β
/// (ONNX BatchNormalization with training_mode = 0, PyTorch eval()). No VJP: evaluation only, never in
/// a training step's differentiated graph.
const OpInfo kBatchNormInferenceOp{.kind = OpKind::BatchNormInference,
                                   .name = "batch_norm_inference",
                                   .num_inputs = 5,
                                   .num_outputs = 1,
                                   .num_ints = 0,
                                   .num_floats = 1,
                                   .infer = batch_norm_inference_infer,
                                   .reference = whole_range<batch_norm_inference_range>,
                                   .fast = split_range<batch_norm_inference_range>,
                                   .vjp = nullptr,
                                   .float64 = f64::batch_norm_inference,
                                   .float64_spread = Float64Spread::Libm};

}  // namespace tribunal
