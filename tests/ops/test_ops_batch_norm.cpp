// Batch normalization — batch_norm (training mode), batch_norm_backward, batch_norm_running and
// batch_norm_inference — registered with the generic
// checks of test_op_coverage.cpp (a naive float64 model written here, bitwise fast-vs-reference on every
// SIMD path × 1/2/3 threads, bad inputs, central differences of the VJP), plus values from PyTorch and
// the normalization's own properties.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "ops/math.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

constexpr float kEps = 1e-5f;
constexpr double kTiny = 0x1p-148;  // a few subnormal spacings: outputs that underflow

double f64(float x) {
  return static_cast<double>(x);
}

/// x[N, C, …] viewed as [n, c, s]; element k = n·S + s of channel ch.
struct Geom {
  int64_t n, c, s;
  explicit Geom(const Shape& x) : n(x[0]), c(x[1]), s(1) {
    for (int d = 2; d < x.rank(); ++d) s *= x[d];
  }
  int64_t m() const { return n * s; }
  int64_t at(int64_t ch, int64_t k) const { return ((k / s) * c + ch) * s + k % s; }
};

// ---- Cases ----------------------------------------------------------------------------------------

/// x of rank 2 + variant (2, 3 or 4). big: 37 channels of M = 13·29 = 377 (grain 4096/377 = 10
/// channels), split 3 ways.
Shape x_shape(std::mt19937& rng, bool big, int variant) {
  if (big) return variant == 0 ? Shape{377, 37} : variant == 1 ? Shape{13, 37, 29} : Shape{13, 37, 1, 29};
  const int64_t n = small_dim(rng) % 9 + 1, c = small_dim(rng);
  auto spatial = [&] { return static_cast<int64_t>(rng() % 5 + 1); };
  if (variant == 0) return Shape{n, c};
  if (variant == 1) return Shape{n, c, spatial()};
  return Shape{n, c, spatial(), spatial()};
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c;
  c.kind = kind;
  switch (kind) {
    case OpKind::BatchNorm:
    case OpKind::BatchNormBackward: {
      const Shape x = x_shape(rng, big, variant);
      c.attrs.floats = {kEps};
      c.in.push_back(random_tensor(x, rng, specials, -2.0f, 2.5f));
      c.in.push_back(random_tensor(Shape{x[1]}, rng, specials, -1.5f, 1.5f));
      c.in.push_back(random_tensor(kind == OpKind::BatchNorm ? Shape{x[1]} : x, rng, specials));
      return c;
    }
    case OpKind::BatchNormRunning: {
      // variant = stat (0 mean, 1 biased, 2 unbiased variance: M ≥ 2).
      Shape x = x_shape(rng, big, variant);
      if (variant == 2 && Geom(x).m() == 1) x = Shape{2, x[1]};
      static constexpr float kMomenta[] = {0.9f, 0.1f, 0.0f, 1.0f, 0.99f};
      c.attrs.ints = {variant};
      c.attrs.floats = {kMomenta[rng() % 5]};
      c.in.push_back(random_tensor(Shape{x[1]}, rng, specials, 0.0f, 2.0f));
      c.in.push_back(random_tensor(x, rng, specials, -2.0f, 2.5f));
      return c;
    }
    case OpKind::BatchNormInference: {
      const Shape x = x_shape(rng, big, variant);
      const Shape ch{x[1]};
      c.attrs.floats = {kEps};
      c.in.push_back(random_tensor(x, rng, specials, -2.0f, 2.5f));
      c.in.push_back(random_tensor(ch, rng, specials, -1.5f, 1.5f));
      c.in.push_back(random_tensor(ch, rng, specials));
      c.in.push_back(random_tensor(ch, rng, specials));
      c.in.push_back(random_tensor(ch, rng, specials, 0.0f, 2.0f));  // a variance: ≥ 0
      return c;
    }
    default:
      break;
  }
  return std::nullopt;
}

// ---- Float64 models ------------------------------------------------------------------------------

