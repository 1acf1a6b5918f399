// canonical_sum (ops/reduce.h): the documented order — 32 strided lane accumulators, then the fixed
// binary tree w = 16, 8, 4, 2, 1 — re-implemented here independently (the tree recursively), and
// compared bitwise. Every backend (AVX2, AVX-512, CUDA warp shuffles) must reproduce exactly this, so
// the test pins the order, not just the value; a second test shows the order is observable.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/math.h"
#include "ops/reduce.h"

using namespace tribunal;

namespace {

/// After the tree step of width w, lane j (j < w) holds lane_{2w}[j] + lane_{2w}[j + w], where
/// lane_32 are the strided accumulators. Written top-down, so it shares no loop with the kernel.
float tree(const std::vector<float>& lanes, int j, int w) {
  if (w == 32) return lanes[static_cast<size_t>(j)];
  return tree(lanes, j, 2 * w) + tree(lanes, j + w, 2 * w);
}

/// The documented canonical sum of x[i·stride], i < n.
float documented_sum(const float* x, int64_t n, int64_t stride) {
  std::vector<float> lanes(32, 0.0f);
  for (int j = 0; j < 32; ++j)
    for (int64_t i = j; i < n; i += 32) lanes[static_cast<size_t>(j)] += x[i * stride];
  return tree(lanes, 0, 1);
}

float sequential_sum(const std::vector<float>& x) {
  float s = 0.0f;
  for (float v : x) s += v;
  return s;
}

/// n values spread over n·stride floats; the gaps hold NaN so that reading one poisons the result.
std::vector<float> strided_values(int64_t n, int64_t stride, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> buf(static_cast<size_t>(std::max<int64_t>(n * stride, 1)),
                         std::numeric_limits<float>::quiet_NaN());
  for (int64_t i = 0; i < n; ++i) {
    // Mixed magnitudes make rounding (hence the order) matter.
    const float scale = std::ldexp(1.0f, static_cast<int>(rng() % 24) - 12);
    buf[static_cast<size_t>(i * stride)] = dist(rng) * scale;
  }
  return buf;
}

}  // namespace

TEST_CASE("canonical_sum is bitwise the documented 32-lane + tree order") {
  std::mt19937 rng(20240611);
  for (int64_t stride : {1, 7}) {
    for (int64_t n : {0, 1, 2, 31, 32, 33, 63, 64, 65, 1000, 4097}) {
      for (int trial = 0; trial < 8; ++trial) {
        const std::vector<float> buf = strided_values(n, stride, rng);
        const float got = canonical_sum(buf.data(), n, stride);
        const float want = documented_sum(buf.data(), n, stride);
        INFO("n = " << n << ", stride = " << stride << ", trial " << trial);
        CHECK(float_bits(got) == float_bits(want));
      }
    }
  }
}

TEST_CASE("canonical_sum of nothing is +0, and of one value is that value") {
  const float x[1] = {-0.0f};
  CHECK(float_bits(canonical_sum(x, 0)) == 0u);
  // One element: lane 0 = +0 + (−0) = +0 under round-to-nearest; the tree adds only +0s.
  CHECK(float_bits(canonical_sum(x, 1)) == 0u);
  const float y[1] = {0.3f};
  CHECK(float_bits(canonical_sum(y, 1)) == float_bits(0.3f));
}

TEST_CASE("canonical_sum's order is observable: it differs from a sequential sum") {
  // A hand-made case: 1 + 2^24 rounds back to 2^24 (ties-to-even), so a left-to-right sum of
  // {1, 2^24, 1} loses both ones, while the canonical order adds lanes 0 and 2 first (1 + 1 = 2)
  // and then 2 + 2^24 exactly.
  const std::vector<float> x{1.0f, 16777216.0f, 1.0f};
  CHECK(sequential_sum(x) == 16777216.0f);
  CHECK(canonical_sum(x.data(), 3) == 16777218.0f);

  // And on ordinary random data the two disagree most of the time once n > 32.
  std::mt19937 rng(7);
  int differ = 0;
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<float> v = strided_values(1000, 1, rng);
    if (float_bits(canonical_sum(v.data(), 1000)) != float_bits(sequential_sum(v))) ++differ;
  }
  MESSAGE("canonical vs sequential differ in " << differ << " of 100 random 1000-element sums");
  CHECK(differ > 50);
}

TEST_CASE("canonical_sum is within the rounding-error bound of the exact (double) sum") {
  // Each element goes through at most ceil(n/32) lane additions plus 5 tree levels, so the classic
  // bound |s − Σx| ≤ (ceil(n/32) + 5)·u·Σ|x| holds to first order, u = 2^-24. Checked with a 1%
  // margin for the second-order term.
  std::mt19937 rng(11);
  for (int64_t stride : {1, 7}) {
    for (int64_t n : {1, 31, 32, 33, 1000, 100000}) {
      const std::vector<float> buf = strided_values(n, stride, rng);
      double exact = 0.0, abs_sum = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        exact += buf[static_cast<size_t>(i * stride)];
        abs_sum += std::fabs(buf[static_cast<size_t>(i * stride)]);
      }
      const double bound = 1.01 * static_cast<double>((n + 31) / 32 + 5) * 0x1p-24 * abs_sum;
      const double err = std::fabs(static_cast<double>(canonical_sum(buf.data(), n, stride)) - exact);
      INFO("n = " << n << ", stride = " << stride << ", error " << err << ", bound " << bound);
      CHECK(err <= bound);
    }
  }
}

TEST_CASE("canonical_sum propagates special values") {
  std::vector<float> x(100, 1.0f);
  x[57] = std::numeric_limits<float>::infinity();
  CHECK(canonical_sum(x.data(), 100) == std::numeric_limits<float>::infinity());
  x[3] = -std::numeric_limits<float>::infinity();
  CHECK(std::isnan(canonical_sum(x.data(), 100)));
  x[3] = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(canonical_sum(x.data(), 100)));
}
