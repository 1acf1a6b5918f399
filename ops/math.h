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

/// Square root, correctly rounded (IEEE-754 squareRoot: std::sqrt on the host, __fsqrt_rn on the device;
/// both exact-rounded, so equal bits). sqrt32(−0) = −0, x < 0 → NaN, +inf → +inf.
TRIBUNAL_HD float sqrt32(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return std::sqrt(x);
#endif
}

/// The error function, max error 1 ulp (every 7th float of the whole line against double libm;
/// test_math.cpp). Our own fits (Chebyshev interpolation in exact rational arithmetic, coefficients rounded
/// to float), in the scheme of Sun's fdlibm s_erff.c: a polynomial near 0 and the complement through e^(−x²)
/// beyond. On a = |x|, the sign bit of x put back at the end (erf32 is exactly odd, erf32(−0) = −0):
///   NaN → NaN (x + x);
///   a < 1:      z = a·a;  p = E(z) (Horner with fma, degree 7, E(z) ≈ erf(√z)/√z − 1, |error| < 4e-11);
///               y = fma(a, p, a)   (one rounding of a·(1 + p); tiny and subnormal x stay accurate);
///   1 ≤ a < 4:  z = a·a;  lo = fma(a, a, −z)  (a² = z + lo exactly);  e = exp32(−z);
///               c = fma(−e, lo, e)  (≈ e^(−a²) = e^(−z)·(1 − lo));
///               q = a < 2 ? Q₁(a − 1.5) : Q₂(a − 3)  (degree 8 each, Q ≈ erfc(a)·e^(a²), relative error
///               < 2e-9 on [1, 2], < 4e-8 on [2, 4]; the shifts are exact by Sterbenz);
///               y = fma(−c, q, 1)   (one rounding of 1 − erfc);
///   a ≥ 4:      y = 1 (erfc(4) = 1.5e-8 is below half an ulp of 1; ±inf → ±1).
TRIBUNAL_HD float erf32(float x) {
  if (x != x) return x + x;
  const uint32_t sign = float_bits(x) & 0x80000000u;
  const float a = float_from_bits(float_bits(x) & 0x7FFFFFFFu);
  float y = 1.0f;
  if (a < 1.0f) {
    const float z = a * a;
    float p = -9.6670446510e-06f;
    p = fma32(p, z, 1.1265958892e-04f);
    p = fma32(p, z, -8.4840803174e-04f);
    p = fma32(p, z, 5.2210316062e-03f);
    p = fma32(p, z, -2.6865430176e-02f);
    p = fma32(p, z, 1.1283782125e-01f);
    p = fma32(p, z, -3.7612637877e-01f);
    p = fma32(p, z, 1.2837916613e-01f);
    y = fma32(a, p, a);
  } else if (a < 4.0f) {
    const float z = a * a;
    const float lo = fma32(a, a, -z);
    const float e = exp32(-z);
    const float c = fma32(-e, lo, e);
    float q;
    if (a < 2.0f) {
      const float s = a - 1.5f;
      q = 2.3661853629e-04f;
      q = fma32(q, s, -7.0431263885e-04f);
      q = fma32(q, s, 1.8836128293e-03f);
      q = fma32(q, s, -5.1379203796e-03f);
      q = fma32(q, s, 1.3377516530e-02f);
      q = fma32(q, s, -3.2931465656e-02f);
      q = fma32(q, s, 7.6151035726e-02f);
      q = fma32(q, s, -1.6362290084e-01f);
      q = fma32(q, s, 3.2158541679e-01f);
    } else {
      const float s = a - 3.0f;
      q = 5.8510736380e-06f;
      q = fma32(q, s, -2.4003793442e-05f);
      q = fma32(q, s, 8.3012593677e-05f);
      q = fma32(q, s, -3.2180661219e-04f);
      q = fma32(q, s, 1.2231910368e-03f);
      q = fma32(q, s, -4.4800820760e-03f);
      q = fma32(q, s, 1.5884360299e-02f);
      q = fma32(q, s, -5.4372210056e-02f);
      q = fma32(q, s, 1.7900115252e-01f);
    }
    y = fma32(-c, q, 1.0f);
  }
  return float_from_bits(float_bits(y) | sign);
}