/// Each channel's statistics in float64 (sequential sums over k = n·S + s), with the error budget of the
/// float kernel's x̂ (as test_ops_norm.cpp's LayerNorm model: the same sums over another axis).
struct Bn64 {
  Geom g;
  std::vector<double> xhat, tol_xhat;  ///< by flat index of x
  std::vector<double> mean, var, rstd, mean_err, var_err;
  Bn64(const Tensor& x, double eps)
      : g(x.shape()), xhat(static_cast<size_t>(x.numel())), tol_xhat(static_cast<size_t>(x.numel())) {
    const double mf = static_cast<double>(g.m());
    for (int64_t ch = 0; ch < g.c; ++ch) {
      double mu = 0.0, abs_mean = 0.0;
      for (int64_t k = 0; k < g.m(); ++k) {
        mu += x[g.at(ch, k)];
        abs_mean += std::fabs(x[g.at(ch, k)]);
      }
      mu /= mf;
      abs_mean /= mf;
      double v = 0.0, abs_dev = 0.0;
      for (int64_t k = 0; k < g.m(); ++k) {
        const double d = x[g.at(ch, k)] - mu;
        v += d * d;
        abs_dev += std::fabs(d);
      }
      v /= mf;
      abs_dev /= mf;
      const double rs = 1.0 / std::sqrt(v + eps);
      // Float errors: the mean is off by ~kRel·mean|x| (canonical sum), so every deviation is; var, a
      // mean of squares, is then off by 2·mean|d|·that plus its own kRel; rstd inherits half of var's
      // relative error.
      const double me = kRel * abs_mean, ve = 2.0 * abs_dev * me + kRel * v;
      const double rstd_rel = kRel + ve / (2.0 * (v + eps));
      mean.push_back(mu);
      var.push_back(v);
      rstd.push_back(rs);
      mean_err.push_back(me);
      var_err.push_back(ve);
      for (int64_t k = 0; k < g.m(); ++k) {
        const auto i = static_cast<size_t>(g.at(ch, k));
        const double d = x[g.at(ch, k)] - mu;
        xhat[i] = d * rs;
        tol_xhat[i] = (me + kRel * std::fabs(d)) * rs + rstd_rel * std::fabs(d * rs);
      }
    }
  }
};

