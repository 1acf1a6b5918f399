// exp32, log32 and tanh32 (ops/math.h): accuracy against double-precision libm over dense sweeps of the float
// domain, the special values the contract documents, and golden bit patterns. The golden bits matter
// more than the accuracy bound: the functions are part of the RepOps contract, so any change to the
// polynomial, the range reduction or the operation order changes trajectories and must be deliberate.
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ios>
#include <limits>
#include <string>

#include "ops/math.h"

using namespace tribunal;

namespace {

// Ulp bound the sweeps assert; the comments in ops/math.h promise "about 1 ulp".
constexpr int64_t kMaxUlp = 2;

/// Maps a float to an integer that is monotonic in the float's value, so that the difference of two
/// such integers counts the representable floats between them (+0 and −0 both map to 0).
int64_t ordered(float x) {
  const uint32_t u = float_bits(x);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7FFFFFFFu) : static_cast<int64_t>(u);
}

int64_t ulp_distance(float a, float b) {
  return std::llabs(ordered(a) - ordered(b));
}

/// Largest ulp error seen by a sweep, and where.
struct ErrorStats {
  int64_t max_ulp = 0;
  float worst_x = 0.0f;
  float worst_got = 0.0f;
  float worst_want = 0.0f;
  int64_t count = 0;

  /// `want` is the correctly rounded float of the double-precision result (double libm is accurate to
  /// well under 1 double ulp, so its rounding to float is the correctly rounded float except in cases
  /// far rarer than the sweeps can hit, and then off by at most 1).
  void add(float x, float got, double want_d) {
    const float want = static_cast<float>(want_d);
    const int64_t d = ulp_distance(got, want);
    ++count;
    if (d > max_ulp) {
      max_ulp = d;
      worst_x = x;
      worst_got = got;
      worst_want = want;
    }
  }

  std::string str() const {
    char buf[256];
    std::snprintf(buf, sizeof buf, "max %lld ulp over %lld points (x = %.9g [0x%08x]: got %.9g, want %.9g)",
                  static_cast<long long>(max_ulp), static_cast<long long>(count),
                  static_cast<double>(worst_x), float_bits(worst_x), static_cast<double>(worst_got),
                  static_cast<double>(worst_want));
    return buf;
  }
};

// exp32's finite domain: above it the result is +inf, below it +0 (see the special-value tests).
constexpr float kExpHi = 88.72283935546875f;
constexpr float kExpLo = -103.97820281982421875f;

bool in_exp_domain(float x) {
  return x >= kExpLo && x <= kExpHi;
}

void sweep_exp_bits(uint32_t lo, uint32_t hi, uint32_t step, ErrorStats& s) {
  for (uint64_t u = lo; u <= hi; u += step) {
    const float x = float_from_bits(static_cast<uint32_t>(u));
    if (!in_exp_domain(x)) continue;
    s.add(x, exp32(x), std::exp(static_cast<double>(x)));
  }
}

/// Every `step`-th float in [a, b] (a ≤ b, any signs), by walking the ordered integers.
template <class F>
void every_float(float a, float b, int64_t step, F&& f) {
  for (int64_t o = ordered(a); o <= ordered(b); o += step) {
    const uint32_t u = o < 0 ? (static_cast<uint32_t>(-o) | 0x80000000u) : static_cast<uint32_t>(o);
    f(float_from_bits(u));
  }
}

void sweep_log_bits(uint32_t lo, uint32_t hi, uint32_t step, ErrorStats& s) {
  for (uint64_t u = lo; u <= hi; u += step) {
    const float x = float_from_bits(static_cast<uint32_t>(u));
    s.add(x, log32(x), std::log(static_cast<double>(x)));
  }
}

bool is_nan(float x) {
  return x != x;
}

}  // namespace

