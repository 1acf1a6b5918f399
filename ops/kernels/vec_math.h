// SIMD building blocks of the vector kernels (activation.cpp, layer_norm.cpp, softmax.cpp, loss.cpp,
// linear.cpp's sum_rows, dropout.cpp): lane-wise exp32/tanh32 and the canonical 32-lane reduction, for
// AVX-512F (namespace vec512) and AVX2+FMA (namespace vec256) in x86-64 builds and AArch64 Advanced
// SIMD (namespace vecneon) in aarch64 builds. Every namespace offers the same names, so a kernel body is
// written once and stamped per ISA (TRIBUNAL_SIMD_KERNELS below) and dispatched by one switch
// (TRIBUNAL_SIMD_CASES below).
//
// Why the results are bitwise identical to ops/math.h and ops/reduce.h (docs/numerics.md):
//  * every lane performs exactly the scalar operation sequence: the same IEEE operations (vaddps,
//    vmulps, vdivps, vfmadd and NEON's fadd, fmul, fdiv, fmla are correctly rounded like their scalar
//    forms; AArch64 Advanced SIMD honours the FPCR like scalar code, and FZ is off), the same constants,
//    the same order; an fma only where the scalar code calls fma32; branches of the scalar code become
//    "compute every branch, select per lane", and selecting never rounds;
//  * the canonical sum keeps its 32 lanes as 2 (AVX-512), 4 (AVX2) or 8 (NEON) registers: element i
//    of a row lands in lane i mod 32, and fold() is the fixed tree w = 16, 8, 4, 2, 1 of reduce.h;
//  * padding lanes of a partial chunk add nothing: a lane starts at +0 and can never become −0 (in
//    round-to-nearest x + y is −0 only if both are −0), so adding +0 to it is the identity — and the
//    AVX-512 form does not even add there (masked add);
//  * subnormals are kept: the process never sets FTZ/DAZ (x86 MXCSR, AArch64 FPCR.FZ), and no
//    operation here depends on them.
// Each architecture compiles only its own namespaces; the scalar paths never include intrinsics.
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12 reports its own intrinsics' _mm512_undefined_*() placeholders (e.g. in _mm512_cvtps_epi32) as
// "(maybe) uninitialized" once they are inlined here; the value is never read. Silenced for the kernels
// that include this header, nothing else.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace tribunal {

/// The constants of exp32 and tanh32 (ops/math.h), shared so the vector forms cannot drift.
namespace vec_const {
inline constexpr float kExpHi = 88.72283935546875f, kExpLo = -103.97820281982421875f;
inline constexpr float kLog2e = 1.44269502162933349609375f, kLn2Hi = 0.693145751953125f,
                       kLn2Lo = 1.428606765330187045e-06f, kRound = 12582912.0f;
inline constexpr float kExpP[8] = {1.9841270113e-04f,
                                   1.3888889225e-03f,
                                   8.3333337680e-03f,
                                   4.1666667908e-02f,
                                   1.6666667163e-01f,
                                   0.5f,
                                   1.0f,
                                   1.0f};
inline constexpr float kTanhSplit = 0.55f;
inline constexpr float kTanhP[6] = {2.5263911990e-03f,  -8.5263334938e-03f, 2.1818449274e-02f,
                                    -5.3964700467e-02f, 1.3333324200e-01f,  -3.3333333295e-01f};
}  // namespace vec_const

#if defined(__x86_64__)
#define TRIBUNAL_TARGET_AVX512 __attribute__((target("avx512f")))
#define TRIBUNAL_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TRIBUNAL_V512 __attribute__((target("avx512f"), always_inline)) inline
#define TRIBUNAL_V256 __attribute__((target("avx2,fma"), always_inline)) inline

