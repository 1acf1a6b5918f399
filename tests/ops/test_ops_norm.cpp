// The transformer math ops — layer_norm, gelu, softmax and their backward ops — registered with the
// generic checks of test_op_coverage.cpp (float64 models, bitwise fast-vs-reference on every SIMD path
// × 1/2/3 threads, bad inputs, VJP inputs), plus the properties those checks do not reach: softmax of
// huge logits stays finite, causal rows sum to 1 with +0 masked entries, gelu against PyTorch's tanh
// formula in double, and the lane-wise exp32/tanh32 of vec_math.h bitwise equal to the scalar ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/registry.h"
#include "ops/simd.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

constexpr float kEps = 1e-5f;
constexpr double kGeluC = 0.79788456080286535588;  // √(2/π) in double, as PyTorch's double kernel has it
constexpr double kGeluK = 0.044715;
constexpr double kTiny = 0x1p-148;  // a few subnormal spacings: outputs that underflow

double f64(float x) {
  return static_cast<double>(x);
}

// ---- Cases ----------------------------------------------------------------------------------------

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c;
  c.kind = kind;
  switch (kind) {
    case OpKind::LayerNorm:
    case OpKind::LayerNormBackward: {
      // big: 131 rows of 97 split 3 ways (grain 4096/97 = 42 rows); the backward's 32 canonical lanes of
      // dγ and dβ (5 rows of 97 each) split 3 ways too (grain 4096/485 = 8 lanes), the SIMD paths' split.
      const int64_t m = big ? 131 : small_dim(rng), d = big ? 97 : small_dim(rng);
      c.attrs.floats = {kEps};
      c.in.push_back(random_tensor(Shape{m, d}, rng, specials, -2.0f, 2.5f));
      c.in.push_back(random_tensor(Shape{d}, rng, specials, -1.5f, 1.5f));
      c.in.push_back(random_tensor(kind == OpKind::LayerNorm ? Shape{d} : Shape{m, d}, rng, specials));
      return c;
    }
    case OpKind::Gelu:
    case OpKind::GeluBackward: {
      // [-6, 6] covers both tanh32 branches (|u| = 0.55 at |x| ≈ 0.67) and saturation (|u| ≥ 9 at |x| ≈ 5.5).
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 0, 3);
      c.in.push_back(random_tensor(s, rng, specials, -6.0f, 6.0f));
      if (kind == OpKind::GeluBackward) c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    case OpKind::Softmax:
    case OpKind::SoftmaxBackward: {
      // variant = causal. big: 335 rows of 71 (grain 4096/71 = 57 rows) split 3 ways.
      const Shape s = big ? Shape{5, 67, 71} : random_shape(rng, 2, 4);
      static constexpr float kScales[] = {1.0f, 0.125f, 2.5f, -0.75f};
      c.attrs.ints = {variant};
      c.attrs.floats = {kScales[rng() % 4]};
      Tensor x = random_tensor(s, rng, specials, -4.0f, 4.0f);
      if (kind == OpKind::Softmax) {
        c.in.push_back(std::move(x));
        return c;
      }
      // y: a real softmax output (masked entries +0), so the backward sees what the VJP gives it.
      Case fwd{OpKind::Softmax, c.attrs, {std::move(x)}};
      c.in.push_back(run_case(fwd, nullptr)[0]);
      c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    default:
      break;
  }
  return std::nullopt;
}

// ---- Float64 models ------------------------------------------------------------------------------

