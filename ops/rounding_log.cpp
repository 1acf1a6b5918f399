// Rounding decisions and their packed log. See rounding_log.h.
#include "ops/rounding_log.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
// GCC 12 reports its own intrinsics' _mm512_undefined_*() placeholders as "(maybe) uninitialized"
// once inlined (as in ops/kernels/vec_math.h); the value is never read.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

#include "ops/simd.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

namespace tribunal {
namespace {

/// 2^128: the float32 "value" above FLT_MAX. float32 rounding overflows above the midpoint between
/// FLT_MAX and it, so it stands in for the upper neighbour of FLT_MAX.
constexpr double kOverflow = 340282366920938463463374607431768211456.0;

/// x's float32 neighbours, as doubles, with lo ≤ x ≤ hi (lo == hi when x is a float32). Requires a
/// finite x with |x| < 2^128.
struct Neighbours {
  double lo = 0, hi = 0;
};

Neighbours float32_neighbours(double x) {
  const float f = static_cast<float>(x);
  if (std::isinf(f)) {  // between the overflow midpoint and 2^128
    const double max = std::numeric_limits<float>::max();
    return x > 0 ? Neighbours{max, kOverflow} : Neighbours{-kOverflow, -max};
  }
  const double fd = f;
  if (fd == x) return {fd, fd};
  const auto widen = [](float v) {  // a neighbour past ±FLT_MAX is the virtual ±2^128
    return std::isinf(v) ? std::copysign(kOverflow, static_cast<double>(v)) : static_cast<double>(v);
  };
  if (fd < x) return {fd, widen(std::nextafter(f, std::numeric_limits<float>::infinity()))};
  return {widen(std::nextafter(f, -std::numeric_limits<float>::infinity())), fd};
}

/// Below 2^23·q the grid is the multiples of q (docs/numerics.md, "Rounding-log mode"); above, every
/// float32 is one (their spacing there is at least q, both powers of two).
bool below_quantum(double x, double quantum) {
  return quantum > 0 && std::fabs(x) < 0x1p23 * quantum;
}

/// x's neighbours on the rounding grid: the float32 values that are multiples of `quantum` (every
/// float32 when it is 0). Below 2^23·quantum they are multiples m·quantum with |m| ≤ 2^23, all float32
/// values since quantum ≥ 2^-149; x / quantum, the floor and the products are exact in double.
Neighbours neighbours(double x, double quantum) {
  if (!below_quantum(x, quantum)) return float32_neighbours(x);
  const double lo = std::floor(x / quantum) * quantum;
  // −q + q is +0: zero on this grid is +0 only (see nearest).
  return lo == x ? Neighbours{x, x} : Neighbours{lo, lo + quantum};
}

/// x rounded to nearest on the grid, ties to the even multiple (float32 rounding above the quantum).
/// Zero on a quantum's grid is +0, whatever x's sign: values within q/2 of zero are sums that cancel,
/// and two kernels' values may lie on either side of it (IEEE-754 rounding would give them ±0).
float nearest(double x, double quantum) {
  if (!below_quantum(x, quantum)) return static_cast<float>(x);
  return static_cast<float>(std::nearbyint(x / quantum) * quantum + 0.0);
}

void check_quantum(double quantum) {
  // A power of two in range: a positive normal double with no mantissa bits (2^-149 is normal in double).
  const auto bits = std::bit_cast<uint64_t>(quantum);
  const uint64_t exponent = bits >> 52;  // the sign bit set makes it out of range
  if (!(quantum == 0 ||
        ((bits & ((uint64_t{1} << 52) - 1)) == 0 && exponent >= 1023 - 149 && exponent <= 1023 + 104)))
    throw OpError("rounding log: quantum " + std::to_string(quantum) +
                  " is not 0 or a power of two in [2^-149, 2^104]");
}

/// `quanta` is empty or one (possibly empty) vector per output, each empty or one quantum per value.
void check_quanta(std::span<const std::vector<double>> values, std::span<const std::vector<double>> quanta) {
  if (quanta.empty()) return;
  if (quanta.size() != values.size())
    throw OpError("rounding log: quanta for " + std::to_string(quanta.size()) + " outputs, values for " +
                  std::to_string(values.size()));
  for (size_t i = 0; i < quanta.size(); ++i) {
    if (!quanta[i].empty() && quanta[i].size() != values[i].size())
      throw OpError("rounding log: " + std::to_string(quanta[i].size()) + " quanta for output " +
                    std::to_string(i) + "'s " + std::to_string(values[i].size()) + " values");
    for (double q : quanta[i]) check_quantum(q);
  }
}

void check_tau(double tau) {
  if (!(tau >= 0 && tau <= kMaxRoundingTau))
    throw OpError("rounding log: tau " + std::to_string(tau) + " is outside [0, " +
                  std::to_string(kMaxRoundingTau) + "] (a fraction of the float32 spacing)");
}

// The per-value rules, unchecked: the public functions check tau and the quantum first, the per-node
// loops once per node (check_tau, check_quanta) instead of once per value.

double distance_unchecked(double x, double quantum) {
  if (!std::isfinite(x) || std::fabs(x) >= kOverflow) return 0.5;
  const Neighbours n = neighbours(x, quantum);
  if (n.lo == n.hi) return 0.5;
  // lo + hi and the halving are exact in double (both are float32 values, or 2^128).
  const double spacing = n.hi - n.lo, midpoint = (n.lo + n.hi) / 2;
  return std::fabs(x - midpoint) / spacing;
}

LoggedRounding logged_unchecked(double x, double tau, double quantum) {
  const float value = nearest(x, quantum);
  if (distance_unchecked(x, quantum) >= tau) return {value, Rounding::Nearest};
  return {value, static_cast<double>(value) == neighbours(x, quantum).lo ? Rounding::Down : Rounding::Up};
}

float replayed_unchecked(double x, Rounding decision, double quantum) {
  if (!std::isfinite(x) || std::fabs(x) >= kOverflow) return static_cast<float>(x);
  if (decision == Rounding::Nearest) return nearest(x, quantum);
  const Neighbours n = neighbours(x, quantum);
  // The virtual 2^128 is float32's +inf, as round-to-nearest would give above the overflow midpoint.
  return static_cast<float>(decision == Rounding::Down ? n.lo : n.hi);
}

bool allowed_unchecked(double x, Rounding decision, double tau, double quantum) {
  const double distance = distance_unchecked(x, quantum);
  switch (decision) {
    case Rounding::Nearest:
      return distance >= tau / 2;
    case Rounding::Down:
    case Rounding::Up:
      return distance < 1.5 * tau;
  }
  return false;
}

}  // namespace

double boundary_distance(double x, double quantum) {
  check_quantum(quantum);
  return distance_unchecked(x, quantum);
}

LoggedRounding round_logged(double x, double tau, double quantum) {
  check_tau(tau);
  check_quantum(quantum);
  return logged_unchecked(x, tau, quantum);
}

float round_replayed(double x, Rounding decision, double quantum) {
  check_quantum(quantum);
  return replayed_unchecked(x, decision, quantum);
}

bool rounding_allowed(double x, Rounding decision, double tau, double quantum) {
  check_tau(tau);
  check_quantum(quantum);
  return allowed_unchecked(x, decision, tau, quantum);
}

std::vector<uint8_t> pack_trits(std::span<const Rounding> decisions) {
  std::vector<uint8_t> out((decisions.size() + 4) / 5, 0);
  for (size_t j = 0; j < out.size(); ++j) {
    unsigned byte = 0;
    for (size_t k = 5; k-- > 0;) {  // the first trit is the least significant digit
      const size_t i = 5 * j + k;
      byte = byte * 3 + (i < decisions.size() ? static_cast<unsigned>(decisions[i]) : 0u);
    }
    out[j] = static_cast<uint8_t>(byte);
  }
  return out;
}

std::vector<Rounding> unpack_trits(std::span<const uint8_t> packed, size_t count) {
  if (packed.size() != (count + 4) / 5)
    throw OpError("rounding log: " + std::to_string(packed.size()) + " bytes for " + std::to_string(count) +
                  " decisions (5 per byte: " + std::to_string((count + 4) / 5) + " bytes)");
  std::vector<Rounding> out;
  out.reserve(count);
  for (size_t j = 0; j < packed.size(); ++j) {
    unsigned byte = packed[j];
    if (byte > 242)
      throw OpError("rounding log: byte " + std::to_string(j) + " is " + std::to_string(byte) +
                    " (at most 242)");
    for (size_t k = 0; k < 5; ++k, byte /= 3) {
      const size_t i = 5 * j + k;
      if (i < count) {
        out.push_back(static_cast<Rounding>(byte % 3));
      } else if (byte % 3 != 0) {
        throw OpError("rounding log: byte " + std::to_string(j) + " has a decision past the " +
                      std::to_string(count) + " logged");
      }
    }
  }
  return out;
}

uint64_t count_logged(const RoundingLog& log) {
  // Non-zero base-3 digits per byte value, computed once.
  static const std::array<uint8_t, 256> nonzero = [] {
    std::array<uint8_t, 256> t{};
    for (unsigned b = 0; b < 256; ++b)
      for (unsigned v = b; v > 0; v /= 3) t[b] = static_cast<uint8_t>(t[b] + (v % 3 != 0));
    return t;
  }();
  uint64_t n = 0;
  for (uint8_t b : log.packed) n += nonzero[b];
  return n;
}

namespace {

// The per-node loops below take a fast path for the common values: the same arithmetic as
// neighbours / nearest / distance_unchecked, without libm calls (floor, nearbyint and nextafterf are
// replaced by exact integer and magic-number forms), and fall back to the per-value rules above for
// the rare rest (zeros, subnormal neighbours at the edges, FLT_MAX, infinities, NaN). Same bits.

/// 1 / p for a power of two p in [2^-1022, 2^1023] (a quantum or a float32 spacing), exactly: the
/// exponent negated. Multiplying by it gives the same bits as dividing by p.
inline double reciprocal_pow2(double p) {
  return std::bit_cast<double>((uint64_t{2046} << 52) - std::bit_cast<uint64_t>(p));
}

/// x's neighbours lo ≤ x ≤ hi on the grid and its nearest grid value, as neighbours() and nearest()
/// give them. False (nothing written) where the fast path does not apply.
inline bool grid_fast(double x, double quantum, double& lo, double& hi, float& near) {
  if (below_quantum(x, quantum)) {  // |x| < 2^23·q: m = x / q is exact and |m| < 2^23
    const double m = x * reciprocal_pow2(quantum);
    const double t = static_cast<double>(static_cast<int64_t>(m));  // truncation, exact here
    const double fl = t > m ? t - 1 : t;                            // floor(m)
    // nearbyint(m), ties to even: adding and removing 2^52 rounds |m| < 2^52 in the current mode.
    const double r = std::copysign((std::fabs(m) + 0x1p52) - 0x1p52, m);
    near = static_cast<float>(r * quantum + 0.0);
    lo = fl * quantum;
    hi = lo == x ? x : lo + quantum;
    return true;
  }
  const float f = static_cast<float>(x);
  const auto bits = std::bit_cast<uint32_t>(f);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag == 0 || mag >= 0x7f7fffffu) return false;  // ±0, ±FLT_MAX, ±inf, NaN
  near = f;
  const double fd = f;
  if (fd == x) {
    lo = hi = fd;
    return true;
  }
  // nextafterf(f, ±inf) toward x: one more magnitude step away from zero when x lies beyond f.
  const bool up = fd < x;
  const double other = std::bit_cast<float>(up == (bits >> 31 == 0) ? bits + 1 : bits - 1);
  lo = up ? fd : other;
  hi = up ? other : fd;
  return true;
}

/// distance_unchecked from grid_fast's neighbours (lo == hi: on the grid).
inline double distance_fast(double x, double lo, double hi) {
  if (lo == hi) return 0.5;
  // The spacing of two neighbours on the grid is a power of two (a quantum, or one float32 step).
  const double spacing = hi - lo, midpoint = (lo + hi) / 2;
  return std::fabs(x - midpoint) * reciprocal_pow2(spacing);
}

/// The five trits of every byte value ≤ 242 (unpack_trits' digits).
const std::array<std::array<Rounding, 5>, 243>& trit_table() {
  static const auto table = [] {
    std::array<std::array<Rounding, 5>, 243> t{};
    for (unsigned b = 0; b < 243; ++b)
      for (unsigned k = 0, v = b; k < 5; ++k, v /= 3) t[b][k] = static_cast<Rounding>(v % 3);
    return t;
  }();
  return table;
}

/// One output's values rounded and their decisions (0, 1, 2: Nearest, Down, Up) one byte each, as
/// the per-value rules give them: the fast path, else logged_unchecked.
void round_run_scalar(const double* x, const double* q, size_t n, double tau, float* y, uint8_t* d) {
  for (size_t e = 0; e < n; ++e) {
    const double qe = q ? q[e] : 0.0;
    double lo = 0, hi = 0;
    float near = 0;
    if (!grid_fast(x[e], qe, lo, hi, near)) {
      const LoggedRounding r = logged_unchecked(x[e], tau, qe);
      y[e] = r.value;
      d[e] = static_cast<uint8_t>(r.decision);
      continue;
    }
    y[e] = near;
    d[e] = static_cast<uint8_t>(distance_fast(x[e], lo, hi) >= tau ? Rounding::Nearest
                                : static_cast<double>(near) == lo  ? Rounding::Down
                                                                   : Rounding::Up);
  }
}

/// Each of the low eight bits of a lane mask as one byte (0 or 1), lane l in byte l.
constexpr std::array<uint64_t, 256> kSpreadBits = [] {
  std::array<uint64_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m)
    for (unsigned l = 0; l < 8; ++l) t[m] |= static_cast<uint64_t>(m >> l & 1) << (8 * l);
  return t;
}();