/// The logistic function 1/(1 + e^(−x)), max error 2 ulp (every 7th float of the whole line). Two forms so
/// neither overflows nor loses the tail:
///   x ≥ 0:  y = 1/(1 + exp32(−x))          (→ exactly 1 once exp32(−x) < 2^-25; +inf → 1);
///   else:   e = exp32(x);  y = e/(1 + e)    (keeps subnormal results down to x ≈ −103.97, then +0;
///                                            −inf → +0; NaN → NaN through exp32).
/// sigmoid32(0) = 0.5 exactly.
TRIBUNAL_HD float sigmoid32(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + exp32(-x));
  const float e = exp32(x);
  return e / (1.0f + e);
}

/// sin32 and cos32 accept |x| ≤ kTrigMax: the quadrant n = nearest integer to x·(2/π) then stays below
/// 2^22, where the 1.5·2^23 rounding trick is exact and n·(π/2) splits exactly (see trig_reduce32).
/// Beyond it, and for ±inf and NaN, both return NaN: no silent loss of accuracy.
inline constexpr float kTrigMax = 4194304.0f;  // 2^22

/// Cody–Waite reduction x = n·(π/2) + r, |r| ≲ π/4, for |x| ≤ kTrigMax: n = (x·(2/π) + 1.5·2^23) − 1.5·2^23;
/// π/2 = P₁ + P₂ + P₃ (P₁ = float(π/2), P₂ = float(π/2 − P₁), P₃ = float(π/2 − P₁ − P₂), 72 bits
/// together); r = fma(−n, P₁, x) (exact: a multiple of 2^-24 below 2 in magnitude), then
/// r = fma(−n, P₂, r), r = fma(−n, P₃, r). Returns r; *quadrant = n mod 4.
TRIBUNAL_HD float trig_reduce32(float x, int* quadrant) {
  constexpr float kTwoOverPi = 0.636619746685028076171875f;
  constexpr float kRound = 12582912.0f;  // 1.5·2^23
  constexpr float kP1 = 1.57079637050628662109375f;
  constexpr float kP2 = -4.3711388286737929e-08f;
  constexpr float kP3 = -1.7151245100058819e-15f;
  const float n = (x * kTwoOverPi + kRound) - kRound;
  float r = fma32(-n, kP1, x);
  r = fma32(-n, kP2, r);
  r = fma32(-n, kP3, r);
  *quadrant = static_cast<int>(n) & 3;
  return r;
}

/// sin r on the reduced range: z = r·r; p = S(z) (Horner with fma, degree 3, ≈ (sin r − r)/r³, our
/// Chebyshev fit on z ∈ [0, (π/4)²], |error| < 3e-11); y = fma(r·z, p, r).
TRIBUNAL_HD float sin_kernel32(float r) {
  const float z = r * r;
  float p = 2.7249925552e-06f;
  p = fma32(p, z, -1.9840087043e-04f);
  p = fma32(p, z, 8.3333319053e-03f);
  p = fma32(p, z, -1.6666667163e-01f);
  return fma32(r * z, p, r);
}

/// cos r on the reduced range: z = r·r; p = C(z) (degree 3, ≈ (cos r − 1 + z/2)/z², |error| < 3e-12);
/// h = 0.5·z; w = 1 − h; y = w + (((1 − w) − h) + (z·z)·p) — the fdlibm k_cosf form, which adds back
/// the rounding error of 1 − h.
TRIBUNAL_HD float cos_kernel32(float r) {
  const float z = r * r;
  float p = -2.7300959005e-07f;
  p = fma32(p, z, 2.4800599931e-05f);
  p = fma32(p, z, -1.3888888061e-03f);
  p = fma32(p, z, 4.1666667908e-02f);
  const float h = 0.5f * z;
  const float w = 1.0f - h;
  return w + (((1.0f - w) - h) + (z * z) * p);
}