/// Row statistics of layer norm in float64, with the error budget of the float kernel's x̂.
struct Ln64 {
  int64_t m, d;
  std::vector<double> xhat, tol_xhat, rstd;
  explicit Ln64(const Tensor& x, double eps) : m(x.shape()[0]), d(x.shape()[1]) {
    for (int64_t r = 0; r < m; ++r) {
      const float* row = x.data() + r * d;
      double mean = 0.0, abs_mean = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        mean += row[i];
        abs_mean += std::fabs(row[i]);
      }
      mean /= static_cast<double>(d);
      abs_mean /= static_cast<double>(d);
      double var = 0.0, abs_dev = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        var += (row[i] - mean) * (row[i] - mean);
        abs_dev += std::fabs(row[i] - mean);
      }
      var /= static_cast<double>(d);
      abs_dev /= static_cast<double>(d);
      const double rs = 1.0 / std::sqrt(var + eps);
      rstd.push_back(rs);
      // Float errors: the mean is off by ~kRel·mean|x| (canonical sum), so every d[i] is; var, a mean of
      // d², is then off by 2·mean|d|·that plus its own kRel; rstd inherits half of var's relative error.
      const double mean_err = kRel * abs_mean;
      const double rstd_rel = kRel + (2.0 * abs_dev * mean_err + kRel * var) / (2.0 * (var + eps));
      for (int64_t i = 0; i < d; ++i) {
        const double xh = (row[i] - mean) * rs;
        xhat.push_back(xh);
        tol_xhat.push_back((mean_err + kRel * std::fabs(row[i] - mean)) * rs + rstd_rel * std::fabs(xh));
      }
    }
  }
};