/// The decision bytes of up to eight lanes from their masks (`down` within `logged`): 1 where logged
/// and down, 2 where logged and up, else 0 — 2·logged − down byte by byte, with no borrow.
inline uint64_t decision_bytes(unsigned logged, unsigned down) {
  return 2 * kSpreadBits[logged & 0xff] - kSpreadBits[down & 0xff];
}

/// The lanes of a SIMD group at x (the bits set in `slow`, of `lanes`) that the fast grid refuses, by
/// the per-value rules.
inline void round_slow_lanes(unsigned slow, int lanes, const double* x, const double* q, double tau, float* y,
                             uint8_t* d) {
  for (int l = 0; l < lanes; ++l)
    if (slow >> l & 1) {
      const LoggedRounding rr = logged_unchecked(x[l], tau, q ? q[l] : 0.0);
      y[l] = rr.value;
      d[l] = static_cast<uint8_t>(rr.decision);
    }
}

#if defined(__x86_64__)
/// round_run_scalar on AVX-512F, eight values at a time: grid_fast's arithmetic lane by lane
/// (roundscale's floor and ties-to-even are std::floor's and nearbyint's; the neighbour is the float's
/// bits ± 1), the same bits. Lanes that grid_fast refuses go through logged_unchecked.
__attribute__((target("avx512f"))) void round_run_avx512(const double* x, const double* q, size_t n,
                                                         double tau, float* y, uint8_t* d) {
  const __m512d zero = _mm512_setzero_pd(), two23 = _mm512_set1_pd(0x1p23), half = _mm512_set1_pd(0.5),
                tauv = _mm512_set1_pd(tau);
  const __m512i recip = _mm512_set1_epi64(int64_t{2046} << 52), abs64 = _mm512_set1_epi64(INT64_MAX);
  const __m512i abs32 = _mm512_set1_epi32(0x7fffffff), ones32 = _mm512_set1_epi32(1),
                max_finite = _mm512_set1_epi32(0x7f7ffffe);
  size_t e = 0;
  for (; e + 8 <= n; e += 8) {
    const __m512d xv = _mm512_loadu_pd(x + e);
    const __m512d qv = q ? _mm512_loadu_pd(q + e) : zero;
    const __m512d ax = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(xv), abs64));
    // The quantum's grid: |x| < 2^23·q (false for q = 0 and for NaN).
    const __mmask8 below = _mm512_cmp_pd_mask(qv, zero, _CMP_GT_OQ) &
                           _mm512_cmp_pd_mask(ax, _mm512_mul_pd(two23, qv), _CMP_LT_OQ);
    const __m512d m =
        _mm512_mul_pd(xv, _mm512_castsi512_pd(_mm512_sub_epi64(recip, _mm512_castpd_si512(qv))));
    const __m512d fl = _mm512_roundscale_pd(m, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512d r = _mm512_roundscale_pd(m, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 near_q = _mm512_cvtpd_ps(_mm512_add_pd(_mm512_mul_pd(r, qv), zero));
    const __m512d lo_q = _mm512_mul_pd(fl, qv);
    const __mmask8 on_q = _mm512_cmp_pd_mask(lo_q, xv, _CMP_EQ_OQ);
    const __m512d hi_q = _mm512_mask_blend_pd(on_q, _mm512_add_pd(lo_q, qv), xv);
    // The float32 grid: f and its neighbour toward x, in the low 8 of 16 float lanes.
    const __m256 f = _mm512_cvtpd_ps(xv);
    const __m512i fb = _mm512_castsi256_si512(_mm256_castps_si256(f));
    const __m512i mag = _mm512_and_si512(fb, abs32);
    // grid_fast's refusals: mag == 0 or mag ≥ 0x7f7fffff (±0, ±FLT_MAX, ±inf, NaN).
    const auto special = static_cast<__mmask8>(_mm512_cmpeq_epi32_mask(mag, _mm512_setzero_si512()) |
                                               _mm512_cmpgt_epi32_mask(mag, max_finite));
    const __m512d fd = _mm512_cvtps_pd(f);
    const __mmask8 eq = _mm512_cmp_pd_mask(fd, xv, _CMP_EQ_OQ);
    const __mmask8 up = _mm512_cmp_pd_mask(fd, xv, _CMP_LT_OQ);
    // nextafterf toward x: bits + 1 where up == (sign bit clear), else bits − 1.
    const auto negative = static_cast<__mmask8>(_mm512_cmplt_epi32_mask(fb, _mm512_setzero_si512()));
    const auto inc = static_cast<__mmask8>(up ^ negative);
    const __m512i nb =
        _mm512_mask_blend_epi32(inc, _mm512_sub_epi32(fb, ones32), _mm512_add_epi32(fb, ones32));
    const __m512d other = _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_castsi512_ps(nb)));
    __m512d lo_f = _mm512_mask_blend_pd(up, other, fd), hi_f = _mm512_mask_blend_pd(up, fd, other);
    lo_f = _mm512_mask_blend_pd(eq, lo_f, fd);
    hi_f = _mm512_mask_blend_pd(eq, hi_f, fd);
    const __m512d lo = _mm512_mask_blend_pd(below, lo_f, lo_q), hi = _mm512_mask_blend_pd(below, hi_f, hi_q);
    const __m256 nearv = _mm512_castps512_ps256(
        _mm512_mask_blend_ps(below, _mm512_castps256_ps512(f), _mm512_castps256_ps512(near_q)));
    // distance_fast: on the grid 0.5 (never logged, τ ≤ 1/4); else |x − midpoint| / spacing.
    const __mmask8 on_grid = _mm512_cmp_pd_mask(lo, hi, _CMP_EQ_OQ);
    const __m512d spacing = _mm512_sub_pd(hi, lo);
    const __m512d midpoint = _mm512_mul_pd(_mm512_add_pd(lo, hi), half);
    const __m512d dist = _mm512_mul_pd(
        _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(_mm512_sub_pd(xv, midpoint)), abs64)),
        _mm512_castsi512_pd(_mm512_sub_epi64(recip, _mm512_castpd_si512(spacing))));
    const __mmask8 logged = static_cast<__mmask8>(~on_grid & _mm512_cmp_pd_mask(dist, tauv, _CMP_LT_OQ));
    const __mmask8 down =
        static_cast<__mmask8>(logged & _mm512_cmp_pd_mask(_mm512_cvtps_pd(nearv), lo, _CMP_EQ_OQ));
    _mm256_storeu_ps(y + e, nearv);
    const uint64_t bytes = decision_bytes(logged, down);
    std::memcpy(d + e, &bytes, 8);
    // Lanes on the float32 grid that grid_fast refuses: the per-value rules.
    if (const auto slow = static_cast<__mmask8>(special & ~below))
      round_slow_lanes(slow, 8, x + e, q ? q + e : nullptr, tau, y + e, d + e);
  }
  round_run_scalar(x + e, q ? q + e : nullptr, n - e, tau, y + e, d + e);
}