// ---------------------------------------------------------------------------------------------------
/// AVX-512F: 16 floats per vector; the 32 reduction lanes are two vectors.
namespace vec512 {

using vf = __m512;
inline constexpr int W = 16;

TRIBUNAL_V512 vf set1(float a) {
  return _mm512_set1_ps(a);
}
TRIBUNAL_V512 vf zero() {
  return _mm512_setzero_ps();
}
TRIBUNAL_V512 vf load(const float* p) {
  return _mm512_loadu_ps(p);
}
TRIBUNAL_V512 void store(float* p, vf v) {
  _mm512_storeu_ps(p, v);
}
TRIBUNAL_V512 __mmask16 first(int n) {
  return n >= W ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1u);
}
/// The first n (1..W) floats at p, +0 in the other lanes; memory past p[n−1] is not touched.
TRIBUNAL_V512 vf loadn(const float* p, int n) {
  return _mm512_maskz_loadu_ps(first(n), p);
}
/// Stores the first n (1..W) lanes of v.
TRIBUNAL_V512 void storen(float* p, vf v, int n) {
  _mm512_mask_storeu_ps(p, first(n), v);
}
TRIBUNAL_V512 vf add(vf a, vf b) {
  return _mm512_add_ps(a, b);
}
TRIBUNAL_V512 vf sub(vf a, vf b) {
  return _mm512_sub_ps(a, b);
}
TRIBUNAL_V512 vf mul(vf a, vf b) {
  return _mm512_mul_ps(a, b);
}
TRIBUNAL_V512 vf div(vf a, vf b) {
  return _mm512_div_ps(a, b);
}
/// Lane-wise square root, correctly rounded like std::sqrt (IEEE 754 squareRoot).
TRIBUNAL_V512 vf sqrt(vf a) {
  return _mm512_sqrt_ps(a);
}
/// −a (flips the sign bit, exact, like the scalar unary minus).
TRIBUNAL_V512 vf neg(vf a) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
}
/// fma32 lane-wise (one rounding).
TRIBUNAL_V512 vf fma(vf a, vf b, vf c) {
  return _mm512_fmadd_ps(a, b, c);
}
/// Lane-wise `a > b ? a : b` (vmaxps returns its second operand for NaN and for equal operands).
TRIBUNAL_V512 vf max(vf a, vf b) {
  return _mm512_max_ps(a, b);
}
/// Maximum of the first n (1..W) lanes of v folded into m: lanes past n keep m.
TRIBUNAL_V512 vf max_n(vf v, vf m, int n) {
  return _mm512_mask_max_ps(m, first(n), v, m);
}
/// Horizontal maximum of the lanes (exact, any order, when no lane is NaN).
TRIBUNAL_V512 float hmax(vf v) {
  return _mm512_reduce_max_ps(v);
}

using mask = __mmask16;  ///< one bit per lane
TRIBUNAL_V512 mask gt(vf a, vf b) {
  return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ);
}
TRIBUNAL_V512 mask lt(vf a, vf b) {
  return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ);
}
TRIBUNAL_V512 mask is_nan(vf x) {
  return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
}
/// Lane-wise `m ? a : b` (a blend: exact).
TRIBUNAL_V512 vf select(mask m, vf a, vf b) {
  return _mm512_mask_blend_ps(m, b, a);
}
/// |x|: the sign bit cleared (exact).
TRIBUNAL_V512 vf abs(vf x) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MAX)));
}
/// y with x's sign bit OR-ed in.
TRIBUNAL_V512 vf or_sign(vf y, vf x) {
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign));
}
/// p·2^n for an integral n: 2^n split as 2^k1 · 2^k2 with k1 = clamp(n, −126, 127), so for n in range
/// k2 = 0 and the second multiply is by 1 (exact): exp32's three-way scaling without a branch. Lanes
/// with n far out of range (huge |x|, NaN) give anything; exp selects them away.
TRIBUNAL_V512 vf scale_pow2(vf p, vf n) {
  const __m512i k = _mm512_cvtps_epi32(n);  // n is an integer: any rounding mode gives it exactly
  const __m512i k1 = _mm512_min_epi32(_mm512_max_epi32(k, _mm512_set1_epi32(-126)), _mm512_set1_epi32(127));
  const __m512i k2 = _mm512_sub_epi32(k, k1);
  const __m512i bias = _mm512_set1_epi32(127);
  const vf s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
  const vf s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
  return mul(mul(p, s1), s2);
}
#define TRIBUNAL_VEC_FN TRIBUNAL_V512
#include "ops/kernels/vec_exp_tanh.inc"
#undef TRIBUNAL_VEC_FN

