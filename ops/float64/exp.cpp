// f64::exp (ops/float64/exp.h): one operation sequence, written once (exp_lanes below) and stamped for
// plain double and, on x86-64, for four AVX2 lanes; every step is one correctly rounded IEEE-754
// operation or an exact bit manipulation, so both give the same bits.
#include "ops/float64/exp.h"

#include <bit>
#include <cstdint>

#include "ops/simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tribunal::f64 {
namespace {

constexpr double kLog2e = 1.4426950408889634074;         // 1/ln 2
constexpr double kLn2Hi = 6.93147180369123816490e-01;    // 0x3FE62E42FEE00000: 21 trailing zero bits
constexpr double kLn2Lo = 1.90821492927058770002e-10;    // ln 2 − kLn2Hi
constexpr double kRound = 0x1.8p52;                      // adding and subtracting it rounds to an integer
constexpr double kOverflow = 709.782712893383973096;     // ln(DBL_MAX): above, +inf
constexpr double kUnderflow = -745.1332191019412076235;  // below ln(2^-1075): +0
constexpr double kBias = 0x1p52 + 1023.0;                // n + kBias holds n + 1023 in its low bits

/// 1/k! for k = 13 down to 0, rounded to double.
constexpr double kTaylor[14] = {1.0 / 6227020800.0,
                                1.0 / 479001600.0,
                                1.0 / 39916800.0,
                                1.0 / 3628800.0,
                                1.0 / 362880.0,
                                1.0 / 40320.0,
                                1.0 / 5040.0,
                                1.0 / 720.0,
                                1.0 / 120.0,
                                1.0 / 24.0,
                                1.0 / 6.0,
                                0.5,
                                1.0,
                                1.0};

// The body of exp on L independent values of one lane type, stamped into each namespace below, which
// provides vd, mask, set1, add, sub, mul, lt, gt, is_nan, select and pow2 (2^n for an integer-valued n
// in [−1022, 1023]). Each step runs on all L values before the next: the polynomial is a chain of 26
// dependent roundings, so L chains side by side keep the FPU busy (every value gets the same operations,
// whatever L).
#define TRIBUNAL_EXP_LANES                                                                             \
  template <int L>                                                                                     \
  TRIBUNAL_EXP_FN void exp_lanes(const vd* x, vd* y) {                                                 \
    vd n[L], r[L], p[L];                                                                               \
    for (int v = 0; v < L; ++v) {                                                                      \
      n[v] = sub(add(mul(x[v], set1(kLog2e)), set1(kRound)), set1(kRound));                            \
      r[v] = sub(sub(x[v], mul(n[v], set1(kLn2Hi))), mul(n[v], set1(kLn2Lo)));                         \
      p[v] = set1(kTaylor[0]);                                                                         \
    }                                                                                                  \
    for (int k = 1; k < 14; ++k)                                                                       \
      for (int v = 0; v < L; ++v) p[v] = add(mul(p[v], r[v]), set1(kTaylor[k]));                       \
    for (int v = 0; v < L; ++v) {                                                                      \
      /* 2^n in two exact factors where n leaves the normal exponents (n ∈ [−1075, 1024] here). */ \
      const mask tiny = lt(n[v], set1(-1020.0)), big = gt(n[v], set1(1023.0));                         \
      const vd a = add(n[v], select(tiny, set1(600.0), select(big, set1(-1.0), set1(0.0))));           \
      const vd s = select(tiny, set1(0x1p-600), select(big, set1(2.0), set1(1.0)));                    \
      vd e = mul(mul(p[v], pow2(a)), s);                                                               \
      e = select(lt(x[v], set1(kUnderflow)), set1(0.0), e);                                            \
      e = select(gt(x[v], set1(kOverflow)), set1(__builtin_inf()), e);                                 \
      y[v] = select(is_nan(x[v]), add(x[v], x[v]), e);                                                 \
    }                                                                                                  \
  }

namespace scalar {
#define TRIBUNAL_EXP_FN inline
using vd = double;
using mask = bool;
inline vd set1(double a) {
  return a;
}
inline vd add(vd a, vd b) {
  return a + b;
}
inline vd sub(vd a, vd b) {
  return a - b;
}
inline vd mul(vd a, vd b) {
  return a * b;
}
inline mask lt(vd a, vd b) {
  return a < b;
}
inline mask gt(vd a, vd b) {
  return a > b;
}
inline mask is_nan(vd a) {
  return a != a;
}
inline vd select(mask m, vd a, vd b) {
  return m ? a : b;
}
inline vd pow2(vd n) {
  return std::bit_cast<double>(std::bit_cast<uint64_t>(n + kBias) << 52);
}
TRIBUNAL_EXP_LANES
#undef TRIBUNAL_EXP_FN
}  // namespace scalar

#if defined(__x86_64__)
namespace avx2 {
#define TRIBUNAL_EXP_FN __attribute__((target("avx2"), always_inline)) inline
using vd = __m256d;
using mask = __m256d;
TRIBUNAL_EXP_FN vd set1(double a) {
  return _mm256_set1_pd(a);
}
TRIBUNAL_EXP_FN vd add(vd a, vd b) {
  return _mm256_add_pd(a, b);
}
TRIBUNAL_EXP_FN vd sub(vd a, vd b) {
  return _mm256_sub_pd(a, b);
}
TRIBUNAL_EXP_FN vd mul(vd a, vd b) {
  return _mm256_mul_pd(a, b);
}
TRIBUNAL_EXP_FN mask lt(vd a, vd b) {
  return _mm256_cmp_pd(a, b, _CMP_LT_OQ);
}
TRIBUNAL_EXP_FN mask gt(vd a, vd b) {
  return _mm256_cmp_pd(a, b, _CMP_GT_OQ);
}
TRIBUNAL_EXP_FN mask is_nan(vd a) {
  return _mm256_cmp_pd(a, a, _CMP_UNORD_Q);
}
TRIBUNAL_EXP_FN vd select(mask m, vd a, vd b) {
  return _mm256_blendv_pd(b, a, m);
}
TRIBUNAL_EXP_FN vd pow2(vd n) {
  return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(n, set1(kBias))), 52));
}
TRIBUNAL_EXP_LANES

__attribute__((target("avx2"))) void exp_run(const double* x, double* y, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    vd in[4], out[4];
    for (int v = 0; v < 4; ++v) in[v] = _mm256_loadu_pd(x + i + 4 * v);
    exp_lanes<4>(in, out);
    for (int v = 0; v < 4; ++v) _mm256_storeu_pd(y + i + 4 * v, out[v]);
  }
  for (; i + 4 <= n; i += 4) {
    const vd in = _mm256_loadu_pd(x + i);
    vd out;
    exp_lanes<1>(&in, &out);
    _mm256_storeu_pd(y + i, out);
  }
  for (; i < n; ++i) scalar::exp_lanes<1>(x + i, y + i);
}
#undef TRIBUNAL_EXP_FN
}  // namespace avx2
#endif

}  // namespace

double exp(double x) {
  double y;
  scalar::exp_lanes<1>(&x, &y);
  return y;
}

void exp(const double* x, double* y, size_t n) {
#if defined(__x86_64__)
  if (active_simd_path() != SimdPath::Scalar) return avx2::exp_run(x, y, n);
#endif
  size_t i = 0;
  for (; i + 4 <= n; i += 4) scalar::exp_lanes<4>(x + i, y + i);
  for (; i < n; ++i) scalar::exp_lanes<1>(x + i, y + i);
}

}  // namespace tribunal::f64