/// sin x, max error 1 ulp for |x| ≤ 4096 (every float), 3 ulp up to kTrigMax (every 7th); NaN beyond, for
/// ±inf and for NaN. r = trig_reduce32(x, &q); quadrant 0: sin_kernel32(r), 1: cos_kernel32(r),
/// 2: −sin_kernel32(r), 3: −cos_kernel32(r). sin32(±0) = ±0 (returned as is).
TRIBUNAL_HD float sin32(float x) {
  if (!(x <= kTrigMax && x >= -kTrigMax)) return NAN;
  if (x == 0.0f) return x;  // the reduction's fma chain would turn −0 into +0
  int q = 0;
  const float r = trig_reduce32(x, &q);
  const float y = (q & 1) ? cos_kernel32(r) : sin_kernel32(r);
  return (q & 2) ? -y : y;
}

/// cos x, max error 1 ulp for |x| ≤ 4096, 3 ulp up to kTrigMax; NaN beyond, for ±inf and NaN. r =
/// trig_reduce32(x, &q); quadrant 0: cos_kernel32(r), 1: −sin_kernel32(r), 2: −cos_kernel32(r), 3:
/// sin_kernel32(r).
TRIBUNAL_HD float cos32(float x) {
  if (!(x <= kTrigMax && x >= -kTrigMax)) return NAN;
  int q = 0;
  const float r = trig_reduce32(x, &q);
  const float y = (q & 1) ? sin_kernel32(r) : cos_kernel32(r);
  return ((q + 1) & 2) ? -y : y;
}

/// x^k for an integer 1 ≤ k ≤ 64 by left-to-right binary exponentiation: y = x; for each bit of k below
/// its highest, from high to low: y = y·y, then y = y·x if the bit is set. So x² = x·x, x³ = (x·x)·x,
/// x⁴ = (x·x)·(x·x), x⁵ = ((x·x)·(x·x))·x.
TRIBUNAL_HD float powi32(float x, int k) {
  int top = 6;
  while (top > 0 && !((k >> top) & 1)) --top;
  float y = x;
  for (int b = top - 1; b >= 0; --b) {
    y = y * y;
    if ((k >> b) & 1) y = y * x;
  }
  return y;
}

/// x^p for finite p (docs/numerics.md "Elementwise functions"), by this rule in order:
///   p = 0:                        1 (NaN x included, as C and torch);
///   p an integer, |p| ≤ 64:       r = powi32(x, |p|); y = p > 0 ? r : 1/r (exact products in a fixed
///                                 order: signs, zeros, infinities and NaN as the products give them);
///   p = 0.5:                      x = ±0 → +0, else sqrt32(x) (x < 0 → NaN);
///   x < 0 and p an integer:       m = exp32(p·log32(−x)); y = p odd ? −m : m (|p| ≥ 2^24 is even);
///   otherwise:                    exp32(p·log32(x)) — x > 0 as expected; ±0 → +0 for p > 0, +inf for
///                                 p < 0; +inf → +inf for p > 0, +0 for p < 0; x < 0 (−inf included) and
///                                 NaN → NaN.
/// The exp–log path's relative error is about |p·ln x|·2^-23 (log32's absolute error and the rounding of
/// p·log32(x), both scaled by the exponent): measured at most 31 ulp for p ∈ {1.5, −0.5, 0.25, 3.7, −1.3,
/// 2.5} on x ∈ [10^-3, 10^3], 3 ulp for p = −0.5 (tests/ops/test_math.cpp). The integer and 0.5 paths,
/// which exported graphs use (Pow(x, 2), Pow(x, 3), Pow(x, 0.5)), are exact products and one sqrt.
TRIBUNAL_HD float pow32(float x, float p) {
  if (p == 0.0f) return 1.0f;
  const float ap = float_from_bits(float_bits(p) & 0x7FFFFFFFu);
  const bool small_int = ap <= 64.0f && static_cast<float>(static_cast<int>(ap)) == ap;
  if (small_int) {
    const float r = powi32(x, static_cast<int>(ap));
    return p > 0.0f ? r : 1.0f / r;
  }
  if (p == 0.5f) return x == 0.0f ? 0.0f : sqrt32(x);
  if (x < 0.0f && ap < INFINITY) {
    const bool integer = ap >= 8388608.0f || static_cast<float>(static_cast<int>(ap)) == ap;
    if (integer) {
      const bool odd = ap < 16777216.0f && (static_cast<int>(ap) & 1);
      const float m = exp32(p * log32(-x));
      return odd ? -m : m;
    }
  }
  return exp32(p * log32(x));
}

}  // namespace tribunal