/// The 32-bit halves of four 64-bit lane masks (each all ones or all zeros), as four 32-bit masks.
__attribute__((target("avx2"))) inline __m128i narrow_mask(__m256d mask) {
  const __m256i even32 = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(mask), even32));
}

/// round_run_avx2's shortcut for four values far from every rounding boundary (most values): true, with
/// y and d written, when every lane is. On the float32 grid r = |x − f| (exact) is below (1/2 − τ)·s for
/// the smaller spacing s beside f (2^(E−23), or 2^(E−24) below a power of two), so the distance to the
/// midpoint is above τ: f, not logged. On the quantum's grid (`below`) m = x/q and its nearest integer k
/// give |m − k| exactly, far when below (1/2 − τ): k·q + 0 (zero there is +0), not logged. The bounds
/// `far_q` = (1/2 − τ)(1 − 2^-40) and `far` = far_q·2^-23 are shrunk beyond their own rounding (2^-53),
/// so what passes is what the per-value rules give. Zeros on the float32 grid pass (x = ±0 is f);
/// ±FLT_MAX, ±inf, NaN and subnormal f never do.
__attribute__((target("avx2"))) inline bool far_from_boundaries(__m256d xv, __m256d qv, __m128 f,
                                                                __m256d below, int below_lanes, __m256d far,
                                                                __m256d far_q, float* y, uint8_t* d) {
  const __m256d zero = _mm256_setzero_pd(), abs64 = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
  const __m128i fb = _mm_castps_si128(f);
  // 2^E of f as a float (0 for subnormal f), halved where f is a power of two: s·2^23.
  const __m128i expo = _mm_and_si128(fb, _mm_set1_epi32(0x7f800000));
  const __m128i power2 = _mm_cmpeq_epi32(_mm_and_si128(fb, _mm_set1_epi32(0x007fffff)), _mm_setzero_si128());
  const __m128i step = _mm_sub_epi32(expo, _mm_and_si128(power2, _mm_set1_epi32(0x00800000)));
  const __m256d s23 =
      _mm256_cvtps_pd(_mm_castsi128_ps(_mm_andnot_si128(_mm_cmpeq_epi32(expo, _mm_setzero_si128()), step)));
  const __m256d r = _mm256_and_pd(_mm256_sub_pd(xv, _mm256_cvtps_pd(f)), abs64);
  __m256d pass = _mm256_andnot_pd(below, _mm256_or_pd(_mm256_cmp_pd(r, _mm256_mul_pd(far, s23), _CMP_LT_OQ),
                                                      _mm256_cmp_pd(xv, zero, _CMP_EQ_OQ)));
  __m128 out = f;
  if (below_lanes != 0) {
    const __m256i recip = _mm256_set1_epi64x(int64_t{2046} << 52);
    const __m256d m =
        _mm256_mul_pd(xv, _mm256_castsi256_pd(_mm256_sub_epi64(recip, _mm256_castpd_si256(qv))));
    const __m256d k = _mm256_round_pd(m, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256d off = _mm256_and_pd(_mm256_sub_pd(m, k), abs64);
    pass = _mm256_or_pd(pass, _mm256_and_pd(below, _mm256_cmp_pd(off, far_q, _CMP_LT_OQ)));
    out = _mm_blendv_ps(f, _mm256_cvtpd_ps(_mm256_add_pd(_mm256_mul_pd(k, qv), zero)),
                        _mm_castsi128_ps(narrow_mask(below)));
  }
  const __m128i finite =
      _mm_cmpgt_epi32(_mm_set1_epi32(0x7f7ffffe), _mm_and_si128(fb, _mm_set1_epi32(0x7fffffff)));
  if ((_mm256_movemask_pd(pass) & _mm_movemask_ps(_mm_castsi128_ps(finite))) != 0xF) return false;
  _mm_storeu_ps(y, out);
  std::memset(d, 0, 4);
  return true;
}

/// round_run_avx512 on AVX2, four values at a time: the same lanes' arithmetic with vector masks
/// (round_pd's floor and ties-to-even; the float32 neighbour is the float's bits ± 1), the same bits.
__attribute__((target("avx2"))) void round_run_avx2(const double* x, const double* q, size_t n, double tau,
                                                    float* y, uint8_t* d) {
  const __m256d zero = _mm256_setzero_pd(), two23 = _mm256_set1_pd(0x1p23), half = _mm256_set1_pd(0.5),
                tauv = _mm256_set1_pd(tau);
  const __m256d abs64 = _mm256_castsi256_pd(_mm256_set1_epi64x(INT64_MAX));
  const __m256i recip = _mm256_set1_epi64x(int64_t{2046} << 52);
  const __m128i abs32 = _mm_set1_epi32(0x7fffffff), one32 = _mm_set1_epi32(1), minus32 = _mm_set1_epi32(-1),
                max_finite = _mm_set1_epi32(0x7f7ffffe);
  const __m256d far_q = _mm256_set1_pd((0.5 - tau) * (1 - 0x1p-40)),
                far = _mm256_mul_pd(far_q, _mm256_set1_pd(0x1p-23));
  size_t e = 0;
  for (; e + 4 <= n; e += 4) {
    const __m256d xv = _mm256_loadu_pd(x + e);
    const __m256d qv = q ? _mm256_loadu_pd(q + e) : zero;
    const __m256d ax = _mm256_and_pd(xv, abs64);
    // The quantum's grid: |x| < 2^23·q (false for q = 0 and for NaN).
    const __m256d below = _mm256_and_pd(_mm256_cmp_pd(qv, zero, _CMP_GT_OQ),
                                        _mm256_cmp_pd(ax, _mm256_mul_pd(two23, qv), _CMP_LT_OQ));
    const int below_lanes = _mm256_movemask_pd(below);
    // The float32 grid: f and its neighbour toward x.
    const __m128 f = _mm256_cvtpd_ps(xv);
    const __m128i fb = _mm_castps_si128(f);
    const __m128i mag = _mm_and_si128(fb, abs32);
    if (far_from_boundaries(xv, qv, f, below, below_lanes, far, far_q, y + e, d + e)) continue;
    // grid_fast's refusals: mag == 0 or mag ≥ 0x7f7fffff (±0, ±FLT_MAX, ±inf, NaN), less the lanes
    // where x is ±0 itself: lo = hi = f there, so these lanes already hold the per-value rules' ±0 and
    // "nearest" (a causal softmax and its gradient are half exact zeros, which went one by one).
    const __m128i zero_x = narrow_mask(_mm256_cmp_pd(xv, zero, _CMP_EQ_OQ));
    const __m128i special = _mm_or_si128(_mm_andnot_si128(zero_x, _mm_cmpeq_epi32(mag, _mm_setzero_si128())),
                                         _mm_cmpgt_epi32(mag, max_finite));
    const __m256d fd = _mm256_cvtps_pd(f);
    const __m256d eq = _mm256_cmp_pd(fd, xv, _CMP_EQ_OQ);
    const __m256d up = _mm256_cmp_pd(fd, xv, _CMP_LT_OQ);
    // nextafterf toward x: bits + 1 where up == (sign bit clear), else bits − 1.
    const __m128i inc = _mm_xor_si128(narrow_mask(up), _mm_cmplt_epi32(fb, _mm_setzero_si128()));
    const __m128i nb = _mm_add_epi32(fb, _mm_blendv_epi8(minus32, one32, inc));
    const __m256d other = _mm256_cvtps_pd(_mm_castsi128_ps(nb));
    __m256d lo_f = _mm256_blendv_pd(other, fd, up), hi_f = _mm256_blendv_pd(fd, other, up);
    lo_f = _mm256_blendv_pd(lo_f, fd, eq);
    hi_f = _mm256_blendv_pd(hi_f, fd, eq);
    __m256d lo = lo_f, hi = hi_f;
    __m128 nearv = f;
    // The quantum's grid, only where some lane is below 2^23·q: for a gemm's outputs, whose quantum
    // bounds every partial sum, a minority of values; never for the other ops (no quanta).
    if (below_lanes != 0) {
      const __m256d m =
          _mm256_mul_pd(xv, _mm256_castsi256_pd(_mm256_sub_epi64(recip, _mm256_castpd_si256(qv))));
      const __m256d fl = _mm256_round_pd(m, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      const __m256d r = _mm256_round_pd(m, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m128 near_q = _mm256_cvtpd_ps(_mm256_add_pd(_mm256_mul_pd(r, qv), zero));
      const __m256d lo_q = _mm256_mul_pd(fl, qv);
      const __m256d on_q = _mm256_cmp_pd(lo_q, xv, _CMP_EQ_OQ);
      const __m256d hi_q = _mm256_blendv_pd(_mm256_add_pd(lo_q, qv), xv, on_q);
      lo = _mm256_blendv_pd(lo_f, lo_q, below);
      hi = _mm256_blendv_pd(hi_f, hi_q, below);
      nearv = _mm_blendv_ps(f, near_q, _mm_castsi128_ps(narrow_mask(below)));
    }
    // distance_fast: on the grid 0.5 (never logged, τ ≤ 1/4); else |x − midpoint| / spacing.
    const __m256d on_grid = _mm256_cmp_pd(lo, hi, _CMP_EQ_OQ);
    const __m256d spacing = _mm256_sub_pd(hi, lo);
    const __m256d midpoint = _mm256_mul_pd(_mm256_add_pd(lo, hi), half);
    const __m256d dist =
        _mm256_mul_pd(_mm256_and_pd(_mm256_sub_pd(xv, midpoint), abs64),
                      _mm256_castsi256_pd(_mm256_sub_epi64(recip, _mm256_castpd_si256(spacing))));
    const __m256d logged_v = _mm256_andnot_pd(on_grid, _mm256_cmp_pd(dist, tauv, _CMP_LT_OQ));
    const int logged = _mm256_movemask_pd(logged_v);
    const int down = logged & _mm256_movemask_pd(_mm256_cmp_pd(_mm256_cvtps_pd(nearv), lo, _CMP_EQ_OQ));
    _mm_storeu_ps(y + e, nearv);
    const auto bytes =
        static_cast<uint32_t>(decision_bytes(static_cast<unsigned>(logged), static_cast<unsigned>(down)));
    std::memcpy(d + e, &bytes, 4);
    // Lanes on the float32 grid that grid_fast refuses: the per-value rules.
    if (const int slow = _mm_movemask_ps(_mm_castsi128_ps(special)) & ~below_lanes)
      round_slow_lanes(static_cast<unsigned>(slow), 4, x + e, q ? q + e : nullptr, tau, y + e, d + e);
  }
  round_run_scalar(x + e, q ? q + e : nullptr, n - e, tau, y + e, d + e);
}
#endif

/// round_run_scalar on the widest path this CPU has (the same bits on every path).
void round_run(const double* x, const double* q, size_t n, double tau, float* y, uint8_t* d) {
#if defined(__x86_64__)
  if (active_simd_path() == SimdPath::Avx512) return round_run_avx512(x, q, n, tau, y, d);
  if (active_simd_path() == SimdPath::Avx2) return round_run_avx2(x, q, n, tau, y, d);
#endif
  round_run_scalar(x, q, n, tau, y, d);
}

}  // namespace

namespace {

/// Five decisions d[0..5) (each 0, 1 or 2) as one byte of pack_trits, d[0] the least significant digit:
/// the five bytes, read as one little-endian integer x = Σ d[k]·2^(8k), times Σ_k 3^(4−k)·2^(8k) hold
/// Σ d[k]·3^k in their fifth byte (bits 32–39, exact modulo 2^64). No byte of the product below it
/// exceeds 2·(1 + 3 + 9 + 27 + 81) = 242 < 256, so no carry reaches it. Reads 8 bytes from d.
inline uint8_t pack5(const uint8_t* d) {
  uint64_t x;
  std::memcpy(&x, d, 8);
  return static_cast<uint8_t>((x & 0xffffffffffull) * 0x0103091b51ull >> 32);
}

/// Values per run of round_node: a multiple of 5 (a run packs whole bytes of trits), and small enough
/// that the run's quanta (16 KiB) and decisions (2 KiB) stay in the L1 cache between the rounding and
/// the packing.
constexpr size_t kRun = 2040;

/// round_outputs_logged over checked arguments: output i's quanta from quanta[i] (empty: none) or, for
/// output 0 with `factors`, made a run at a time. The node's values are one sequence across its outputs
/// (the log's order), rounded and packed in runs of kRun values, the runs on the pool: every value and
/// every byte is computed on its own, so the split changes no bit.
RoundingLog round_node(std::span<const std::vector<double>> values, std::span<Tensor* const> out, double tau,
                       std::span<const std::vector<double>> quanta, const QuantaFactors* factors,
                       ThreadPool* pool) {
  std::vector<size_t> first(values.size() + 1, 0);  // output i's values are [first[i], first[i + 1])
  for (size_t i = 0; i < values.size(); ++i) first[i + 1] = first[i] + values[i].size();
  const size_t count = first.back();
  RoundingLog log{count, std::vector<uint8_t>((count + 4) / 5)};  // every byte is written below
  uint8_t* const packed = log.packed.data();
  const auto run = [&](int64_t r0, int64_t r1) {
    thread_local std::array<double, kRun> made_quanta;
    thread_local std::array<uint8_t, kRun + 8> decided;  // + 8: pack5 reads past the last five
    for (auto r = static_cast<size_t>(r0); r < static_cast<size_t>(r1); ++r) {
      const size_t g0 = r * kRun, g1 = std::min(count, g0 + kRun);
      bool none_logged = true;  // only outputs with τ = 0 and no quanta: nothing can be logged
      for (size_t i = 0; i < values.size(); ++i) {
        const size_t a = std::max(g0, first[i]), b = std::min(g1, first[i + 1]);
        if (a >= b) continue;
        const size_t s = a - first[i], n = b - a;
        const double* x = values[i].data() + s;
        float* y = out[i]->values().data() + s;
        uint8_t* d = decided.data() + (a - g0);
        const double* q = i < quanta.size() && !quanta[i].empty() ? quanta[i].data() + s : nullptr;
        if (i == 0 && factors != nullptr && !factors->empty()) {
          factors->fill(s, s + n, made_quanta.data());
          round_run(x, made_quanta.data(), n, tau, y, d);
          none_logged = false;
        } else if (tau == 0 && q == nullptr) {  // nothing is ever near enough to log
          for (size_t j = 0; j < n; ++j) y[j] = static_cast<float>(x[j]);
          std::fill_n(d, n, uint8_t{0});
        } else {
          round_run(x, q, n, tau, y, d);
          none_logged = false;
        }
      }
      // pack_trits: five decisions per byte, the first the least significant digit; the last byte of
      // the node holds count mod 5 of them.
      const size_t bytes = (g1 - g0 + 4) / 5;
      uint8_t* p = packed + g0 / 5;
      if (none_logged) {
        std::fill_n(p, bytes, uint8_t{0});
        continue;
      }
      std::fill(decided.begin() + static_cast<std::ptrdiff_t>(g1 - g0), decided.begin() + 5 * bytes, 0);
      for (size_t j = 0; j < bytes; ++j) p[j] = pack5(decided.data() + 5 * j);
    }
  };
  const auto runs = static_cast<int64_t>((count + kRun - 1) / kRun);
  if (pool)
    pool->parallel_for(runs, run, 8);  // 8 runs (16 K values) at least to a thread
  else
    run(0, runs);
  return log;
}

}  // namespace

void QuantaFactors::fill(size_t begin, size_t end, double* q) const {
  if (begin >= end) return;
  size_t r = begin / columns, c = begin % columns;
  for (size_t e = begin; e < end; ++r, c = 0) {
    const size_t n = std::min(columns - c, end - e);
    const double f = rows[r];
    const double* col = cols.data() + (r / rows_per_group) * columns + c;
    double* out = q + (e - begin);
    if (bias.empty()) {
      for (size_t j = 0; j < n; ++j) {
        const double p = f * col[j];
        out[j] = p < 0x1p-149 ? 0.0 : p;
      }
    } else {
      const double* b = bias.data() + c;
      for (size_t j = 0; j < n; ++j) {
        double p = f * col[j];
        if (p > 0 && b[j] > 0) p = 2 * std::max(p, b[j]);
        out[j] = p < 0x1p-149 ? 0.0 : p;
      }
    }
    e += n;
  }
}

double QuantaFactors::max() const {
  if (rows_per_group == 0 || columns == 0) return 0;
  // A quantum grows with its row factor: each group's largest row factor gives its largest quanta.
  double largest = 0;
  for (size_t g = 0; g * rows_per_group < rows.size(); ++g) {
    const auto first = rows.begin() + static_cast<std::ptrdiff_t>(g * rows_per_group);
    const auto last =
        rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), (g + 1) * rows_per_group));
    const double f = *std::max_element(first, last);
    for (size_t c = 0; c < columns; ++c) {
      double p = f * cols[g * columns + c];
      if (!bias.empty() && p > 0 && bias[c] > 0) p = 2 * std::max(p, bias[c]);
      largest = std::max(largest, p < 0x1p-149 ? 0.0 : p);
    }
  }
  return largest;
}