std::optional<std::vector<Expected>> expect(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  switch (c.kind) {
    case OpKind::BatchNorm: {
      const Bn64 s(in[0], c.attrs.floats[0]);
      Expected y{std::vector<double>(static_cast<size_t>(in[0].numel())),
                 std::vector<double>(static_cast<size_t>(in[0].numel()))};
      for (int64_t ch = 0; ch < s.g.c; ++ch)
        for (int64_t k = 0; k < s.g.m(); ++k) {
          const auto i = static_cast<size_t>(s.g.at(ch, k));
          const double gm = in[1][ch], b = in[2][ch];
          y.want[i] = s.xhat[i] * gm + b;
          y.tol[i] =
              s.tol_xhat[i] * std::fabs(gm) + kRel * (std::fabs(s.xhat[i] * gm) + std::fabs(b)) + kTiny;
        }
      return std::vector<Expected>{y};
    }
    case OpKind::BatchNormBackward: {
      // PyTorch's batch_norm backward (training): dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ.
      const Bn64 s(in[0], c.attrs.floats[0]);
      const Geom& g = s.g;
      const double mf = static_cast<double>(g.m());
      const auto n = static_cast<size_t>(in[0].numel());
      Expected dx{std::vector<double>(n), std::vector<double>(n)}, dgamma, dbeta;
      for (int64_t ch = 0; ch < g.c; ++ch) {
        double a = 0.0, b = 0.0, abs_g = 0.0, abs_gx = 0.0, gx_err = 0.0;
        double sg = 0.0, sb = 0.0, mag_g = 0.0, err_g = 0.0, mag_b = 0.0;
        for (int64_t k = 0; k < g.m(); ++k) {
          const auto i = static_cast<size_t>(g.at(ch, k));
          const double dy = in[2][g.at(ch, k)], gi = dy * f64(in[1][ch]);
          a += gi;
          b += gi * s.xhat[i];
          abs_g += std::fabs(gi);
          abs_gx += std::fabs(gi * s.xhat[i]);
          gx_err += std::fabs(gi) * s.tol_xhat[i];
          sg += dy * s.xhat[i];
          sb += dy;
          mag_g += std::fabs(dy * s.xhat[i]);
          err_g += std::fabs(dy) * s.tol_xhat[i];
          mag_b += std::fabs(dy);
        }
        a /= mf;
        b /= mf;
        const double a_err = kRel * abs_g / mf, b_err = (kRel * abs_gx + gx_err) / mf;
        const double rs = s.rstd[static_cast<size_t>(ch)];
        for (int64_t k = 0; k < g.m(); ++k) {
          const auto i = static_cast<size_t>(g.at(ch, k));
          const double gi = f64(in[2][g.at(ch, k)]) * in[1][ch], xh = s.xhat[i];
          const double v = rs * (gi - a - xh * b);
          dx.want[i] = v;
          dx.tol[i] = rs * (kRel * (std::fabs(gi) + std::fabs(a) + std::fabs(xh * b)) + a_err +
                            std::fabs(xh) * b_err + s.tol_xhat[i] * std::fabs(b)) +
                      kRel * std::fabs(v) + kTiny;
        }
        dgamma.want.push_back(sg);
        dgamma.tol.push_back(kRel * mag_g + err_g + kTiny);
        dbeta.want.push_back(sb);
        dbeta.tol.push_back(kRel * mag_b + kTiny);
      }
      return std::vector<Expected>{dx, dgamma, dbeta};
    }
    case OpKind::BatchNormRunning: {
      const Bn64 s(in[1], 0.0);
      const int64_t stat = c.attrs.ints[0];
      const double mom = c.attrs.floats[0], take = 1.0 - mom, m = static_cast<double>(s.g.m());
      Expected out;
      for (int64_t ch = 0; ch < s.g.c; ++ch) {
        const auto k = static_cast<size_t>(ch);
        const double scale = stat == 2 ? m / (m - 1.0) : 1.0;
        const double v = stat == 0 ? s.mean[k] : s.var[k] * scale;
        const double v_err = stat == 0 ? s.mean_err[k] : (s.var_err[k] + kRel * s.var[k]) * scale;
        const double r = in[0][ch];
        out.want.push_back(r * mom + v * take);
        // The rounded 1 − momentum, the products and the add, and the statistic's own error.
        out.tol.push_back(kRel * (std::fabs(r * mom) + 2.0 * std::fabs(v * take)) + v_err * take + kTiny);
      }
      return std::vector<Expected>{out};
    }
    case OpKind::BatchNormInference: {
      const Geom g(in[0].shape());
      const double eps = c.attrs.floats[0];
      Expected y;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        const int64_t ch = (i / g.s) % g.c;
        const double d = f64(in[0][i]) - in[3][ch], rs = 1.0 / std::sqrt(f64(in[4][ch]) + eps);
        const double gm = in[1][ch], b = in[2][ch];
        y.want.push_back(d * rs * gm + b);
        y.tol.push_back(kRel * (std::fabs(d) + std::fabs(f64(in[0][i])) + std::fabs(f64(in[3][ch]))) * rs *
                            std::fabs(gm) +
                        kRel * std::fabs(b) + kTiny);
      }
      return std::vector<Expected>{y};
    }
    default:
      break;
  }
  return std::nullopt;
}

