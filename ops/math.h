// Portable float32 math for RepOps (docs/numerics.md "Math functions").
// Every function here is an exact sequence of correctly rounded IEEE-754 binary32 operations
// (+ − × ÷, fma, bit manipulation), so it returns the same bits on every compiler, CPU and GPU.
// Never replace these by libm or CUDA intrinsics: those differ between vendors and versions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/portable.h"

namespace tribunal {

// In CUDA device code (__CUDA_ARCH__) the bit casts and the fma use the device's own exact
// operations; host code (g++, clang, nvcc's host pass) is unchanged.

TRIBUNAL_HD uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
#endif
}

TRIBUNAL_HD float float_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
#endif
}

/// Correctly rounded fused multiply-add, the only contraction RepOps allows (written explicitly).
/// On the device: __fmaf_rn, the IEEE fusedMultiplyAdd (fma.rn.f32), one rounding like std::fma.
TRIBUNAL_HD float fma32(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// 2^n as a float for n in [-126, 127] (exact, built from the exponent bits).
TRIBUNAL_HD float pow2i(int n) {
  return float_from_bits(static_cast<uint32_t>(n + 127) << 23);
}

/// e^x, max error about 1 ulp. Cody–Waite range reduction x = n·ln2 + r, |r| ≤ ln2/2, then the
/// degree-7 Taylor polynomial of e^r in Horner form with fma, then scaling by 2^n (split in two
/// exact-exponent multiplies when n is outside the normal exponent range).
/// Special values: NaN → NaN (quiet), x > 88.7228 → +inf, x < -103.98 → +0.
TRIBUNAL_HD float exp32(float x) {
  if (x != x) return x + x;
  if (x > 88.72283935546875f) return INFINITY;
  if (x < -103.97820281982421875f) return 0.0f;
  constexpr float kLog2e = 1.44269502162933349609375f;
  constexpr float kLn2Hi = 0.693145751953125f;         // 0x3F317200: few mantissa bits, n·hi exact
  constexpr float kLn2Lo = 1.428606765330187045e-06f;  // ln2 − kLn2Hi
  constexpr float kRound = 12582912.0f;                // 1.5·2^23: adding it rounds to an integer
  const float n = (x * kLog2e + kRound) - kRound;      // nearest integer to x·log2(e)
  float r = fma32(-n, kLn2Hi, x);
  r = fma32(-n, kLn2Lo, r);
  float p = 1.9841270113e-04f;         // 1/5040
  p = fma32(p, r, 1.3888889225e-03f);  // 1/720
  p = fma32(p, r, 8.3333337680e-03f);  // 1/120
  p = fma32(p, r, 4.1666667908e-02f);  // 1/24
  p = fma32(p, r, 1.6666667163e-01f);  // 1/6
  p = fma32(p, r, 0.5f);
  p = fma32(p, r, 1.0f);
  p = fma32(p, r, 1.0f);
  const int k = static_cast<int>(n);
  if (k > 127) return p * pow2i(127) * pow2i(k - 127);
  if (k < -126) return p * pow2i(-126) * pow2i(k + 126);
  return p * pow2i(k);
}

/// Natural logarithm, max error about 1 ulp. x = 2^e·m with m ∈ [√2/2, √2), f = m − 1,
/// log(1+f) = f − (f²/2 − s·(f²/2 + R(s²))) with s = f/(2+f) and the fdlibm e_logf minimax R
/// (Sun Microsystems fdlibm, e_logf.c), then e·ln2 added in two parts.
/// Special values: NaN → NaN, x < 0 → NaN, ±0 → −inf, +inf → +inf. Subnormals handled.
TRIBUNAL_HD float log32(float x) {
  if (x != x) return x + x;
  if (x < 0.0f) return NAN;
  if (x == 0.0f) return -INFINITY;
  if (x == INFINITY) return x;
  int e = 0;
  uint32_t bits = float_bits(x);
  if (bits < 0x00800000u) {             // subnormal: scale into the normal range first (exact)
    bits = float_bits(x * 8388608.0f);  // 2^23
    e = -23;
  }
  e += static_cast<int>(bits >> 23) - 127;
  float m = float_from_bits((bits & 0x007FFFFFu) | 0x3F800000u);  // [1, 2)
  if (m > 1.41421353816986083984375f) {                           // √2 rounded down
    m = m * 0.5f;
    e += 1;
  }
  const float f = m - 1.0f;  // exact (Sterbenz)
  const float s = f / (2.0f + f);
  const float z = s * s;
  const float w = z * z;
  const float t1 = w * fma32(w, fma32(w, 1.5313838422e-01f, 2.2222198546e-01f), 4.0000000596e-01f);
  const float t2 = z * fma32(w, fma32(w, fma32(w, 1.4798198640e-01f, 1.8183572590e-01f), 2.8571429849e-01f),
                             6.6666668653e-01f);
  const float r = t2 + t1;
  const float hfsq = 0.5f * f * f;
  const float fe = static_cast<float>(e);
  constexpr float kLn2Hi = 6.9313812256e-01f;  // 0x3F317180
  constexpr float kLn2Lo = 9.0580006145e-06f;  // 0x3717F7D1
  return fe * kLn2Hi - ((hfsq - (s * (hfsq + r) + fe * kLn2Lo)) - f);
}

/// Hyperbolic tangent, max error 2 ulp (an exhaustive sweep). An exact float sequence, like exp32
/// (docs/numerics.md "Math functions"), on a = |x| with the sign of x put back by its bit at the end:
///   NaN → NaN (quiet, x + x);
///   a < 0.55:  z = a·a;  p = c5;  p = fma(p, z, c4) … fma(p, z, c0);  y = fma(a·z, p, a)
///              (p(z) ≈ (tanh a − a)/a³, a Chebyshev fit of degree 5 on z ∈ [0, 0.3025]; writing the result
///              as a + a³·p keeps tiny and subnormal x exact: tanh32(x) = x there);
///   otherwise: y = 1 − 2/(exp32(a + a) + 1);
///   result:    y with the sign bit of x (so tanh32 is exactly odd and tanh32(−0) = −0).
/// The split is at 0.55 because tanh(0.55) > 0.5: the subtraction 1 − q then has q ≤ 0.5 and loses
/// nothing, while below it the polynomial avoids that cancellation. Saturates to exactly ±1 for
/// |x| ≥ 9.01 (exp32 overflowing to +inf for |x| > 44.36 gives 2/inf = 0, still ±1); ±inf → ±1.
TRIBUNAL_HD float tanh32(float x) {
  if (x != x) return x + x;
  const uint32_t sign = float_bits(x) & 0x80000000u;
  const float a = float_from_bits(float_bits(x) & 0x7FFFFFFFu);
  if (a < 0.55f) {
    const float z = a * a;
    float p = 2.5263911990e-03f;
    p = fma32(p, z, -8.5263334938e-03f);
    p = fma32(p, z, 2.1818449274e-02f);
    p = fma32(p, z, -5.3964700467e-02f);
    p = fma32(p, z, 1.3333324200e-01f);
    p = fma32(p, z, -3.3333333295e-01f);
    return float_from_bits(float_bits(fma32(a * z, p, a)) | sign);
  }
  const float e = exp32(a + a);
  const float y = 1.0f - 2.0f / (e + 1.0f);
  return float_from_bits(float_bits(y) | sign);
}

}  // namespace tribunal