RoundingLog round_outputs_logged(std::span<const std::vector<double>> values, std::span<Tensor* const> out,
                                 double tau, std::span<const std::vector<double>> quanta, ThreadPool* pool) {
  check_tau(tau);
  check_quanta(values, quanta);
  return round_node(values, out, tau, quanta, nullptr, pool);
}

RoundingLog round_outputs_logged(std::span<const std::vector<double>> values, std::span<Tensor* const> out,
                                 double tau, const QuantaFactors& quanta, ThreadPool* pool) {
  check_tau(tau);
  if (!quanta.empty()) {
    const size_t groups = quanta.rows_per_group == 0
                              ? 0
                              : (quanta.rows.size() + quanta.rows_per_group - 1) / quanta.rows_per_group;
    if (values.empty() || quanta.size() != values[0].size() || groups == 0 ||
        quanta.cols.size() != groups * quanta.columns ||
        (!quanta.bias.empty() && quanta.bias.size() != quanta.columns))
      throw OpError("rounding log: quanta factors do not match output 0's " +
                    std::to_string(values.empty() ? 0 : values[0].size()) + " values");
    check_quantum(quanta.max());
  }
  return round_node(values, out, tau, {}, &quanta, pool);
}

std::optional<uint64_t> round_outputs_replayed(std::span<const std::vector<double>> values,
                                               const RoundingLog& log, std::span<Tensor* const> out,
                                               double tau, std::span<const std::vector<double>> quanta) {
  check_tau(tau);
  check_quanta(values, quanta);
  size_t count = 0;
  for (const std::vector<double>& v : values) count += v.size();
  if (log.count != count)
    throw OpError("rounding log: " + std::to_string(log.count) + " decisions for " + std::to_string(count) +
                  " output values");
  // unpack_trits' checks (the size, bytes ≤ 242, no digit past the count), without its vector: it
  // throws with its own message where one fails.
  bool valid = log.packed.size() == (count + 4) / 5;
  for (size_t j = 0; valid && j < log.packed.size(); ++j) valid = log.packed[j] <= 242;
  constexpr unsigned kPow3[5] = {1, 3, 9, 27, 81};  // the last byte's bound with count % 5 digits
  if (valid && count % 5 != 0 && log.packed.back() >= kPow3[count % 5]) valid = false;
  if (!valid) (void)unpack_trits(log.packed, count);
  const auto& trits = trit_table();
  uint64_t k = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::span<float> y = out[i]->values();
    const double* x = values[i].data();
    const size_t n = values[i].size();
    const double* q = i < quanta.size() && !quanta[i].empty() ? quanta[i].data() : nullptr;
    for (size_t e = 0; e < n; ++e, ++k) {
      const Rounding d = trits[log.packed[k / 5]][k % 5];
      const double qe = q ? q[e] : 0.0;
      double lo = 0, hi = 0;
      float near = 0;
      if (!grid_fast(x[e], qe, lo, hi, near)) {
        if (!allowed_unchecked(x[e], d, tau, qe)) return k;
        y[e] = replayed_unchecked(x[e], d, qe);
        continue;
      }
      const double distance = distance_fast(x[e], lo, hi);
      if (d == Rounding::Nearest) {
        if (!(distance >= tau / 2)) return k;
        y[e] = near;
      } else {
        if (!(distance < 1.5 * tau)) return k;
        y[e] = static_cast<float>(d == Rounding::Down ? lo : hi);
      }
    }
  }
  return std::nullopt;
}

}  // namespace tribunal