/// The 32 lanes of one canonical sum (ops/reduce.h): part p ∈ {0, 1} holds lanes 16p … 16p+15.
struct Acc32 {
  static constexpr int kParts = 2;
  vf part[kParts];
};
TRIBUNAL_V512 Acc32 acc_zero() {
  return {{zero(), zero()}};
}
/// Adds v to lanes 16p … 16p + n − 1 (n = 1..W); the other lanes are untouched.
TRIBUNAL_V512 void acc_add(Acc32& acc, int p, vf v, int n) {
  acc.part[p] = n >= W ? add(acc.part[p], v) : _mm512_mask_add_ps(acc.part[p], first(n), acc.part[p], v);
}
/// The fixed tree: w = 16 (part 0 + part 1), 8, 4, 2, 1; returns lane 0.
TRIBUNAL_V512 float acc_fold(const Acc32& acc) {
  const vf s16 = add(acc.part[0], acc.part[1]);
  const __m256 lo8 = _mm512_castps512_ps256(s16);
  const __m256 hi8 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s16), 1));
  const __m256 s8 = _mm256_add_ps(lo8, hi8);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

}  // namespace vec512

// ---------------------------------------------------------------------------------------------------
/// AVX2 + FMA: 8 floats per vector; the 32 reduction lanes are four vectors.
namespace vec256 {

using vf = __m256;
inline constexpr int W = 8;

TRIBUNAL_V256 vf set1(float a) {
  return _mm256_set1_ps(a);
}
TRIBUNAL_V256 vf zero() {
  return _mm256_setzero_ps();
}
TRIBUNAL_V256 vf load(const float* p) {
  return _mm256_loadu_ps(p);
}
TRIBUNAL_V256 void store(float* p, vf v) {
  _mm256_storeu_ps(p, v);
}
TRIBUNAL_V256 __m256i first(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
TRIBUNAL_V256 vf loadn(const float* p, int n) {
  return _mm256_maskload_ps(p, first(n));
}
TRIBUNAL_V256 void storen(float* p, vf v, int n) {
  _mm256_maskstore_ps(p, first(n), v);
}
TRIBUNAL_V256 vf add(vf a, vf b) {
  return _mm256_add_ps(a, b);
}
TRIBUNAL_V256 vf sub(vf a, vf b) {
  return _mm256_sub_ps(a, b);
}
TRIBUNAL_V256 vf mul(vf a, vf b) {
  return _mm256_mul_ps(a, b);
}
TRIBUNAL_V256 vf div(vf a, vf b) {
  return _mm256_div_ps(a, b);
}
TRIBUNAL_V256 vf sqrt(vf a) {
  return _mm256_sqrt_ps(a);
}
TRIBUNAL_V256 vf neg(vf a) {
  return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f));
}
TRIBUNAL_V256 vf fma(vf a, vf b, vf c) {
  return _mm256_fmadd_ps(a, b, c);
}
TRIBUNAL_V256 vf max(vf a, vf b) {
  return _mm256_max_ps(a, b);
}
TRIBUNAL_V256 vf max_n(vf v, vf m, int n) {
  return _mm256_blendv_ps(m, max(v, m), _mm256_castsi256_ps(first(n)));
}
TRIBUNAL_V256 float hmax(vf v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

using mask = vf;  ///< all ones in a selected lane, zeros elsewhere
TRIBUNAL_V256 mask gt(vf a, vf b) {
  return _mm256_cmp_ps(a, b, _CMP_GT_OQ);
}
TRIBUNAL_V256 mask lt(vf a, vf b) {
  return _mm256_cmp_ps(a, b, _CMP_LT_OQ);
}
TRIBUNAL_V256 mask is_nan(vf x) {
  return _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
}
TRIBUNAL_V256 vf select(mask m, vf a, vf b) {
  return _mm256_blendv_ps(b, a, m);
}
TRIBUNAL_V256 vf abs(vf x) {
  return _mm256_andnot_ps(set1(-0.0f), x);
}
TRIBUNAL_V256 vf or_sign(vf y, vf x) {
  return _mm256_or_ps(y, _mm256_and_ps(x, set1(-0.0f)));
}
/// As vec512::scale_pow2.
TRIBUNAL_V256 vf scale_pow2(vf p, vf n) {
  const __m256i k = _mm256_cvtps_epi32(n);
  const __m256i k1 = _mm256_min_epi32(_mm256_max_epi32(k, _mm256_set1_epi32(-126)), _mm256_set1_epi32(127));
  const __m256i k2 = _mm256_sub_epi32(k, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const vf s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const vf s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  return mul(mul(p, s1), s2);
}
#define TRIBUNAL_VEC_FN TRIBUNAL_V256
#include "ops/kernels/vec_exp_tanh.inc"
#undef TRIBUNAL_VEC_FN

/// The 32 lanes of one canonical sum: part p ∈ {0..3} holds lanes 8p … 8p+7.
struct Acc32 {
  static constexpr int kParts = 4;
  vf part[kParts];
};
TRIBUNAL_V256 Acc32 acc_zero() {
  return {{zero(), zero(), zero(), zero()}};
}
/// Adds v to lanes 8p … 8p + n − 1; the other lanes get +0 added, which leaves them unchanged.
TRIBUNAL_V256 void acc_add(Acc32& acc, int p, vf v, int n) {
  acc.part[p] = add(acc.part[p], n >= W ? v : _mm256_and_ps(v, _mm256_castsi256_ps(first(n))));
}
/// The fixed tree: w = 16 (parts 0+2, 1+3), 8 (0+1), 4, 2, 1; returns lane 0.
TRIBUNAL_V256 float acc_fold(const Acc32& acc) {
  const vf s8 = add(add(acc.part[0], acc.part[2]), add(acc.part[1], acc.part[3]));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

}  // namespace vec256

#endif  // __x86_64__

#if defined(__aarch64__)
// ---------------------------------------------------------------------------------------------------
/// AArch64 Advanced SIMD: 4 floats per vector; the 32 reduction lanes are eight vectors. Part of the
/// base architecture, so no target attribute. NEON has no masked loads: partial vectors go through
/// a small stack buffer (the kernels use them only at row ends).
#define TRIBUNAL_TARGET_NEON
#define TRIBUNAL_VNEON __attribute__((always_inline)) inline
namespace vecneon {

using vf = float32x4_t;
using mask = uint32x4_t;  ///< all ones in a selected lane, zeros elsewhere
inline constexpr int W = 4;

TRIBUNAL_VNEON vf set1(float a) {
  return vdupq_n_f32(a);
}
TRIBUNAL_VNEON vf zero() {
  return vdupq_n_f32(0.0f);
}
TRIBUNAL_VNEON vf load(const float* p) {
  return vld1q_f32(p);
}
TRIBUNAL_VNEON void store(float* p, vf v) {
  vst1q_f32(p, v);
}
/// Lanes 0 … n − 1 selected.
TRIBUNAL_VNEON mask first(int n) {
  const uint32_t lane[W] = {0, 1, 2, 3};
  return vcltq_u32(vld1q_u32(lane), vdupq_n_u32(static_cast<uint32_t>(n)));
}
/// The first n (1..W) floats at p, +0 in the other lanes; memory past p[n−1] is not touched.
TRIBUNAL_VNEON vf loadn(const float* p, int n) {
  float lanes[W] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::memcpy(lanes, p, static_cast<size_t>(n) * sizeof(float));
  return vld1q_f32(lanes);
}
/// Stores the first n (1..W) lanes of v.
TRIBUNAL_VNEON void storen(float* p, vf v, int n) {
  float lanes[W];
  vst1q_f32(lanes, v);
  std::memcpy(p, lanes, static_cast<size_t>(n) * sizeof(float));
}
TRIBUNAL_VNEON vf add(vf a, vf b) {
  return vaddq_f32(a, b);
}
TRIBUNAL_VNEON vf sub(vf a, vf b) {
  return vsubq_f32(a, b);
}
TRIBUNAL_VNEON vf mul(vf a, vf b) {
  return vmulq_f32(a, b);
}
TRIBUNAL_VNEON vf div(vf a, vf b) {
  return vdivq_f32(a, b);
}
TRIBUNAL_VNEON vf sqrt(vf a) {
  return vsqrtq_f32(a);
}
/// −a: AArch64 FNEG flips the sign bit (exact, NaN included), like the scalar unary minus.
TRIBUNAL_VNEON vf neg(vf a) {
  return vnegq_f32(a);
}
/// fma32 lane-wise: vfmaq_f32(c, a, b) is FMLA, c + a·b with one rounding.
TRIBUNAL_VNEON vf fma(vf a, vf b, vf c) {
  return vfmaq_f32(c, a, b);
}
TRIBUNAL_VNEON mask gt(vf a, vf b) {
  return vcgtq_f32(a, b);
}
TRIBUNAL_VNEON mask lt(vf a, vf b) {
  return vcltq_f32(a, b);
}
/// Lane-wise x != x.
TRIBUNAL_VNEON mask is_nan(vf x) {
  return vmvnq_u32(vceqq_f32(x, x));
}
/// Lane-wise `m ? a : b` (a bit select: exact).
TRIBUNAL_VNEON vf select(mask m, vf a, vf b) {
  return vbslq_f32(m, a, b);
}
/// Lane-wise `a > b ? a : b`, the x86 vmaxps semantics (NEON's FMAX would propagate NaN and order ±0).
TRIBUNAL_VNEON vf max(vf a, vf b) {
  return select(gt(a, b), a, b);
}
/// Maximum of the first n (1..W) lanes of v folded into m: lanes past n keep m.
TRIBUNAL_VNEON vf max_n(vf v, vf m, int n) {
  return select(first(n), max(v, m), m);
}
/// Horizontal maximum of the lanes (exact, any order, when no lane is NaN).
TRIBUNAL_VNEON float hmax(vf v) {
  return vmaxvq_f32(v);
}
/// |x|: FABS clears the sign bit (exact, NaN included).
TRIBUNAL_VNEON vf abs(vf x) {
  return vabsq_f32(x);
}
TRIBUNAL_VNEON vf or_sign(vf y, vf x) {
  const uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
  return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(y), sign));
}
/// As vec512::scale_pow2 (out-of-range lanes convert to anything and wrap in the integer adds).
TRIBUNAL_VNEON vf scale_pow2(vf p, vf n) {
  const int32x4_t k = vcvtnq_s32_f32(n);  // n is an integer: the conversion is exact
  const int32x4_t k1 = vminq_s32(vmaxq_s32(k, vdupq_n_s32(-126)), vdupq_n_s32(127));
  const int32x4_t k2 = vsubq_s32(k, k1);
  const int32x4_t bias = vdupq_n_s32(127);
  const vf s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, bias), 23));
  const vf s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, bias), 23));
  return mul(mul(p, s1), s2);
}
#define TRIBUNAL_VEC_FN TRIBUNAL_VNEON
#include "ops/kernels/vec_exp_tanh.inc"
#undef TRIBUNAL_VEC_FN

