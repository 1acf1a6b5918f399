// Matmul: every SIMD path and thread count must be bitwise identical (memcmp) to matmul_reference, and
// matmul_reference must be the mathematically right product (float64 check, exact integer cases).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/kernels/matmul.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

using namespace tribunal;

namespace {

constexpr uint32_t kSentinelBits = 0x7FBADBADu;  // a NaN no kernel produces: "never written"
constexpr int64_t kGuard = 64;                   // floats of guard band on each side of C

float from_bits(uint32_t u) {
  return std::bit_cast<float>(u);
}

/// Uniform in [-1, 1], with about one value in 32 a random subnormal (either sign).
std::vector<float> random_values(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<uint32_t> mantissa(1, (1u << 23) - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    if (rng() % 32 == 0) {
      x = from_bits(mantissa(rng) | ((rng() & 1u) << 31));
    } else {
      x = uniform(rng);
    }
  }
  return v;
}

ThreadPool& pool(int threads) {
  static ThreadPool p1(1), p2(2), p3(3);
  return threads == 1 ? p1 : threads == 2 ? p2 : p3;
}

/// Inputs of one case and the reference output.
struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b, has_bias;
  std::vector<float> a, b, bias, expected;

  MatmulArgs args(float* c) const {
    return MatmulArgs{a.data(), b.data(), has_bias ? bias.data() : nullptr, c, m, n, k, trans_a, trans_b};
  }
};

Case make_case(int64_t m, int64_t n, int64_t k, bool ta, bool tb, bool has_bias, std::mt19937& rng) {
  Case c{m,
         n,
         k,
         ta,
         tb,
         has_bias,
         random_values(m * k, rng),
         random_values(k * n, rng),
         random_values(n, rng),
         std::vector<float>(static_cast<size_t>(m * n))};
  matmul_reference(c.args(c.expected.data()));
  return c;
}

std::string describe(const Case& c, SimdPath path, int threads) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
         " trans_a=" + std::to_string(c.trans_a) + " trans_b=" + std::to_string(c.trans_b) +
         " bias=" + std::to_string(c.has_bias) + " path=" + simd_path_name(path) +
         " threads=" + std::to_string(threads);
}

/// Runs the fast matmul on every path and thread count; C must equal the reference bit for bit, every
/// element must be written, and nothing outside C may be touched.
void check_fast_matches_reference(const Case& c) {
  const size_t count = static_cast<size_t>(c.m * c.n);
  std::vector<float> buf(count + 2 * kGuard);
  for (SimdPath path : available_simd_paths()) {
    for (int threads : {1, 2, 3}) {
      std::fill(buf.begin(), buf.end(), from_bits(kSentinelBits));
      float* out = buf.data() + kGuard;
      matmul(c.args(out), pool(threads), path);
      INFO(describe(c, path, threads));
      CHECK(std::memcmp(out, c.expected.data(), count * sizeof(float)) == 0);
      bool guards_intact = true;
      for (int64_t g = 0; g < kGuard; ++g) {
        guards_intact &= std::bit_cast<uint32_t>(buf[static_cast<size_t>(g)]) == kSentinelBits;
        guards_intact &=
            std::bit_cast<uint32_t>(buf[count + kGuard + static_cast<size_t>(g)]) == kSentinelBits;
      }
      CHECK(guards_intact);
    }
  }
}

void check_all_variants(int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool has_bias : {false, true})
        check_fast_matches_reference(make_case(m, n, k, ta, tb, has_bias, rng));
}

}  // namespace

TEST_CASE("matmul: simd path list") {
  const auto paths = available_simd_paths();
  REQUIRE(!paths.empty());
  CHECK(paths.front() == SimdPath::Scalar);
  CHECK(paths.back() == best_simd_path());
  CHECK(std::string(simd_path_name(SimdPath::Scalar)) == "scalar");
  CHECK(std::string(simd_path_name(SimdPath::Avx2)) == "avx2");
  CHECK(std::string(simd_path_name(SimdPath::Avx512)) == "avx512");
  CHECK(std::string(simd_path_name(SimdPath::Neon)) == "neon");
  // A path the CPU or build lacks is refused, never silently replaced.
  for (SimdPath p : {SimdPath::Avx2, SimdPath::Avx512, SimdPath::Neon}) {
    bool have = false;
    for (SimdPath q : paths) have |= q == p;
    if (!have) {
      float c = 0;
      const float one = 1;
      CHECK_THROWS_AS(matmul(MatmulArgs{&one, &one, nullptr, &c, 1, 1, 1}, pool(1), p), OpError);
    }
  }
}