const std::vector<BadCase> kBatchNormBad = {
    {{{}, {kEps}}, {Shape{2, 3, 4}, Shape{4}, Shape{3}}, "γ of the wrong length"},
    {{{}, {kEps}}, {Shape{2, 3, 4}, Shape{3}, Shape{1, 3}}, "β of rank 2"},
    {{{}, {kEps}}, {Shape{12}, Shape{12}, Shape{12}}, "rank-1 x"},
    {{{}, {kEps}}, {Shape{}, Shape{1}, Shape{1}}, "scalar x"},
    {{{}, {kEps}}, {Shape{0, 3}, Shape{3}, Shape{3}}, "no batch"},
    {{{}, {kEps}}, {Shape{2, 3, 0}, Shape{3}, Shape{3}}, "empty spatial dim"},
    {{{}, {kEps}}, {Shape{4097, 1, 64, 64}, Shape{1}, Shape{1}}, "M = 4097·4096 > 2^24"},
    {{{}, {}}, {Shape{2, 3}, Shape{3}, Shape{3}}, "no ε"},
    {{{}, {-1.0f}}, {Shape{2, 3}, Shape{3}, Shape{3}}, "negative ε"},
    {{{}, {NAN}}, {Shape{2, 3}, Shape{3}, Shape{3}}, "NaN ε"},
    {{{1}, {kEps}}, {Shape{2, 3}, Shape{3}, Shape{3}}, "an int attribute"},
    {{{}, {kEps}}, {Shape{2, 3}, Shape{3}}, "two inputs"}};
const std::vector<BadCase> kBatchNormBackwardBad = {
    {{{}, {kEps}}, {Shape{2, 3, 4}, Shape{3}, Shape{2, 3, 5}}, "dy of another shape"},
    {{{}, {kEps}}, {Shape{2, 3, 4}, Shape{4}, Shape{2, 3, 4}}, "γ of the wrong length"},
    {{{}, {kEps}}, {Shape{2, 3, 4}, Shape{3}}, "no dy"},
    {{{}, {}}, {Shape{2, 3, 4}, Shape{3}, Shape{2, 3, 4}}, "no ε"}};

const std::vector<BadCase> kBatchNormRunningBad = {
    {{{0}, {0.9f}}, {Shape{4}, Shape{2, 3, 4}}, "running of x's spatial length"},
    {{{0}, {0.9f}}, {Shape{3}, Shape{3}}, "rank-1 x"},
    {{{3}, {0.9f}}, {Shape{3}, Shape{2, 3}}, "stat 3"},
    {{{-1}, {0.9f}}, {Shape{3}, Shape{2, 3}}, "stat −1"},
    {{{2}, {0.9f}}, {Shape{3}, Shape{1, 3}}, "unbiased variance of M = 1"},
    {{{2}, {0.9f}}, {Shape{3}, Shape{1, 3, 1, 1}}, "unbiased variance of M = 1 (rank 4)"},
    {{{0}, {1.5f}}, {Shape{3}, Shape{2, 3}}, "momentum above 1"},
    {{{0}, {-0.1f}}, {Shape{3}, Shape{2, 3}}, "negative momentum"},
    {{{0}, {NAN}}, {Shape{3}, Shape{2, 3}}, "NaN momentum"},
    {{{}, {0.9f}}, {Shape{3}, Shape{2, 3}}, "no stat"},
    {{{0}, {}}, {Shape{3}, Shape{2, 3}}, "no momentum"},
    {{{0}, {0.9f}}, {Shape{3}}, "no x"}};
const std::vector<BadCase> kBatchNormInferenceBad = {
    {{{}, {kEps}}, {Shape{2, 3}, Shape{3}, Shape{3}, Shape{3}, Shape{2}}, "var of the wrong length"},
    {{{}, {kEps}}, {Shape{2, 3}, Shape{3}, Shape{3}, Shape{3, 1}, Shape{3}}, "mean of rank 2"},
    {{{}, {kEps}}, {Shape{2, 3}, Shape{2}, Shape{3}, Shape{3}, Shape{3}}, "γ of the wrong length"},
    {{{}, {kEps}}, {Shape{6}, Shape{6}, Shape{6}, Shape{6}, Shape{6}}, "rank-1 x"},
    {{{}, {-1.0f}}, {Shape{2, 3}, Shape{3}, Shape{3}, Shape{3}, Shape{3}}, "negative ε"},
    {{{}, {kEps}}, {Shape{2, 3}, Shape{3}, Shape{3}, Shape{3}}, "four inputs"}};