/// The 32 lanes of one canonical sum: part p ∈ {0..7} holds lanes 4p … 4p+3.
struct Acc32 {
  static constexpr int kParts = 8;
  vf part[kParts];
};
TRIBUNAL_VNEON Acc32 acc_zero() {
  Acc32 acc;
  for (vf& v : acc.part) v = zero();
  return acc;
}
/// Adds v to lanes 4p … 4p + n − 1; the other lanes get +0 added, which leaves them unchanged.
TRIBUNAL_VNEON void acc_add(Acc32& acc, int p, vf v, int n) {
  const vf masked = n >= W ? v : vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), first(n)));
  acc.part[p] = add(acc.part[p], masked);
}
/// The fixed tree: w = 16 (parts k + k+4), 8 (k + k+2), 4 (0 + 1), 2, 1; returns lane 0.
TRIBUNAL_VNEON float acc_fold(const Acc32& acc) {
  const vf s16[4] = {add(acc.part[0], acc.part[4]), add(acc.part[1], acc.part[5]),
                     add(acc.part[2], acc.part[6]), add(acc.part[3], acc.part[7])};
  const vf s4 = add(add(s16[0], s16[2]), add(s16[1], s16[3]));
  const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
  return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

}  // namespace vecneon
#endif  // __aarch64__