TEST_CASE("matmul: bad arguments throw OpError") {
  float c = 0;
  CHECK_THROWS_AS(matmul(MatmulArgs{nullptr, nullptr, nullptr, &c, -1, 1, 1}, pool(1)), OpError);
  CHECK_THROWS_AS(matmul(MatmulArgs{nullptr, &c, nullptr, &c, 1, 1, 1}, pool(1)), OpError);
  CHECK_THROWS_AS(matmul_reference(MatmulArgs{&c, &c, nullptr, nullptr, 1, 1, 1}), OpError);
}

TEST_CASE("matmul: bitwise equal to the reference on tile edges") {
  std::mt19937 rng(1);
  // Register tiles are 6×16 (AVX2) and 14×32 (AVX-512): sizes around them hit every edge kernel.
  for (int64_t m : {1, 5, 6, 7, 13, 14, 15, 29})
    for (int64_t n : {1, 7, 8, 15, 16, 17, 31, 32, 33, 97})
      for (int64_t k : {0, 1, 2, 13}) check_all_variants(m, n, k, rng);
}

TEST_CASE("matmul: bitwise equal to the reference on primes and odd sizes") {
  std::mt19937 rng(2);
  const int64_t dims[] = {1, 2, 3, 7, 13, 31, 97, 257, 15, 17, 33, 63, 65};
  const int64_t ks[] = {0, 1, 7, 31, 97, 255, 256, 257, 300, 513};
  std::uniform_int_distribution<size_t> pick_dim(0, std::size(dims) - 1), pick_k(0, std::size(ks) - 1);
  for (int i = 0; i < 40; ++i) {
    const int64_t m = dims[pick_dim(rng)], n = dims[pick_dim(rng)], k = ks[pick_k(rng)];
    if (m * n * k > 4'000'000) continue;
    check_all_variants(m, n, k, rng);
  }
}

TEST_CASE("matmul: bitwise equal to the reference on shapes that use several threads") {
  std::mt19937 rng(3);
  // Big enough (≥ 4M multiply-adds) that the pool splits them: by rows when M has more micro-panels,
  // by columns otherwise, with a partial panel at the end of the last range.
  check_all_variants(257, 97, 257, rng);
  check_all_variants(97, 257, 257, rng);
  check_all_variants(64, 256, 784, rng);  // the MLP's first layer, forward
  check_all_variants(784, 256, 64, rng);  // its weight gradient shape
  check_all_variants(64, 784, 256, rng);  // its input gradient shape
  check_all_variants(64, 10, 256, rng);
  // B rows 1 KiB apart or more (N a multiple of 256) under 256 rows of A: B packed from 64 rows on.
  check_all_variants(128, 512, 300, rng);
  check_all_variants(70, 768, 33, rng);
}

TEST_CASE("matmul: a product narrower than one vector (computed as its transpose) has the reference's bits") {
  std::mt19937 rng(7);
  // N < the vector width and M ≥ two widths, no bias: the fast path computes Cᵀ = op(B)ᵀ·op(A)ᵀ and
  // transposes it back (ops/kernels/matmul.cpp "narrow"); with a bias the same shapes take the direct
  // path. The MLP's 10-class head's weight gradient, one column, and ragged sizes with several K blocks.
  check_all_variants(256, 10, 64, rng);
  check_all_variants(784, 1, 300, rng);
  check_all_variants(97, 15, 1031, rng);
  check_all_variants(33, 7, 13, rng);
  // Signed zeros through the transposed chain: each product is (−1)·(+0) = −0 in either factor order,
  // and added to the chain's +0 start it gives +0, as in the reference.
  Case z = make_case(40, 3, 5, true, false, false, rng);
  std::fill(z.a.begin(), z.a.end(), -1.0f);
  std::fill(z.b.begin(), z.b.end(), 0.0f);
  matmul_reference(z.args(z.expected.data()));
  for (float v : z.expected) CHECK(!std::signbit(v));  // the chain starts at +0 without a bias
  check_fast_matches_reference(z);
  // A NaN in A poisons its row of C (its column of Cᵀ).
  Case c = make_case(64, 9, 40, false, true, false, rng);
  c.a[static_cast<size_t>(5 * c.k + 11)] = std::numeric_limits<float>::quiet_NaN();
  matmul_reference(c.args(c.expected.data()));
  for (int64_t j = 0; j < c.n; ++j) CHECK(std::isnan(c.expected[static_cast<size_t>(5 * c.n + j)]));
  check_fast_matches_reference(c);
}

TEST_CASE("matmul: bitwise equal to the reference with large K") {
  std::mt19937 rng(4);
  check_all_variants(13, 33, 3001, rng);
  check_all_variants(31, 97, 4099, rng);
  check_all_variants(1, 1, 3000, rng);
}

