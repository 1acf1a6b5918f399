// erf32, sigmoid32, sin32, cos32 and pow32 (ops/math.h), the functions of exported graphs: accuracy
// against double-precision libm (the oracle only: the functions themselves never call it) over dense
// sweeps, the special values their comments state, pow32's rule, and golden bit patterns that pin the
// contract (any change to a polynomial, a split or an operation order changes trajectories).
#include <doctest/doctest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>

#include "ops/math.h"

using namespace tribunal;

namespace {

int64_t ordered(float x) {
  const uint32_t u = float_bits(x);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7FFFFFFFu) : static_cast<int64_t>(u);
}

float from_ordered(int64_t o) {
  return float_from_bits(o < 0 ? (static_cast<uint32_t>(-o) | 0x80000000u) : static_cast<uint32_t>(o));
}

/// The largest ulp distance of f from the double oracle g (rounded to float) over every `step`-th float
/// of [a, b]; a NaN on one side only counts as 2^30 ulp.
template <class F, class G>
int64_t max_ulp(float a, float b, int64_t step, F f, G g, float* worst = nullptr) {
  int64_t m = 0;
  for (int64_t o = ordered(a); o <= ordered(b); o += step) {
    const float x = from_ordered(o);
    const float got = f(x), want = static_cast<float>(g(static_cast<double>(x)));
    int64_t d;
    if (std::isnan(got) || std::isnan(want))
      d = std::isnan(got) && std::isnan(want) ? 0 : int64_t{1} << 30;
    else
      d = std::llabs(ordered(got) - ordered(want));
    if (d > m) {
      m = d;
      if (worst) *worst = x;
    }
  }
  return m;
}

float pow_1_5(float x) {
  return pow32(x, 1.5f);
}
float pow_m0_5(float x) {
  return pow32(x, -0.5f);
}

double sigmoid64(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

}  // namespace

// The bounds asserted are those ops/math.h states, measured there on denser sweeps (every 7th float of
// the line; every float for sin and cos on |x| ≤ 4096). The names carry "within 2 ulp" so the cross and
// sanitizer builds skip them with exp32's sweeps (tests/CMakeLists.txt).
TEST_CASE("erf32 within 2 ulp (1 measured) and sigmoid32 within 2 ulp, every 97th float of the line") {
  float w = 0;
  const int64_t erf_ulp = max_ulp(
      -INFINITY, INFINITY, 97, erf32, [](double x) { return std::erf(x); }, &w);
  MESSAGE("erf32: max " << erf_ulp << " ulp at " << w);
  CHECK(erf_ulp <= 1);
  // Near 0 (every 4099th float: the ±2·10^9 floats of |x| < 0.01 are mostly tiny), around the splits at 1,
  // 2 and 4 every float.
  CHECK(max_ulp(-0.01f, 0.01f, 4099, erf32, [](double x) { return std::erf(x); }) <= 1);
  for (float s : {1.0f, 2.0f, 4.0f})
    CHECK(max_ulp(s - 0.001f, s + 0.001f, 1, erf32, [](double x) { return std::erf(x); }) <= 1);
  const int64_t sig_ulp = max_ulp(-INFINITY, INFINITY, 97, sigmoid32, sigmoid64, &w);
  MESSAGE("sigmoid32: max " << sig_ulp << " ulp at " << w);
  CHECK(sig_ulp <= 2);
  // The subnormal tail of x < 0 and the saturation of x > 0, every float.
  CHECK(max_ulp(-103.9f, -87.0f, 1, sigmoid32, sigmoid64) <= 2);
  CHECK(max_ulp(15.0f, 18.0f, 1, sigmoid32, sigmoid64) <= 2);
}