std::optional<std::vector<Expected>> expect(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  switch (c.kind) {
    case OpKind::LayerNorm: {
      const Ln64 s(in[0], c.attrs.floats[0]);
      Expected y;
      for (int64_t r = 0; r < s.m; ++r)
        for (int64_t i = 0; i < s.d; ++i) {
          const size_t k = static_cast<size_t>(r * s.d + i);
          const double g = in[1][i], b = in[2][i];
          y.want.push_back(s.xhat[k] * g + b);
          y.tol.push_back(s.tol_xhat[k] * std::fabs(g) + kRel * (std::fabs(s.xhat[k] * g) + std::fabs(b)) +
                          kTiny);
        }
      return std::vector<Expected>{y};
    }
    case OpKind::LayerNormBackward: {
      // PyTorch's layer_norm backward: dx = rstd·(g − mean(g) − x̂·mean(g·x̂)), g = dy·γ.
      const Ln64 s(in[0], c.attrs.floats[0]);
      const int64_t m = s.m, d = s.d;
      Expected dx, dgamma, dbeta;
      for (int64_t r = 0; r < m; ++r) {
        double a = 0.0, b = 0.0, abs_g = 0.0, abs_gx = 0.0, gx_err = 0.0;
        for (int64_t i = 0; i < d; ++i) {
          const size_t k = static_cast<size_t>(r * d + i);
          const double g = f64(in[2][r * d + i]) * in[1][i];
          a += g;
          b += g * s.xhat[k];
          abs_g += std::fabs(g);
          abs_gx += std::fabs(g * s.xhat[k]);
          gx_err += std::fabs(g) * s.tol_xhat[k];
        }
        a /= static_cast<double>(d);
        b /= static_cast<double>(d);
        const double a_err = kRel * abs_g / static_cast<double>(d);
        const double b_err = (kRel * abs_gx + gx_err) / static_cast<double>(d);
        const double rs = s.rstd[static_cast<size_t>(r)];
        for (int64_t i = 0; i < d; ++i) {
          const size_t k = static_cast<size_t>(r * d + i);
          const double g = f64(in[2][r * d + i]) * in[1][i], xh = s.xhat[k];
          const double v = rs * (g - a - xh * b);
          dx.want.push_back(v);
          // Relative kRel of the terms, the propagated errors of a, b and x̂, and rstd's relative error.
          dx.tol.push_back(rs * (kRel * (std::fabs(g) + std::fabs(a) + std::fabs(xh * b)) + a_err +
                                 std::fabs(xh) * b_err + s.tol_xhat[k] * std::fabs(b)) +
                           kRel * std::fabs(v) + kTiny);
        }
      }
      for (int64_t j = 0; j < d; ++j) {
        double sg = 0.0, sb = 0.0, mag_g = 0.0, err_g = 0.0, mag_b = 0.0;
        for (int64_t r = 0; r < m; ++r) {
          const size_t k = static_cast<size_t>(r * d + j);
          const double dy = in[2][r * d + j];
          sg += dy * s.xhat[k];
          sb += dy;
          mag_g += std::fabs(dy * s.xhat[k]);
          err_g += std::fabs(dy) * s.tol_xhat[k];
          mag_b += std::fabs(dy);
        }
        dgamma.want.push_back(sg);
        dgamma.tol.push_back(kRel * mag_g + err_g + kTiny);
        dbeta.want.push_back(sb);
        dbeta.tol.push_back(kRel * mag_b + kTiny);
      }
      return std::vector<Expected>{dx, dgamma, dbeta};
    }
    case OpKind::Gelu: {
      // PyTorch's formula in double. tanh32's error (2 ulp of 1 at most, absolute) times |x|/2, tanh's
      // sensitivity to the float rounding of u, and 1e-6 relative for the rest.
      Expected y;
      for (float xf : in[0].values()) {
        const double x = xf, u = kGeluC * (x + kGeluK * x * x * x), t = std::tanh(u);
        const double v = 0.5 * x * (1.0 + t);
        y.want.push_back(v);
        const double t_err = 0x1p-22 + (1.0 - t * t) * std::fabs(u) * 0x1p-22;
        y.tol.push_back(1e-6 * std::fabs(v) + 0.5 * std::fabs(x) * t_err + kTiny);
      }
      return std::vector<Expected>{y};
    }
    case OpKind::GeluBackward: {
      Expected dx;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        const double x = in[0][i], dy = in[1][i];
        const double u = kGeluC * (x + kGeluK * x * x * x), t = std::tanh(u);
        const double du = kGeluC * (1.0 + 3.0 * kGeluK * x * x);
        const double left = 0.5 * (1.0 + t), right = 0.5 * x * (1.0 - t * t) * du;
        dx.want.push_back(dy * (left + right));
        const double t_err = 0x1p-22 + (1.0 - t * t) * std::fabs(u) * 0x1p-22;
        dx.tol.push_back(std::fabs(dy) *
                             (1e-6 * (std::fabs(left) + std::fabs(right)) +
                              t_err * (0.5 + std::fabs(x * t * du)) + 0x1p-23 * std::fabs(0.5 * x * du)) +
                         kTiny);
      }
      return std::vector<Expected>{dx};
    }
    case OpKind::Softmax:
    case OpKind::SoftmaxBackward: {
      const Shape& s = in[0].shape();
      const int64_t n = s[s.rank() - 1], r_per = s[s.rank() - 2], rows = s.numel() / n;
      const bool causal = c.attrs.ints[0] != 0;
      const double scale = c.attrs.floats[0];
      Expected out;
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t nv = causal ? std::min(row % r_per + 1, n) : n;
        const int64_t o = row * n;
        if (c.kind == OpKind::Softmax) {
          double mx = -INFINITY, zmax = 0.0;
          for (int64_t j = 0; j < nv; ++j) {
            mx = std::max(mx, scale * in[0][o + j]);
            zmax = std::max(zmax, std::fabs(scale * in[0][o + j]));
          }
          double sum = 0.0;
          for (int64_t j = 0; j < nv; ++j) sum += std::exp(scale * in[0][o + j] - mx);
          for (int64_t j = 0; j < n; ++j) {
            const double y = j < nv ? std::exp(scale * in[0][o + j] - mx) / sum : 0.0;
            out.want.push_back(y);
            // scale·x and z − m are rounded to float before exp32: absolute errors of the exponent up to
            // 2^-23·(|z| + |m|), relative errors of every e and so of y (through s as well).
            out.tol.push_back(j < nv ? y * (kRel + 0x1p-22 * (zmax + std::fabs(mx))) + kTiny : 0.0);
          }
        } else {
          double d = 0.0, mag = 0.0;
          for (int64_t j = 0; j < nv; ++j) {
            d += f64(in[0][o + j]) * in[1][o + j];
            mag += std::fabs(f64(in[0][o + j]) * in[1][o + j]);
          }
          for (int64_t j = 0; j < n; ++j) {
            const double y = in[0][o + j], dy = in[1][o + j];
            out.want.push_back(j < nv ? scale * y * (dy - d) : 0.0);
            out.tol.push_back(j < nv ? std::fabs(scale) * kRel * std::fabs(y) * (std::fabs(dy) + mag) + kTiny
                                     : 0.0);
          }
        }
      }
      return std::vector<Expected>{out};
    }
    default:
      break;
  }
  return std::nullopt;
}