TEST_CASE("matmul_reference: exact on small integers, all transposes") {
  // Logical A (2×3), B (3×2), C = A·B (+ bias); small integers make every fma exact.
  const float A[2][3] = {{1, 2, 3}, {4, 5, 6}};
  const float B[3][2] = {{7, 8}, {9, 10}, {11, 12}};
  const float bias[2] = {100, -1000};
  const float expect[2][2] = {{58, 64}, {139, 154}};
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      float a[6], b[6];
      for (int i = 0; i < 2; ++i)
        for (int p = 0; p < 3; ++p) a[ta ? p * 2 + i : i * 3 + p] = A[i][p];
      for (int p = 0; p < 3; ++p)
        for (int j = 0; j < 2; ++j) b[tb ? j * 3 + p : p * 2 + j] = B[p][j];
      for (bool with_bias : {false, true}) {
        float c[4] = {};
        matmul_reference(MatmulArgs{a, b, with_bias ? bias : nullptr, c, 2, 2, 3, ta, tb});
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j) CHECK(c[i * 2 + j] == expect[i][j] + (with_bias ? bias[j] : 0.0f));
        float fast[4] = {};
        for (SimdPath path : available_simd_paths()) {
          matmul(MatmulArgs{a, b, with_bias ? bias : nullptr, fast, 2, 2, 3, ta, tb}, pool(2), path);
          CHECK(std::memcmp(fast, c, sizeof c) == 0);
        }
      }
    }
  }
}

TEST_CASE("matmul_reference: close to a float64 product") {
  std::mt19937 rng(5);
  for (auto [m, n, k] : {std::array<int64_t, 3>{37, 23, 300}, {5, 64, 1000}, {16, 16, 16}}) {
    const Case c = make_case(m, n, k, false, false, true, rng);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = c.bias[static_cast<size_t>(j)], magnitude = std::fabs(exact);
        for (int64_t p = 0; p < k; ++p) {
          const double prod =
              double(c.a[static_cast<size_t>(i * k + p)]) * c.b[static_cast<size_t>(p * n + j)];
          exact += prod;
          magnitude += std::fabs(prod);
        }
        // Each fma rounds once: |error| ≤ k·u·Σ|terms| (Higham, Accuracy and Stability, §3.1), u = 2⁻²⁴.
        const double bound = static_cast<double>(k + 1) * std::ldexp(1.0, -24) * magnitude + 1e-30;
        CHECK(std::fabs(double(c.expected[static_cast<size_t>(i * n + j)]) - exact) <= bound);
      }
    }
  }
}

TEST_CASE("matmul: NaN, Inf and signed zero behave like the reference") {
  std::mt19937 rng(6);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();

  SUBCASE("a NaN in A poisons its row") {
    for (bool ta : {false, true}) {
      Case c = make_case(19, 37, 40, ta, false, true, rng);
      const int64_t row = 5, col = 11;
      c.a[static_cast<size_t>(ta ? col * c.m + row : row * c.k + col)] = nan;
      matmul_reference(c.args(c.expected.data()));
      for (int64_t j = 0; j < c.n; ++j) CHECK(std::isnan(c.expected[static_cast<size_t>(row * c.n + j)]));
      CHECK(!std::isnan(c.expected[0]));
      check_fast_matches_reference(c);
    }
  }
  SUBCASE("an Inf in B gives Inf or NaN in its column") {
    for (bool tb : {false, true}) {
      Case c = make_case(17, 35, 40, false, tb, false, rng);
      const int64_t p = 3, col = 33;
      c.b[static_cast<size_t>(tb ? col * c.k + p : p * c.n + col)] = inf;
      matmul_reference(c.args(c.expected.data()));
      for (int64_t i = 0; i < c.m; ++i) CHECK(!std::isfinite(c.expected[static_cast<size_t>(i * c.n + col)]));
      check_fast_matches_reference(c);
    }
  }
  SUBCASE("signed zeros") {
    // K = 0: C is the bias, -0.0 included; without bias it is +0.0.
    Case c = make_case(3, 18, 0, false, false, true, rng);
    c.bias[4] = -0.0f;
    matmul_reference(c.args(c.expected.data()));
    CHECK(std::signbit(c.expected[4]));
    check_fast_matches_reference(c);
    // fma(-1, +0, -0) = -0 all along the chain; the same chain from +0 ends at +0.
    for (bool with_bias : {false, true}) {
      Case z = make_case(7, 20, 5, false, false, with_bias, rng);
      std::fill(z.a.begin(), z.a.end(), -1.0f);
      std::fill(z.b.begin(), z.b.end(), 0.0f);
      std::fill(z.bias.begin(), z.bias.end(), -0.0f);
      matmul_reference(z.args(z.expected.data()));
      for (float v : z.expected) CHECK(std::signbit(v) == with_bias);
      check_fast_matches_reference(z);
    }
  }
}