TEST_CASE("sin32 and cos32 within 2 ulp (1 measured) on |x| ≤ 4096, 3 ulp up to kTrigMax") {
  auto sin64 = [](double x) { return std::sin(x); };
  auto cos64 = [](double x) { return std::cos(x); };
  float w = 0;
  const int64_t s1 = max_ulp(-4096.0f, 4096.0f, 61, sin32, sin64, &w);
  MESSAGE("sin32 |x| ≤ 4096: max " << s1 << " ulp at " << w);
  const int64_t c1 = max_ulp(-4096.0f, 4096.0f, 61, cos32, cos64, &w);
  MESSAGE("cos32 |x| ≤ 4096: max " << c1 << " ulp at " << w);
  CHECK(s1 <= 1);
  CHECK(c1 <= 1);
  // Every float around the quadrant boundaries π/4, 3π/4 and a zero of each (π, π/2).
  for (float c : {0.785398163f, 2.35619449f, 3.14159265f, 1.57079633f}) {
    CHECK(max_ulp(c - 0.002f, c + 0.002f, 1, sin32, sin64) <= 1);
    CHECK(max_ulp(c - 0.002f, c + 0.002f, 1, cos32, cos64) <= 1);
  }
  const int64_t s2 = max_ulp(4096.0f, kTrigMax, 61, sin32, sin64, &w);
  MESSAGE("sin32 up to 2^22: max " << s2 << " ulp at " << w);
  const int64_t c2 = max_ulp(-kTrigMax, -4096.0f, 61, cos32, cos64, &w);
  MESSAGE("cos32 down to -2^22: max " << c2 << " ulp at " << w);
  CHECK(s2 <= 3);
  CHECK(c2 <= 3);
}

TEST_CASE("pow32 within 2 ulp on its sqrt path; the exp–log path within its stated 31 ulp") {
  for (float p : {1.5f, -0.5f, 0.25f, 3.7f, -1.3f, 2.5f}) {
    CAPTURE(p);
    float w = 0;
    const int64_t u = max_ulp(
        1e-3f, 1e3f, 113, [p](float x) { return pow32(x, p); },
        [p](double x) { return std::pow(x, static_cast<double>(p)); }, &w);
    MESSAGE("pow32(x, " << p << ") on [1e-3, 1e3]: max " << u << " ulp at " << w);
    CHECK(u <= (p == -0.5f ? 3 : 31));
  }
  // p = 0.5 is the correctly rounded sqrt: 0 ulp.
  CHECK(max_ulp(
            0.0f, FLT_MAX, 997, [](float x) { return pow32(x, 0.5f); },
            [](double x) { return std::sqrt(x); }) == 0);
}

TEST_CASE("erf32 special values and exact points") {
  CHECK(std::isnan(erf32(NAN)));
  CHECK(float_bits(erf32(0.0f)) == float_bits(0.0f));
  CHECK(float_bits(erf32(-0.0f)) == float_bits(-0.0f));
  CHECK(erf32(INFINITY) == 1.0f);
  CHECK(erf32(-INFINITY) == -1.0f);
  CHECK(erf32(4.0f) == 1.0f);
  CHECK(erf32(3.9f) < 1.0f);  // erfc(3.9) = 3.5e-8 is above half an ulp of 1
  CHECK(erf32(FLT_MAX) == 1.0f);
  for (float x : {0.3f, 1.7f, 3.1f, 1e-20f})
    CHECK(float_bits(erf32(-x)) == (float_bits(erf32(x)) ^ 0x80000000u));
  // Tiny x: erf(x) = (2/√π)·x to float precision; the smallest subnormal maps to itself (1.128·2^-149
  // rounds to 2^-149).
  const float d = std::numeric_limits<float>::denorm_min();
  CHECK(erf32(d) == d);
  CHECK(erf32(1e-30f) == static_cast<float>(1e-30 * 1.1283791670955126));
}

TEST_CASE("sigmoid32 special values and exact points") {
  CHECK(sigmoid32(0.0f) == 0.5f);
  CHECK(sigmoid32(-0.0f) == 0.5f);
  CHECK(sigmoid32(INFINITY) == 1.0f);
  CHECK(float_bits(sigmoid32(-INFINITY)) == 0u);
  CHECK(std::isnan(sigmoid32(NAN)));
  CHECK(sigmoid32(20.0f) == 1.0f);              // e^-20 < 2^-25: 1 + e rounds to 1
  CHECK(sigmoid32(-100.0f) > 0.0f);             // subnormal, not flushed
  CHECK(sigmoid32(-100.0f) == exp32(-100.0f));  // e/(1 + e) with 1 + e = 1
  CHECK(float_bits(sigmoid32(-104.0f)) == 0u);  // below exp32's underflow threshold
}