const std::vector<BadCase> kLayerNormBad = {
    {{{}, {kEps}}, {Shape{3, 4}, Shape{5}, Shape{4}}, "γ of the wrong length"},
    {{{}, {kEps}}, {Shape{3, 4}, Shape{4}, Shape{3}}, "β of the wrong length"},
    {{{}, {kEps}}, {Shape{12}, Shape{12}, Shape{12}}, "rank-1 x"},
    {{{}, {kEps}}, {Shape{0, 4}, Shape{4}, Shape{4}}, "no rows"},
    {{{}, {}}, {Shape{3, 4}, Shape{4}, Shape{4}}, "no ε"},
    {{{}, {-1.0f}}, {Shape{3, 4}, Shape{4}, Shape{4}}, "negative ε"},
    {{{}, {NAN}}, {Shape{3, 4}, Shape{4}, Shape{4}}, "NaN ε"},
    {{{1}, {kEps}}, {Shape{3, 4}, Shape{4}, Shape{4}}, "an int attribute"},
    {{{}, {kEps}}, {Shape{3, 4}, Shape{4}}, "two inputs"}};
const std::vector<BadCase> kLayerNormBackwardBad = {
    {{{}, {kEps}}, {Shape{3, 4}, Shape{4}, Shape{3, 5}}, "dy of another shape"},
    {{{}, {kEps}}, {Shape{3, 4}, Shape{3}, Shape{3, 4}}, "γ of the wrong length"},
    {{{}, {kEps}}, {Shape{3, 4}, Shape{4}}, "no dy"},
    {{{}, {}}, {Shape{3, 4}, Shape{4}, Shape{3, 4}}, "no ε"}};
const std::vector<BadCase> kSoftmaxBad = {
    {{{0}, {1.0f}}, {Shape{7}}, "rank 1"},           {{{0}, {1.0f}}, {Shape{3, 0}}, "empty last axis"},
    {{{2}, {1.0f}}, {Shape{3, 3}}, "causal = 2"},    {{{-1}, {1.0f}}, {Shape{3, 3}}, "causal = -1"},
    {{{0}, {NAN}}, {Shape{3, 3}}, "NaN scale"},      {{{0}, {INFINITY}}, {Shape{3, 3}}, "infinite scale"},
    {{{}, {1.0f}}, {Shape{3, 3}}, "no causal flag"}, {{{0}, {}}, {Shape{3, 3}}, "no scale"}};
const std::vector<BadCase> kSoftmaxBackwardBad = {
    {{{0}, {1.0f}}, {Shape{3, 3}, Shape{3, 4}}, "y and dy differ"},
    {{{0}, {1.0f}}, {Shape{3}, Shape{3}}, "rank 1"},
    {{{3}, {1.0f}}, {Shape{3, 3}, Shape{3, 3}}, "causal = 3"},
    {{{0}, {1.0f}}, {Shape{3, 3}}, "no dy"}};

const RegisterOpTests kLayerNormTests(OpKind::LayerNorm, {1, make_case, expect, kLayerNormBad, {0, 1, 2}});
const RegisterOpTests kLayerNormBackwardTests(OpKind::LayerNormBackward,
                                              {1, make_case, expect, kLayerNormBackwardBad});