/// Defines kernels once per ISA of this architecture: KERNELS(ns, target_attribute, vector_namespace)
/// is expanded as KERNELS(k512, TRIBUNAL_TARGET_AVX512, vec512) and KERNELS(k256, TRIBUNAL_TARGET_AVX2,
/// vec256) on x86-64, as KERNELS(kneon, TRIBUNAL_TARGET_NEON, vecneon) on AArch64, and not at all
/// elsewhere (the scalar paths only).
/// A macro rather than a template because GCC and clang inline target-specific intrinsics only into
/// functions that carry the target attribute themselves, and a template cannot vary its attribute
/// with its parameter (an attribute-less template body fails at -O0 and under clang).
///
/// TRIBUNAL_SIMD_CASES(statement) is the SIMD cases of a `switch` over a SimdPath: for each path this
/// architecture compiles, `statement` with `isa` naming the path's kernel namespace (k512, k256 or
/// kneon), then `break`. It must stand directly before `case SimdPath::Scalar:`: the paths of other
/// architectures fall through to the scalar code there (they are never active: simd_path_available
/// refuses them), so every switch names every path without a default.
#if defined(__x86_64__)
#define TRIBUNAL_SIMD_KERNELS(KERNELS)          \
  KERNELS(k512, TRIBUNAL_TARGET_AVX512, vec512) \
  KERNELS(k256, TRIBUNAL_TARGET_AVX2, vec256)
#define TRIBUNAL_SIMD_CASES(...) \
  case SimdPath::Avx512: {       \
    namespace isa = k512;        \
    __VA_ARGS__;                 \
  } break;                       \
  case SimdPath::Avx2: {         \
    namespace isa = k256;        \
    __VA_ARGS__;                 \
  } break;                       \
  case SimdPath::Neon:
#elif defined(__aarch64__)
#define TRIBUNAL_SIMD_KERNELS(KERNELS) KERNELS(kneon, TRIBUNAL_TARGET_NEON, vecneon)
#define TRIBUNAL_SIMD_CASES(...) \
  case SimdPath::Neon: {         \
    namespace isa = kneon;       \
    __VA_ARGS__;                 \
  } break;                       \
  case SimdPath::Avx512:         \
  case SimdPath::Avx2:
#else
#define TRIBUNAL_SIMD_KERNELS(KERNELS)
#define TRIBUNAL_SIMD_CASES(...) \
  case SimdPath::Avx512:         \
  case SimdPath::Avx2:           \
  case SimdPath::Neon:
#endif

}  // namespace tribunal