const RegisterOpTests kBatchNormTests(OpKind::BatchNorm, {3, make_case, expect, kBatchNormBad, {0, 1, 2}});
const RegisterOpTests kBatchNormBackwardTests(OpKind::BatchNormBackward,
                                              {3, make_case, expect, kBatchNormBackwardBad});
const RegisterOpTests kBatchNormRunningTests(OpKind::BatchNormRunning,
                                             {3, make_case, expect, kBatchNormRunningBad});
const RegisterOpTests kBatchNormInferenceTests(OpKind::BatchNormInference,
                                               {3, make_case, expect, kBatchNormInferenceBad});

// ---- PyTorch's values -----------------------------------------------------------------------------

// nn.BatchNorm1d(3, eps=1e-5, momentum=0.1) in train() mode on x[2, 3, 2] below, weight γ, bias β, then
// y.backward(dy): computed once with torch 1.13 (Debian python3-torch, float32, CPU) and pasted here.
const std::vector<float> kX = {0.5f, -1.25f, 2.0f,  0.75f, -0.5f,  3.0f,
                               1.5f, 0.25f,  -2.5f, 1.0f,  0.125f, -0.75f};
const std::vector<float> kGamma = {1.5f, -0.5f, 0.75f}, kBeta = {0.25f, 1.0f, -0.125f};
const std::vector<float> kDy = {1.0f,  -0.5f, 0.25f, 2.0f, -1.5f, 0.5f,
                                0.75f, 1.25f, -1.0f, 0.5f, 2.0f,  -0.25f};
const std::vector<double> kTorchY = {
    0.6309983730316162,  -2.0359904766082764, 0.5006852746009827,  0.8705480098724365,
    -0.6107462644577026, 1.1442079544067383,  2.15499210357666,    0.25,
    1.8321911096572876,  0.7965754270553589,  -0.2973615825176239, -0.7361001372337341};
const std::vector<double> kTorchDx = {0.3810003995895386,  -0.5715094804763794, 0.25014999508857727,
                                      -0.4118582308292389, -0.7193490266799927, -0.17459657788276672,
                                      -0.7619868516921997, 0.9524960517883301,  0.10089115053415298,
                                      0.06081710383296013, 0.9538054466247559,  -0.05985978618264198};
const std::vector<double> kTorchDgamma = {1.968491792678833, 2.6352720260620117, 1.5617002248764038};
const std::vector<double> kTorchDbeta = {2.5, 1.75, 0.75};
// The module's running statistics after that step, from running_mean = [0.1, −0.2, 0.3] and
// running_var = [1, 2, 0.5] (torch momentum 0.1: ONNX momentum 0.9; running_var is unbiased), then
// bn.eval()(x[0:1]) with those statistics.
const std::vector<float> kRunMean0 = {0.1f, -0.2f, 0.3f}, kRunVar0 = {1.0f, 2.0f, 0.5f};
const std::vector<double> kTorchRunMean = {0.11499999463558197, -0.14874999225139618, 0.31687501072883606};
const std::vector<double> kTorchRunVar = {1.0291666984558105, 2.1807291507720947, 0.7483072876930237};
const std::vector<double> kTorchEvalY = {0.8192552328109741, -1.7682685852050781, 0.2724648118019104,
                                         0.6956964731216431, -0.8332294225692749, 2.201265573501587};

/// |got − torch| within a few float32 roundings of the value (torch sums in another order).
void check_near_torch(const Tensor& got, const std::vector<double>& want) {
  REQUIRE(got.numel() == static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    CAPTURE(i);
    CHECK(std::fabs(f64(got[i]) - want[static_cast<size_t>(i)]) <=
          4e-7 * std::max(1.0, std::fabs(want[static_cast<size_t>(i)])));
  }
}

}  // namespace