const RegisterOpTests kGeluTests(OpKind::Gelu, {1,
                                                make_case,
                                                expect,
                                                {{{}, {Shape{2}, Shape{2}}, "two inputs"},
                                                 {{{1}, {}}, {Shape{2}}, "an int attribute"},
                                                 {{{}, {0.5f}}, {Shape{2}}, "a float attribute"}},
                                                {0}});
const RegisterOpTests kGeluBackwardTests(
    OpKind::GeluBackward,
    {1, make_case, expect, {{{}, {Shape{2, 3}, Shape{3, 2}}, "shapes differ"}, {{}, {Shape{2}}, "no dy"}}});
const RegisterOpTests kSoftmaxTests(OpKind::Softmax, {2, make_case, expect, kSoftmaxBad, {0}});
const RegisterOpTests kSoftmaxBackwardTests(OpKind::SoftmaxBackward,
                                            {2, make_case, expect, kSoftmaxBackwardBad});

// Lane-wise exp32/tanh32 of vec_math.h over an array (tail lanes through the masked forms), once per
// ISA of this architecture.
#define TRIBUNAL_APPLY_KERNELS(NS, TARGET, V)                            \
  namespace NS {                                                         \
  TARGET void apply(const float* x, float* y, int64_t n, bool is_tanh) { \
    for (int64_t i = 0; i < n; i += V::W) {                              \
      const int c = static_cast<int>(std::min<int64_t>(V::W, n - i));    \
      const V::vf v = V::loadn(x + i, c);                                \
      V::storen(y + i, is_tanh ? V::tanh(v) : V::exp(v), c);             \
    }                                                                    \
  }                                                                      \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_APPLY_KERNELS)
#undef TRIBUNAL_APPLY_KERNELS

}  // namespace