TEST_CASE("sin32 and cos32 special values, symmetry and the range limit") {
  CHECK(float_bits(sin32(0.0f)) == float_bits(0.0f));
  CHECK(float_bits(sin32(-0.0f)) == float_bits(-0.0f));
  CHECK(cos32(0.0f) == 1.0f);
  CHECK(cos32(-0.0f) == 1.0f);
  for (float x : {NAN, INFINITY, -INFINITY, std::nextafter(kTrigMax, INFINITY), -1e10f, FLT_MAX}) {
    CAPTURE(x);
    CHECK(std::isnan(sin32(x)));
    CHECK(std::isnan(cos32(x)));
  }
  CHECK(!std::isnan(sin32(kTrigMax)));
  CHECK(!std::isnan(cos32(-kTrigMax)));
  const float d = std::numeric_limits<float>::denorm_min();
  CHECK(sin32(d) == d);
  CHECK(sin32(1e-20f) == 1e-20f);
  for (float x : {0.5f, 2.0f, 100.0f, 12345.678f}) {
    CHECK(float_bits(sin32(-x)) == (float_bits(sin32(x)) ^ 0x80000000u));
    CHECK(float_bits(cos32(-x)) == float_bits(cos32(x)));
  }
}

TEST_CASE("pow32's rule: exact products in the stated order, sqrt at 0.5, exp–log elsewhere") {
  const float xs[] = {0.7f, -1.3f, 3.0f, -0.0f, 0.0f, 1e-20f, 1e20f, INFINITY, -INFINITY};
  for (float x : xs) {
    CAPTURE(x);
    CHECK(pow32(x, 0.0f) == 1.0f);
    CHECK(float_bits(pow32(x, 1.0f)) == float_bits(x));
    CHECK(float_bits(pow32(x, 2.0f)) == float_bits(x * x));
    CHECK(float_bits(pow32(x, 3.0f)) == float_bits((x * x) * x));
    CHECK(float_bits(pow32(x, 4.0f)) == float_bits((x * x) * (x * x)));
    CHECK(float_bits(pow32(x, 5.0f)) == float_bits(((x * x) * (x * x)) * x));
    CHECK(float_bits(pow32(x, 6.0f)) == float_bits(((x * x) * x) * ((x * x) * x)));
    CHECK(float_bits(pow32(x, -1.0f)) == float_bits(1.0f / x));
    CHECK(float_bits(pow32(x, -2.0f)) == float_bits(1.0f / (x * x)));
  }
  CHECK(std::isnan(pow32(NAN, 2.0f)));
  CHECK(pow32(NAN, 0.0f) == 1.0f);
  // x^64: six squarings.
  float y = 1.0001f;
  for (int i = 0; i < 6; ++i) y = y * y;
  CHECK(float_bits(pow32(1.0001f, 64.0f)) == float_bits(y));
  // p = 0.5: sqrt, with ±0 → +0 and x < 0 → NaN.
  CHECK(float_bits(pow32(2.0f, 0.5f)) == float_bits(std::sqrt(2.0f)));
  CHECK(float_bits(pow32(-0.0f, 0.5f)) == 0u);
  CHECK(std::isnan(pow32(-4.0f, 0.5f)));
  CHECK(pow32(INFINITY, 0.5f) == INFINITY);
  // Other p: exp32(p·log32(x)).
  CHECK(float_bits(pow32(2.0f, 1.5f)) == float_bits(exp32(1.5f * log32(2.0f))));
  CHECK(float_bits(pow32(0.0f, 1.5f)) == 0u);
  CHECK(float_bits(pow32(-0.0f, 1.5f)) == 0u);
  CHECK(pow32(0.0f, -1.5f) == INFINITY);
  CHECK(pow32(INFINITY, 1.5f) == INFINITY);
  CHECK(float_bits(pow32(INFINITY, -1.5f)) == 0u);
  CHECK(std::isnan(pow32(-2.0f, 1.5f)));
  CHECK(std::isnan(pow32(-INFINITY, 1.5f)));
  CHECK(std::isnan(pow32(NAN, 1.5f)));
  CHECK(pow32(1.0f, 1.5f) == 1.0f);
  // Integers beyond 64 with x < 0: the sign of an odd power.
  CHECK(pow32(-1.0f, 65.0f) == -1.0f);
  CHECK(pow32(-1.0f, 66.0f) == 1.0f);
  CHECK(float_bits(pow32(-2.0f, 65.0f)) == (float_bits(pow32(2.0f, 65.0f)) ^ 0x80000000u));
  CHECK(pow32(-2.0f, 1e10f) == INFINITY);  // |p| ≥ 2^24 is even
}