TEST_CASE("batch_norm and batch_norm_backward match PyTorch's nn.BatchNorm1d in training mode") {
  const Tensor x(Shape{2, 3, 2}, kX), gamma(Shape{3}, kGamma), beta(Shape{3}, kBeta), dy(Shape{2, 3, 2}, kDy);
  const Tensor y = run_everywhere(Case{OpKind::BatchNorm, {{}, {kEps}}, {x, gamma, beta}})[0];
  check_near_torch(y, kTorchY);
  const std::vector<Tensor> grads =
      run_everywhere(Case{OpKind::BatchNormBackward, {{}, {kEps}}, {x, gamma, dy}});
  check_near_torch(grads[0], kTorchDx);
  check_near_torch(grads[1], kTorchDgamma);
  check_near_torch(grads[2], kTorchDbeta);
  // The same values as [N, C, H, W] = [2, 3, 1, 2] and [2, 3, 2, 1]: only M = N·H·W matters.
  for (const Shape s : {Shape{2, 3, 1, 2}, Shape{2, 3, 2, 1}}) {
    const Tensor x4(s, kX);
    const Tensor y4 = run_everywhere(Case{OpKind::BatchNorm, {{}, {kEps}}, {x4, gamma, beta}})[0];
    CHECK(y4.shape() == s);
    CHECK(std::vector<float>(y4.values().begin(), y4.values().end()) ==
          std::vector<float>(y.values().begin(), y.values().end()));
  }
}

TEST_CASE("batch_norm equals layer_norm on the channel-major transpose, bit for bit (the same sums)") {
  // x[N, C] → the LayerNorm rows are its columns; each channel's sequence k = n is the row's order.
  std::mt19937 rng(11);
  const int64_t n = 45, c = 7;
  const Tensor x = random_tensor(Shape{n, c}, rng, true, -3.0f, 4.0f);
  const Tensor gamma = random_tensor(Shape{c}, rng, false), beta = random_tensor(Shape{c}, rng, false);
  const Tensor y = run_everywhere(Case{OpKind::BatchNorm, {{}, {kEps}}, {x, gamma, beta}})[0];
  for (int64_t ch = 0; ch < c; ++ch) {
    Tensor row(Shape{1, n});
    for (int64_t k = 0; k < n; ++k) row[k] = x[k * c + ch];
    // γ_c and β_c broadcast over the row.
    const Tensor gr(Shape{n}, std::vector<float>(static_cast<size_t>(n), gamma[ch]));
    const Tensor br(Shape{n}, std::vector<float>(static_cast<size_t>(n), beta[ch]));
    const Tensor ln = run_everywhere(Case{OpKind::LayerNorm, {{}, {kEps}}, {row, gr, br}})[0];
    for (int64_t k = 0; k < n; ++k) {
      CAPTURE(k);
      CHECK(float_bits(ln[k]) == float_bits(y[k * c + ch]));
    }
  }
}

TEST_CASE("batch_norm: each output channel has mean β and, with γ = 1, variance 1") {
  std::mt19937 rng(5);
  const Shape s{6, 4, 3, 5};
  const Geom g(s);
  Tensor gamma(Shape{4}, std::vector<float>(4, 1.0f)),
      beta(Shape{4}, std::vector<float>{0.0f, 0.5f, -2.0f, 3.0f});
  const Tensor y = run_everywhere(
      Case{OpKind::BatchNorm, {{}, {kEps}}, {random_tensor(s, rng, true, 3.0f, 9.0f), gamma, beta}})[0];
  for (int64_t ch = 0; ch < g.c; ++ch) {
    double mean = 0.0, var = 0.0;
    for (int64_t k = 0; k < g.m(); ++k) mean += y[g.at(ch, k)];
    mean /= static_cast<double>(g.m());
    for (int64_t k = 0; k < g.m(); ++k) var += (y[g.at(ch, k)] - mean) * (y[g.at(ch, k)] - mean);
    var /= static_cast<double>(g.m());
    CHECK(mean == doctest::Approx(beta[ch]).epsilon(1e-5));
    CHECK(var == doctest::Approx(1.0).epsilon(1e-4));  // ε = 1e-5 against var ≈ 3 moves it by ~2e-6
  }
}