TEST_CASE(
    "vec_math: lane-wise exp32 and tanh32 are bitwise the scalar functions (subnormals, ±inf, bounds)") {
  std::vector<float> x;
  for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 65537) {
    const float v = float_from_bits(static_cast<uint32_t>(u));
    if (v == v) x.push_back(v);  // NaN payloads are not part of the contract
  }
  for (float v : {0.0f,
                  -0.0f,
                  INFINITY,
                  -INFINITY,
                  FLT_MAX,
                  -FLT_MAX,
                  FLT_MIN,
                  -FLT_MIN,
                  std::numeric_limits<float>::denorm_min(),
                  88.72283935546875f,
                  88.7228317f,
                  -103.97820281982421875f,
                  -103.978210f,
                  -87.5f,
                  0.55f,
                  -0.55f,
                  0.549999952f,
                  9.02f,
                  44.4f,
                  1e-40f,
                  -1e-40f})
    x.push_back(v);
  for (float v = -110.0f; v < 95.0f; v += 0.0137f) x.push_back(v);
  for (bool is_tanh : {false, true}) {
    std::vector<float> want(x.size()), got(x.size());
    for (size_t i = 0; i < x.size(); ++i) want[i] = is_tanh ? tanh32(x[i]) : exp32(x[i]);
    const auto n = static_cast<int64_t>(x.size());
    for (SimdPath path : available_simd_paths()) {
      if (path == SimdPath::Scalar) continue;  // want is the scalar function itself
      CAPTURE(simd_path_name(path));
      std::fill(got.begin(), got.end(), 0.0f);
      switch (path) {
        TRIBUNAL_SIMD_CASES(isa::apply(x.data(), got.data(), n, is_tanh))
        case SimdPath::Scalar:
          break;
      }
      CHECK(std::memcmp(got.data(), want.data(), x.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("softmax of huge logits stays finite and sums to 1") {
  // exp of the raw logits would overflow (e^1e4) or underflow to all zeros (e^-1e4); the max subtraction
  // keeps every row finite. Row 1 spans float's range, row 2 is a tie at FLT_MAX, row 3 is all equal.
  const std::vector<float> x{1e4f,    8e4f,   -3e4f, 7.9e4f, 0.0f,    -1e4f,   1e38f,    -1e38f,
                             3e38f,   -3e38f, 2e38f, 0.0f,   FLT_MAX, FLT_MAX, -FLT_MAX, 1.0f,
                             FLT_MAX, 0.5f,   -5e4f, -5e4f,  -5e4f,   -5e4f,   -5e4f,    -5e4f};
  for (int64_t causal : {0, 1}) {
    Case c{OpKind::Softmax, {{causal}, {1.0f}}, {Tensor(Shape{4, 6}, x)}};
    const Tensor y = run_everywhere(c)[0];
    for (int64_t r = 0; r < 4; ++r) {
      double sum = 0.0;
      for (int64_t j = 0; j < 6; ++j) {
        CHECK(std::isfinite(y[r * 6 + j]));
        sum += y[r * 6 + j];
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    }
    if (!causal) {
      CHECK(y[1] == 1.0f);          // e^(8e4 − 8e4) / (1 + e^-1000 …)
      CHECK(y[12] == 1.0f / 3.0f);  // three ties at FLT_MAX
      CHECK(y[20] == 1.0f / 6.0f);  // all equal
    }
  }
}

TEST_CASE("causal softmax: each row sums to 1 over columns 0..r and the masked entries are +0") {
  std::mt19937 rng(11);
  for (const Shape& s : {Shape{2, 7, 9}, Shape{3, 9, 7}, Shape{1, 40, 40}, Shape{64, 5}}) {
    Case c{OpKind::Softmax, {{1}, {0.3f}}, {random_tensor(s, rng, false, -6.0f, 6.0f)}};
    const Tensor y = run_everywhere(c)[0];
    const int64_t n = s[s.rank() - 1], r_per = s[s.rank() - 2];
    for (int64_t row = 0; row < s.numel() / n; ++row) {
      const int64_t r = row % r_per;
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) {
        const float v = y[row * n + j];
        if (j > r) {
          CHECK(float_bits(v) == 0u);  // +0, not −0
        } else {
          CHECK(v > 0.0f);
          sum += v;
        }
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
    }
    // The backward of masked entries is +0 as well, whatever dy holds there.
    Case back{OpKind::SoftmaxBackward, c.attrs, {y, random_tensor(s, rng, false)}};
    const Tensor dx = run_everywhere(back)[0];
    for (int64_t row = 0; row < s.numel() / n; ++row)
      for (int64_t j = row % r_per + 1; j < n; ++j) CHECK(float_bits(dx[row * n + j]) == 0u);
  }
}

TEST_CASE("gelu matches PyTorch's tanh formula (F.gelu(x, approximate='tanh')) evaluated in double") {
  // 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) in double, the formula of PyTorch's kernel. Where
  // 1 + tanh does not cancel (x ≥ −1.5: 1 + t ≥ 0.06) the float result is within 1e-6 relative; below,
  // |y| is a small fraction of |x| and any float tanh form (PyTorch's float kernel included) is
  // accurate to a few ulp of |x|/2 instead.
  double worst_rel = 0.0, worst_abs = 0.0;
  std::vector<float> xs;
  for (float x = -12.0f; x <= 12.0f; x += 0.000731f) xs.push_back(x);
  const Tensor y =
      run_everywhere({OpKind::Gelu, {}, {Tensor(Shape{static_cast<int64_t>(xs.size())}, xs)}})[0];
  for (size_t i = 0; i < xs.size(); ++i) {
    const double xd = xs[i], want = 0.5 * xd * (1.0 + std::tanh(kGeluC * (xd + kGeluK * xd * xd * xd)));
    const double got = y[static_cast<int64_t>(i)];
    if (xd >= -1.5 && want != 0.0) worst_rel = std::max(worst_rel, std::fabs(got - want) / std::fabs(want));
    if (xd != 0.0) worst_abs = std::max(worst_abs, std::fabs(got - want) / std::fabs(xd));
  }
  MESSAGE("gelu vs double formula: max relative error " << worst_rel << " for x ≥ −1.5, max |error|/|x| "
                                                        << worst_abs << " overall");
  CHECK(worst_rel <= 1e-6);
  CHECK(worst_abs <= 0x1p-22);
}

TEST_CASE("gelu and gelu_backward special values") {
  const float inf = INFINITY;
  Case c{OpKind::Gelu, {}, {Tensor(Shape{6}, std::vector<float>{0.0f, -0.0f, inf, -inf, 20.0f, -20.0f})}};
  const Tensor y = run_everywhere(c)[0];
  CHECK(float_bits(y[0]) == 0u);
  CHECK(float_bits(y[1]) == 0u);  // h = −0, t = −0: fma(−0, −0, −0) = +0 (PyTorch gives −0)
  CHECK(y[2] == inf);
  CHECK(std::isnan(y[3]));  // −inf·(1 + (−1)), as in PyTorch
  CHECK(y[4] == 20.0f);     // saturated: x·(1 + 1)/2
  CHECK(float_bits(y[5]) == 0u);
  Case back{OpKind::GeluBackward,
            {},
            {Tensor(Shape{5}, std::vector<float>{0.0f, inf, -inf, 1e20f, -1e20f}),
             Tensor(Shape{5}, std::vector<float>{2.0f, 3.0f, 3.0f, 3.0f, 3.0f})}};
  const Tensor dx = run_everywhere(back)[0];
  CHECK(dx[0] == 1.0f);  // gelu'(0) = 1/2
  CHECK(dx[1] == 3.0f);  // saturated: 1·dy, no 0·inf
  CHECK(float_bits(dx[2]) == 0u);
  CHECK(dx[3] == 3.0f);
  CHECK(float_bits(dx[4]) == 0u);
}

TEST_CASE("layer_norm: each output row has mean β and, with γ = 1, variance 1 (the normalization itself)") {
  std::mt19937 rng(3);
  const int64_t m = 7, d = 61;
  Tensor gamma(Shape{d}, std::vector<float>(d, 1.0f)), beta(Shape{d}, std::vector<float>(d, 0.0f));
  Case c{OpKind::LayerNorm, {{}, {kEps}}, {random_tensor(Shape{m, d}, rng, true, 3.0f, 9.0f), gamma, beta}};
  const Tensor y = run_everywhere(c)[0];
  for (int64_t r = 0; r < m; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t i = 0; i < d; ++i) mean += y[r * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (y[r * d + i] - mean) * (y[r * d + i] - mean);
    var /= d;
    CHECK(std::fabs(mean) < 1e-5);
    CHECK(var == doctest::Approx(1.0).epsilon(1e-4));  // ε = 1e-5 against var ≈ 3 moves it by ~2e-6
  }
}

TEST_CASE("layer_norm_backward on rows wider than one block of lane columns keeps the reference's bits") {
  // D = 2^15 + 1003: the SIMD paths accumulate dγ and dβ over two blocks of columns (layer_norm.cpp
  // kLaneColumns), the second not a whole number of vectors; 37 rows put two rows in some lanes.
  std::mt19937 rng(5);
  const int64_t m = 37, d = (int64_t{1} << 15) + 1003;
  Case c{OpKind::LayerNormBackward,
         {{}, {kEps}},
         {random_tensor(Shape{m, d}, rng, true, -2.0f, 2.5f), random_tensor(Shape{d}, rng, false),
          random_tensor(Shape{m, d}, rng, false)}};
  const std::vector<Tensor> out = run_everywhere(c);
  // dβ[j] is the sum of dy over the rows: a column of the second block, against float64.
  const int64_t j = d - 7;
  double want = 0.0, magnitude = 0.0;
  for (int64_t r = 0; r < m; ++r) {
    want += c.in[2][r * d + j];
    magnitude += std::fabs(c.in[2][r * d + j]);
  }
  CHECK(std::fabs(out[2][j] - want) <= 1e-5 * magnitude);
}