TEST_CASE("erf32, sigmoid32, sin32, cos32, pow32 golden bits: any change to the contract is caught") {
  struct Golden {
    float (*f)(float);
    float x;
    uint32_t bits;
  };
  static const Golden kGolden[] = {
      {erf32, 0.100000001f, 0x3DE652F5u},   {erf32, -0.75f, 0xBF360E4Cu},
      {erf32, 1.29999995f, 0x3F6F1B25u},    {erf32, 2.5f, 0x3F7FE554u},
      {erf32, 3.70000005f, 0x3F7FFFFDu},    {erf32, -7.25f, 0xBF800000u},
      {erf32, 100.5f, 0x3F800000u},         {sigmoid32, 0.100000001f, 0x3F066509u},
      {sigmoid32, -0.75f, 0x3EA442B0u},     {sigmoid32, 1.29999995f, 0x3F492C7Cu},
      {sigmoid32, 2.5f, 0x3F6C948Fu},       {sigmoid32, 3.70000005f, 0x3F79D2D0u},
      {sigmoid32, -7.25f, 0x3A3A092Du},     {sigmoid32, 100.5f, 0x3F800000u},
      {sin32, 0.100000001f, 0x3DCC7577u},   {sin32, -0.75f, 0xBF2E7FE1u},
      {sin32, 1.29999995f, 0x3F76ABC0u},    {sin32, 2.5f, 0x3F193579u},
      {sin32, 3.70000005f, 0xBF07A358u},    {sin32, -7.25f, 0xBF52B56Eu},
      {sin32, 100.5f, 0xBCFD9FC2u},         {cos32, 0.100000001f, 0x3F7EB898u},
      {cos32, -0.75f, 0x3F3B4FF6u},         {cos32, 1.29999995f, 0x3E88F59Du},
      {cos32, 2.5f, 0xBF4D17BFu},           {cos32, 3.70000005f, 0xBF591D15u},
      {cos32, -7.25f, 0x3F11637Au},         {cos32, 100.5f, 0x3F7FE095u},
      {pow_1_5, 0.100000001f, 0x3D0186E2u}, {pow_1_5, -0.75f, 0x7FC00000u},
      {pow_1_5, 1.29999995f, 0x3FBDB9A6u},  {pow_1_5, 2.5f, 0x407CFB73u},
      {pow_1_5, 3.70000005f, 0x40E3BF37u},  {pow_1_5, -7.25f, 0x7FC00000u},
      {pow_1_5, 100.5f, 0x447BE09Fu},       {pow_m0_5, 0.100000001f, 0x404A62C2u},
      {pow_m0_5, -0.75f, 0x7FC00000u},      {pow_m0_5, 1.29999995f, 0x3F6086E0u},
      {pow_m0_5, 2.5f, 0x3F21E89Bu},        {pow_m0_5, 3.70000005f, 0x3F05168Bu},
      {pow_m0_5, -7.25f, 0x7FC00000u},      {pow_m0_5, 100.5f, 0x3DCC4A36u},
  };
  for (const Golden& g : kGolden) {
    CAPTURE(g.x);
    CHECK(float_bits(g.f(g.x)) == g.bits);
  }
}