TEST_CASE("batch_norm_running and batch_norm_inference match PyTorch's running statistics and eval()") {
  const Tensor x(Shape{2, 3, 2}, kX);
  const Tensor mean =
      run_everywhere(Case{OpKind::BatchNormRunning, {{0}, {0.9f}}, {Tensor(Shape{3}, kRunMean0), x}})[0];
  check_near_torch(mean, kTorchRunMean);
  const Tensor var =
      run_everywhere(Case{OpKind::BatchNormRunning, {{2}, {0.9f}}, {Tensor(Shape{3}, kRunVar0), x}})[0];
  check_near_torch(var, kTorchRunVar);
  // The exact float32 sequence: stat 2 is sum_sq / float(M − 1), then running·0.9f + stat·(1 − 0.9f).
  // Channel 0: mean 0.25, deviations 0.25, −1.5, 1.25, 0; sum_sq = 3.875 (exact), /3 rounds once.
  const float take = 1.0f - 0.9f, unbiased0 = 3.875f / 3.0f;
  CHECK(float_bits(var[0]) == float_bits(1.0f * 0.9f + unbiased0 * take));
  const Tensor biased =
      run_everywhere(Case{OpKind::BatchNormRunning, {{1}, {0.9f}}, {Tensor(Shape{3}, kRunVar0), x}})[0];
  CHECK(float_bits(biased[0]) == float_bits(1.0f * 0.9f + (3.875f / 4.0f) * take));
  // eval(): the statistics torch held after the step (rounded to float), on the first sample.
  std::vector<float> m(kTorchRunMean.begin(), kTorchRunMean.end()),
      v(kTorchRunVar.begin(), kTorchRunVar.end());
  const Tensor x0(Shape{1, 3, 2}, std::vector<float>(kX.begin(), kX.begin() + 6));
  const Tensor y = run_everywhere(Case{
      OpKind::BatchNormInference,
      {{}, {kEps}},
      {x0, Tensor(Shape{3}, kGamma), Tensor(Shape{3}, kBeta), Tensor(Shape{3}, m), Tensor(Shape{3}, v)}})[0];
  check_near_torch(y, kTorchEvalY);
}

TEST_CASE("batch_norm, batch_norm_running and batch_norm_inference share one statistic, bit for bit") {
  // With momentum 0 the running op returns the batch's statistic itself (running·0 + stat·1 = stat);
  // inference on the batch's mean and biased variance then recomputes the training forward exactly.
  std::mt19937 rng(17);
  for (const Shape s : {Shape{33, 5}, Shape{4, 6, 37}, Shape{3, 4, 7, 9}}) {
    CAPTURE(s.str());
    const int64_t c = s[1];
    const Tensor x = random_tensor(s, rng, true, -3.0f, 5.0f);
    const Tensor gamma = random_tensor(Shape{c}, rng, true), beta = random_tensor(Shape{c}, rng, true);
    const Tensor running = random_tensor(Shape{c}, rng, false);
    const Tensor mean = run_everywhere(Case{OpKind::BatchNormRunning, {{0}, {0.0f}}, {running, x}})[0];
    const Tensor var = run_everywhere(Case{OpKind::BatchNormRunning, {{1}, {0.0f}}, {running, x}})[0];
    const Tensor train = run_everywhere(Case{OpKind::BatchNorm, {{}, {kEps}}, {x, gamma, beta}})[0];
    const Tensor eval =
        run_everywhere(Case{OpKind::BatchNormInference, {{}, {kEps}}, {x, gamma, beta, mean, var}})[0];
    CHECK(bitwise_equal(train, eval));
    // Momentum 1 keeps the old value exactly.
    const Tensor kept = run_everywhere(Case{OpKind::BatchNormRunning, {{2}, {1.0f}}, {running, x}})[0];
    CHECK(bitwise_equal(kept, running));
  }
}