TEST_CASE("exp32 is within 2 ulp of the correctly rounded e^x over its whole finite domain") {
  SUBCASE("every 97th bit pattern, both signs") {
    ErrorStats s;
    sweep_exp_bits(0x00000000u, 0xFFFFFFFFu, 97, s);
    MESSAGE("exp32 sparse sweep: " << s.str());
    CHECK(s.count > 1000000);
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every 499th float near 0 (|x| < 2^-10, down to subnormals), where e^x ≈ 1 + x") {
    ErrorStats s;
    every_float(-0.0009765625f, 0.0009765625f, 499,
                [&](float x) { s.add(x, exp32(x), std::exp(double(x))); });
    MESSAGE("exp32 near 0: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every 31st float in 2^-10 ≤ |x| ≤ 1 (about the reduced range itself)") {
    ErrorStats s;
    every_float(0.0009765625f, 1.0f, 31, [&](float x) { s.add(x, exp32(x), std::exp(double(x))); });
    every_float(-1.0f, -0.0009765625f, 31, [&](float x) { s.add(x, exp32(x), std::exp(double(x))); });
    MESSAGE("exp32 in [-1, 1]: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every float from 80 up to the overflow threshold (the 2^127·2^n split)") {
    ErrorStats s;
    every_float(80.0f, kExpHi, 1, [&](float x) { s.add(x, exp32(x), std::exp(double(x))); });
    MESSAGE("exp32 near overflow: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every float from -87 (results leave the normal range at -87.34) down to the underflow threshold") {
    // Results are subnormal here; ulp distance counts subnormal steps, i.e. an absolute error bound.
    ErrorStats s;
    every_float(kExpLo, -87.0f, 1, [&](float x) { s.add(x, exp32(x), std::exp(double(x))); });
    MESSAGE("exp32 subnormal results: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
}

TEST_CASE("exp32 boundaries: the last finite and first zero results are where correct rounding puts them") {
  // ln(FLT_MAX) = 88.7228391…; the float below the overflow threshold must give a finite result.
  const float below = std::nextafter(kExpHi, 0.0f);
  CHECK(std::isfinite(exp32(below)));
  CHECK(exp32(std::nextafter(kExpHi, INFINITY)) == INFINITY);
  CHECK(exp32(kExpHi) == INFINITY);  // e^88.7228394 > FLT_MAX + ulp/2: rounds to +inf
  // e^kExpLo < 2^-150 (half the smallest subnormal), so +0 is the correctly rounded value there.
  CHECK(exp32(kExpLo) == 0.0f);
  CHECK(exp32(std::nextafter(kExpLo, -INFINITY)) == 0.0f);
  CHECK(float_bits(exp32(-200.0f)) == 0u);  // +0, not −0
  // Smallest subnormal: e^-103.2789 ≈ 2^-149.
  const float x = static_cast<float>(std::log(std::ldexp(1.0, -149)));
  CHECK(exp32(x) == std::numeric_limits<float>::denorm_min());
}

TEST_CASE("exp32 special values") {
  CHECK(is_nan(exp32(NAN)));
  CHECK(is_nan(exp32(-NAN)));
  CHECK(is_nan(exp32(float_from_bits(0x7F800001u))));  // signalling NaN comes back as a NaN
  CHECK(exp32(INFINITY) == INFINITY);
  CHECK(exp32(-INFINITY) == 0.0f);
  CHECK(float_bits(exp32(-INFINITY)) == 0u);
  CHECK(float_bits(exp32(0.0f)) == float_bits(1.0f));
  CHECK(float_bits(exp32(-0.0f)) == float_bits(1.0f));
  CHECK(exp32(FLT_MAX) == INFINITY);
  CHECK(exp32(-FLT_MAX) == 0.0f);
  CHECK(exp32(std::numeric_limits<float>::denorm_min()) == 1.0f);
}

TEST_CASE("log32 is within 2 ulp of the correctly rounded ln x over all positive floats") {
  SUBCASE("every 97th positive bit pattern, subnormals through FLT_MAX") {
    ErrorStats s;
    sweep_log_bits(0x00000001u, 0x7F7FFFFFu, 97, s);
    MESSAGE("log32 sparse sweep: " << s.str());
    CHECK(s.count > 1000000);
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every subnormal with a stride of 7, and the first and last 10000") {
    ErrorStats s;
    sweep_log_bits(0x00000001u, 0x007FFFFFu, 7, s);
    sweep_log_bits(0x00000001u, 10000u, 1, s);
    sweep_log_bits(0x007FFFFFu - 10000u, 0x00800000u + 10000u, 1, s);
    MESSAGE("log32 subnormals: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every float within 2^-7 of 1 (log x ≈ x − 1, cancellation-prone)") {
    ErrorStats s;
    every_float(1.0f - 0.0078125f, 1.0f + 0.0078125f, 1,
                [&](float x) { s.add(x, log32(x), std::log(double(x))); });
    MESSAGE("log32 near 1: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every float around the √2 mantissa split and the top of the range") {
    ErrorStats s;
    every_float(1.41f, 1.42f, 1, [&](float x) { s.add(x, log32(x), std::log(double(x))); });
    every_float(0.705f, 0.71f, 1, [&](float x) { s.add(x, log32(x), std::log(double(x))); });
    sweep_log_bits(0x7F7FFFFFu - 100000u, 0x7F7FFFFFu, 1, s);
    MESSAGE("log32 at √2 and near FLT_MAX: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
}

TEST_CASE("log32 special values and exact points") {
  CHECK(is_nan(log32(NAN)));
  CHECK(is_nan(log32(-1.0f)));
  CHECK(is_nan(log32(-INFINITY)));
  CHECK(is_nan(log32(-std::numeric_limits<float>::denorm_min())));
  CHECK(log32(0.0f) == -INFINITY);
  CHECK(log32(-0.0f) == -INFINITY);
  CHECK(log32(INFINITY) == INFINITY);
  CHECK(float_bits(log32(1.0f)) == 0u);  // exactly +0
  // 1 ± ulp, correctly rounded: log(1 + 2^-23) = 2^-23 − 2^-47 + O(2^-69), and 2^-23 − 2^-47 is the float
  // just below 2^-23 (the grid is finer below a power of two); log(1 − 2^-24) = −2^-24 − 2^-49 − …, and
  // 2^-49 is a quarter of the grid spacing above 2^-24, so it rounds to −2^-24.
  CHECK(log32(std::nextafter(1.0f, 2.0f)) == 0x1.fffffep-24f);
  CHECK(log32(std::nextafter(1.0f, 0.0f)) == -0x1p-24f);
  CHECK(ulp_distance(log32(FLT_MAX), static_cast<float>(std::log(double(FLT_MAX)))) <= 1);
  CHECK(ulp_distance(log32(std::numeric_limits<float>::denorm_min()),
                     static_cast<float>(std::log(double(std::numeric_limits<float>::denorm_min())))) <= 1);
  CHECK(ulp_distance(log32(FLT_MIN), static_cast<float>(std::log(double(FLT_MIN)))) <= 1);
}

TEST_CASE("exp32/log32 golden bits: any change to the polynomials or the operation order is caught") {
  // Recorded from this implementation after checking each is within 1 ulp of the true value (the
  // CHECKs on ulp_distance below re-verify that, so a wrong golden cannot hide an inaccuracy).
  struct Golden {
    float x;
    bool is_exp;
    uint32_t bits;
  };
  const Golden golden[] = {
      {1.0f, true, 0x402DF854u},      // e
      {-10.5f, true, 0x37E6FE13u},    // e^-10.5
      {0.5f, true, 0x3FD3094Cu},      // √e
      {20.0f, true, 0x4DE75844u},     // e^20
      {-100.0f, true, 0x0000001Bu},   // subnormal result
      {88.5f, true, 0x7F4CDCC3u},     // 2^127·2^n split (1 ulp below the correctly rounded 0x7F4CDCC4)
      {2.0f, false, 0x3F317218u},     // ln 2
      {10.0f, false, 0x40135D8Eu},    // ln 10
      {0.1f, false, 0xC0135D8Eu},     // ln 0.1
      {1e-40f, false, 0xC2B834F2u},   // subnormal input
      {3.0e38f, false, 0x42B13196u},  // near FLT_MAX
  };
  for (const Golden& g : golden) {
    const float got = g.is_exp ? exp32(g.x) : log32(g.x);
    const double want = g.is_exp ? std::exp(double(g.x)) : std::log(double(g.x));
    INFO((g.is_exp ? "exp32(" : "log32(")
         << g.x << ") = " << got << " [0x" << std::hex << float_bits(got) << "]");
    CHECK(ulp_distance(got, static_cast<float>(want)) <= 1);
    CHECK(float_bits(got) == g.bits);
  }
}

// ---- tanh32 ---------------------------------------------------------------------------------------

TEST_CASE("tanh32 is within 2 ulp of the correctly rounded tanh x over all floats") {
  // An exhaustive sweep of the positive floats measured max 2 ulp (58 points at 2 ulp, all just above the
  // 0.55 branch split); tanh32 is odd by construction, so both signs share that bound.
  SUBCASE("every 97th bit pattern, both signs") {
    ErrorStats s;
    for (uint64_t u = 0; u <= 0xFFFFFFFFu; u += 97) {
      const float x = float_from_bits(static_cast<uint32_t>(u));
      if (is_nan(x)) continue;
      s.add(x, tanh32(x), std::tanh(static_cast<double>(x)));
    }
    MESSAGE("tanh32 sparse sweep: " << s.str());
    CHECK(s.count > 1000000);
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every float in [0.5, 0.6] and [-0.6, -0.5] (the branch split at 0.55)") {
    ErrorStats s;
    every_float(0.5f, 0.6f, 1, [&](float x) { s.add(x, tanh32(x), std::tanh(double(x))); });
    every_float(-0.6f, -0.5f, 1, [&](float x) { s.add(x, tanh32(x), std::tanh(double(x))); });
    MESSAGE("tanh32 at the split: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
  SUBCASE("every 7th float in [2^-12, 0.55) (the polynomial) and in [8, 9.1] (saturation)") {
    ErrorStats s;
    every_float(0x1p-12f, 0.55f, 7, [&](float x) { s.add(x, tanh32(x), std::tanh(double(x))); });
    every_float(8.0f, 9.1f, 7, [&](float x) { s.add(x, tanh32(x), std::tanh(double(x))); });
    MESSAGE("tanh32 polynomial and saturation: " << s.str());
    CHECK(s.max_ulp <= kMaxUlp);
  }
}

TEST_CASE("tanh32 special values, odd symmetry and tiny inputs") {
  const float dn = std::numeric_limits<float>::denorm_min();
  CHECK(float_bits(tanh32(0.0f)) == 0u);
  CHECK(float_bits(tanh32(-0.0f)) == 0x80000000u);
  CHECK(tanh32(INFINITY) == 1.0f);
  CHECK(tanh32(-INFINITY) == -1.0f);
  CHECK(is_nan(tanh32(NAN)));
  CHECK(is_nan(tanh32(-NAN)));
  CHECK(tanh32(FLT_MAX) == 1.0f);
  CHECK(tanh32(-FLT_MAX) == -1.0f);
  // tanh x rounds to ±1 from |x| ≈ 9.011; exp32(2|x|) overflows at |x| > 44.36 and must still give ±1.
  CHECK(tanh32(9.1f) == 1.0f);
  CHECK(tanh32(-20.0f) == -1.0f);
  CHECK(tanh32(50.0f) == 1.0f);
  CHECK(tanh32(std::nextafter(8.5f, 0.0f)) < 1.0f);
  // |x| < 2^-12: x³/3 is below half an ulp of x, so the correctly rounded tanh x is x itself; subnormals
  // too (x·z underflows to 0 and fma(0, p, x) = x).
  every_float(-0x1p-12f, 0x1p-12f, 9973, [&](float x) { CHECK(float_bits(tanh32(x)) == float_bits(x)); });
  CHECK(tanh32(dn) == dn);
  CHECK(tanh32(-dn) == -dn);
  CHECK(tanh32(FLT_MIN) == FLT_MIN);
  // Odd: tanh32(−x) has exactly the bits of tanh32(x) with the sign flipped.
  for (uint32_t u = 0; u < 0x7F800000u; u += 4099) {
    const float x = float_from_bits(u);
    CHECK(float_bits(tanh32(-x)) == (float_bits(tanh32(x)) ^ 0x80000000u));
  }
}

TEST_CASE("tanh32 golden bits: any change to the polynomial, the split or the operation order is caught") {
  struct Golden {
    float x;
    uint32_t bits;
  };
  const Golden golden[] = {
      {0.25f, 0x3E7ACBF5u},         // polynomial
      {0.5f, 0x3EEC9A9Fu},          // polynomial, near the split
      {0.549999952f, 0x3F002217u},  // the last float of the polynomial branch
      {0.55f, 0x3F002218u},         // the first float of the exp branch
      {1.0f, 0x3F42F7D6u},         {-2.0f, 0xBF76CA83u}, {3.5f, 0x3F7F8896u},  {8.0f, 0x3F7FFFFCu},
      {0.001f, 0x3A83126Cu},       {-0.1f, 0xBDCC1EBCu}, {15.0f, 0x3F800000u},  // saturated
  };
  for (const Golden& g : golden) {
    const float got = tanh32(g.x);
    INFO("tanh32(" << g.x << ") = " << got << " [0x" << std::hex << float_bits(got) << "]");
    CHECK(ulp_distance(got, static_cast<float>(std::tanh(double(g.x)))) <= 1);
    CHECK(float_bits(got) == g.bits);
  }
}
