// Dropout and DropoutBackward (Srivastava et al., JMLR 2014, "inverted" scaling as in PyTorch).
//
//   s = 1.0f / (1.0f − p)                                   (once per node, in float)
//   keepᵢ = uniform_from_bits(philox_random(seed, Dropout, step, site·2³² + i)[0]) ≥ p
//   yᵢ = keepᵢ ? xᵢ·s : +0                                  (one multiply per kept element)
//
// The mask is a pure function of (seed, step, site, i) (ops/philox.h), so the backward node regenerates
// it instead of storing it, and any thread or SIMD lane can compute any element. The AVX2 / AVX-512 /
// NEON paths run Philox on 8 / 16 / 4 elements at once with the same 32-bit integer arithmetic (exact),
// convert the top 24 bits exactly, compare and multiply with the same IEEE operations: bitwise
// identical.
#include <cstring>
#include <string>

#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"  // the intrinsics headers and TRIBUNAL_SIMD_CASES
#include "ops/philox.h"
#include "ops/pointwise.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

/// Validated attributes of a dropout node.
struct DropoutAttrs {
  uint64_t seed;
  uint32_t step;
  uint32_t site;  ///< high word of the Philox element counter
  float p;
  float scale;  ///< 1.0f / (1.0f − p), rounded once
};

DropoutAttrs dropout_attrs(const char* op, const Attrs& attrs) {
  const int64_t step = attrs.ints[1], site = attrs.ints[2];
  const float p = attrs.floats[0];
  op_require(step >= 0 && step < (int64_t{1} << 32), op,
             "step must be in [0, 2^32), got " + std::to_string(step));
  op_require(site >= 0 && site < (int64_t{1} << 31), op,
             "site must be in [0, 2^31), got " + std::to_string(site));
  op_require(p >= 0.0f && p < 1.0f, op, "p must be in [0, 1), got " + std::to_string(p));  // also refuses NaN
  return {static_cast<uint64_t>(attrs.ints[0]), static_cast<uint32_t>(step), static_cast<uint32_t>(site), p,
          1.0f / (1.0f - p)};
}

std::vector<Shape> dropout_infer_common(const char* op, const Attrs& attrs, std::span<const Shape> in) {
  dropout_attrs(op, attrs);
  // The element index is the low counter word: 2³² elements per (step, site) stream.
  op_require(in[0].numel() < (int64_t{1} << 32), op, "at most 2^32 − 1 elements, got " + in[0].str());
  return {in[0]};
}

std::vector<Shape> dropout_infer(const Attrs& a, std::span<const Shape> in) {
  return dropout_infer_common("dropout", a, in);
}
std::vector<Shape> dropout_backward_infer(const Attrs& a, std::span<const Shape> in) {
  return dropout_infer_common("dropout_backward", a, in);
}

/// keepᵢ of the contract.
inline bool keep(const DropoutAttrs& d, int64_t i) {
  return dropout_keep(d.seed, d.step, d.site, d.p, i);
}

/// The contract, element by element, over [i0, i1).
void dropout_scalar(const DropoutAttrs& d, const float* x, float* y, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) y[i] = keep(d, i) ? x[i] * d.scale : 0.0f;
}

// ---- SIMD Philox4x32-10: lanes are consecutive elements i (counter word 0); words 1..3 and the key
// are the same in every lane. mulhi/mullo of 32-bit words are exact integer operations.

[[maybe_unused]] constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u,
                                    kW1 = 0xBB67AE85u;
[[maybe_unused]] constexpr float kTwoM24 = 5.9604644775390625e-8f;  // 2^-24, as in uniform_from_bits

#if defined(__x86_64__)

/// What the x86 paths compute once per node: only counter word 0 (the element's low word) differs
/// between the lanes of a block, so in Philox's first two rounds the products of the other words are the
/// same for every lane. Rounds are numbered from 1 here; words after round r are written w·_after_r.
///   round 1: w0 = hi(M1·step) ^ site ^ k0₁ and w1 = lo(M1·step) (uniform); w2 = hi(M0·c0) ^ purpose ^ k1₁,
///            w3 = lo(M0·c0) (per lane)
///   round 2: w0 = hi(M1·w2) ^ w1 ^ k0₂, w1 = lo(M1·w2) (per lane); w2 = hi(M0·w0) ^ w3 ^ k1₂ (per lane),
///            w3 = lo(M0·w0) (uniform)
/// so a block needs 18 products instead of 20, and rounds 3..10 run as in ops/philox.h.
struct DropoutRounds {
  uint32_t k0[10], k1[10];  ///< the round keys
  uint32_t round1_w2_key;   ///< w2 after round 1 = hi(M0·c0) ^ this
  uint32_t round2_w0_key;   ///< w0 after round 2 = hi(M1·w2) ^ this
  uint32_t round2_w2_key;   ///< w2 after round 2 = w3 after round 1 ^ this
  uint32_t w3_after_2;      ///< uniform
};

DropoutRounds dropout_rounds(const DropoutAttrs& d) {
  DropoutRounds r;
  r.k0[0] = static_cast<uint32_t>(d.seed);
  r.k1[0] = static_cast<uint32_t>(d.seed >> 32);
  for (int i = 1; i < 10; ++i) {
    r.k0[i] = r.k0[i - 1] + kW0;
    r.k1[i] = r.k1[i - 1] + kW1;
  }
  const uint64_t step_product = uint64_t{kM1} * d.step;
  const uint32_t w0_after_1 = static_cast<uint32_t>(step_product >> 32) ^ d.site ^ r.k0[0];
  const uint32_t w1_after_1 = static_cast<uint32_t>(step_product);
  const uint64_t w0_product = uint64_t{kM0} * w0_after_1;
  r.round1_w2_key = static_cast<uint32_t>(RandomPurpose::Dropout) ^ r.k1[0];
  r.round2_w0_key = w1_after_1 ^ r.k0[1];
  r.round2_w2_key = static_cast<uint32_t>(w0_product >> 32) ^ r.k1[1];
  r.w3_after_2 = static_cast<uint32_t>(w0_product);
  return r;
}

// The x86 kernel, once for both paths: each path's namespace provides W, the lane vector vi and the
// lane operations broadcast, counters, mul_hilo, xor2, xor3 and keep_scaled.
#define TRIBUNAL_DROPOUT_KERNEL(TARGET)                                                          \
  TARGET void dropout(const DropoutAttrs& d, const float* x, float* y, int64_t i0, int64_t i1) { \
    const DropoutRounds r = dropout_rounds(d);                                                   \
    const vi m0 = broadcast(kM0), m1 = broadcast(kM1);                                           \
    int64_t i = i0;                                                                              \
    for (; i + W <= i1; i += W) {                                                                \
      vi hi0, lo0, hi1, lo1;                                                                     \
      mul_hilo(counters(i), m0, hi0, lo0); /* round 1 */                                         \
      vi c2 = xor2(hi0, broadcast(r.round1_w2_key)), c3 = lo0;                                   \
      mul_hilo(c2, m1, hi1, lo1); /* round 2 */                                                  \
      vi c0 = xor2(hi1, broadcast(r.round2_w0_key)), c1 = lo1;                                   \
      c2 = xor2(c3, broadcast(r.round2_w2_key));                                                 \
      c3 = broadcast(r.w3_after_2);                                                              \
      for (int round = 2; round < 10; ++round) {                                                 \
        mul_hilo(c0, m0, hi0, lo0);                                                              \
        mul_hilo(c2, m1, hi1, lo1);                                                              \
        c0 = xor3(hi1, c1, broadcast(r.k0[round]));                                              \
        c1 = lo1;                                                                                \
        c2 = xor3(hi0, c3, broadcast(r.k1[round]));                                              \
        c3 = lo0;                                                                                \
      }                                                                                          \
      keep_scaled(d, c0, x + i, y + i);                                                          \
    }                                                                                            \
    dropout_scalar(d, x, y, i, i1);                                                              \
  }

namespace k256 {
constexpr int W = 8;
using vi = __m256i;

TRIBUNAL_TARGET_AVX2 inline vi broadcast(uint32_t w) {
  return _mm256_set1_epi32(static_cast<int>(w));
}
/// Counter word 0 of elements i … i + W − 1.
TRIBUNAL_TARGET_AVX2 inline vi counters(int64_t i) {
  return _mm256_add_epi32(broadcast(static_cast<uint32_t>(i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/// hi and lo 32-bit halves of each lane's 32×32-bit product a·m, as k512::mul_hilo.
TRIBUNAL_TARGET_AVX2 inline void mul_hilo(vi a, vi m, vi& hi, vi& lo) {
  const vi even = _mm256_mul_epu32(a, m);                             // qword j: a[2j]·m
  const vi odd = _mm256_mul_epu32(_mm256_shuffle_epi32(a, 0xB1), m);  // qword j: a[2j+1]·m
  hi = _mm256_blend_epi32(_mm256_shuffle_epi32(even, 0xB1), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_shuffle_epi32(odd, 0xB1), 0xAA);
}
TRIBUNAL_TARGET_AVX2 inline vi xor2(vi a, vi b) {
  return _mm256_xor_si256(a, b);
}
TRIBUNAL_TARGET_AVX2 inline vi xor3(vi a, vi b, vi c) {
  return _mm256_xor_si256(_mm256_xor_si256(a, b), c);
}
/// y = keep ? x·s : +0 from Philox word 0 of each lane's element. (word >> 8) < 2^24 converts exactly
/// and × 2^-24 is exact: the same float as uniform_from_bits.
TRIBUNAL_TARGET_AVX2 inline void keep_scaled(const DropoutAttrs& d, vi word, const float* x, float* y) {
  const __m256 u = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(word, 8)), _mm256_set1_ps(kTwoM24));
  const __m256 kept = _mm256_cmp_ps(u, _mm256_set1_ps(d.p), _CMP_GE_OQ);
  const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_set1_ps(d.scale));
  _mm256_storeu_ps(y, _mm256_and_ps(v, kept));  // dropped lanes: all bits 0 = +0
}
TRIBUNAL_DROPOUT_KERNEL(TRIBUNAL_TARGET_AVX2)
}  // namespace k256

namespace k512 {
constexpr int W = 16;
using vi = __m512i;

TRIBUNAL_TARGET_AVX512 inline vi broadcast(uint32_t w) {
  return _mm512_set1_epi32(static_cast<int>(w));
}
/// Counter word 0 of elements i … i + W − 1.
TRIBUNAL_TARGET_AVX512 inline vi counters(int64_t i) {
  return _mm512_add_epi32(broadcast(static_cast<uint32_t>(i)),
                          _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}
/// hi and lo 32-bit halves of each lane's 32×32-bit product a·m. vpmuludq multiplies the even dwords;
/// the odd ones are brought down, and the halves put back in place, by dword swaps within each qword
/// (vpshufd, port 5) rather than shifts and vpmulld (port 0, which the multiplies need): the node ran
/// 1.5× as fast on the Xeon of docs/performance.md. Exact integer arithmetic either way.
TRIBUNAL_TARGET_AVX512 inline void mul_hilo(vi a, vi m, vi& hi, vi& lo) {
  const vi even = _mm512_mul_epu32(a, m);                                      // qword j: a[2j]·m
  const vi odd = _mm512_mul_epu32(_mm512_shuffle_epi32(a, _MM_PERM_CDAB), m);  // qword j: a[2j+1]·m
  hi = _mm512_mask_shuffle_epi32(odd, __mmask16(0x5555), even, _MM_PERM_CDAB);
  lo = _mm512_mask_shuffle_epi32(even, __mmask16(0xAAAA), odd, _MM_PERM_CDAB);
}
TRIBUNAL_TARGET_AVX512 inline vi xor2(vi a, vi b) {
  return _mm512_xor_si512(a, b);
}
/// a ^ b ^ c in one instruction (truth table 0x96).
TRIBUNAL_TARGET_AVX512 inline vi xor3(vi a, vi b, vi c) {
  return _mm512_ternarylogic_epi32(a, b, c, 0x96);
}
/// As k256::keep_scaled.
TRIBUNAL_TARGET_AVX512 inline void keep_scaled(const DropoutAttrs& d, vi word, const float* x, float* y) {
  const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(word, 8)), _mm512_set1_ps(kTwoM24));
  const __mmask16 kept = _mm512_cmp_ps_mask(u, _mm512_set1_ps(d.p), _CMP_GE_OQ);
  _mm512_storeu_ps(y, _mm512_maskz_mul_ps(kept, _mm512_loadu_ps(x), _mm512_set1_ps(d.scale)));  // dropped: +0
}
TRIBUNAL_DROPOUT_KERNEL(TRIBUNAL_TARGET_AVX512)
}  // namespace k512
#undef TRIBUNAL_DROPOUT_KERNEL
#endif  // __x86_64__

#if defined(__aarch64__)
namespace kneon {
/// hi and lo 32-bit halves of each lane's 32×32-bit product a·m (two widening UMULLs).
inline void mul_hilo(uint32x4_t a, uint32_t m, uint32x4_t& hi, uint32x4_t& lo) {
  const uint64x2_t p0 = vmull_u32(vget_low_u32(a), vdup_n_u32(m));
  const uint64x2_t p1 = vmull_high_u32(a, vdupq_n_u32(m));
  hi = vcombine_u32(vshrn_n_u64(p0, 32), vshrn_n_u64(p1, 32));
  lo = vcombine_u32(vmovn_u64(p0), vmovn_u64(p1));
}

void dropout(const DropoutAttrs& d, const float* x, float* y, int64_t i0, int64_t i1) {
  constexpr int W = 4;
  const uint32_t lane_index[W] = {0, 1, 2, 3};
  const uint32x4_t lane = vld1q_u32(lane_index);
  const float32x4_t p = vdupq_n_f32(d.p), scale = vdupq_n_f32(d.scale), two_m24 = vdupq_n_f32(kTwoM24);
  int64_t i = i0;
  for (; i + W <= i1; i += W) {
    uint32x4_t c0 = vaddq_u32(vdupq_n_u32(static_cast<uint32_t>(i)), lane);
    uint32x4_t c1 = vdupq_n_u32(d.site);
    uint32x4_t c2 = vdupq_n_u32(d.step);
    uint32x4_t c3 = vdupq_n_u32(static_cast<uint32_t>(RandomPurpose::Dropout));
    uint32_t k0 = static_cast<uint32_t>(d.seed), k1 = static_cast<uint32_t>(d.seed >> 32);
    for (int round = 0; round < 10; ++round) {
      if (round > 0) {
        k0 += kW0;
        k1 += kW1;
      }
      uint32x4_t hi0, lo0, hi1, lo1;
      mul_hilo(c0, kM0, hi0, lo0);
      mul_hilo(c2, kM1, hi1, lo1);
      c0 = veorq_u32(veorq_u32(hi1, c1), vdupq_n_u32(k0));
      c1 = lo1;
      c2 = veorq_u32(veorq_u32(hi0, c3), vdupq_n_u32(k1));
      c3 = lo0;
    }
    // (word >> 8) < 2^24 converts exactly; × 2^-24 is exact: the same float as uniform_from_bits.
    const float32x4_t u = vmulq_f32(vcvtq_f32_u32(vshrq_n_u32(c0, 8)), two_m24);
    const uint32x4_t kept = vcgeq_f32(u, p);
    const float32x4_t v = vmulq_f32(vld1q_f32(x + i), scale);
    vst1q_f32(y + i, vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), kept)));  // dropped: +0
  }
  dropout_scalar(d, x, y, i, i1);
}
}  // namespace kneon
#endif  // __aarch64__

// Philox costs ~10 ns per element in scalar code: threads pay off from a few thousand elements.
constexpr int64_t kDropoutGrain = int64_t{1} << 12;

template <const char* kOp>
void dropout_reference(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dropout_scalar(dropout_attrs(kOp, attrs), in[0]->data(), out[0]->data(), 0, in[0]->numel());
}

template <const char* kOp>
void dropout_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                  ThreadPool& pool) {
  const DropoutAttrs d = dropout_attrs(kOp, attrs);
  const float* x = in[0]->data();
  float* y = out[0]->data();
  const SimdPath path = active_simd_path();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::dropout(d, x, y, i0, i1))
          case SimdPath::Scalar:
            dropout_scalar(d, x, y, i0, i1);
            return;
        }
      },
      kDropoutGrain);
}

// The same mask and scale applied to the gradient: DropoutBackward with the forward's attributes.
void dropout_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::DropoutBackward, a.attrs, {a.out_grads[0]});
}

constexpr char kDropoutName[] = "dropout";
constexpr char kDropoutBackwardName[] = "dropout_backward";

}  // namespace

const OpInfo kDropoutOp{.kind = OpKind::Dropout,
                        .name = kDropoutName,
                        .num_inputs = 1,
                        .num_outputs = 1,
                        .num_ints = 3,
                        .num_floats = 1,
                        .infer = dropout_infer,
                        .reference = dropout_reference<kDropoutName>,
                        .fast = dropout_fast<kDropoutName>,
                        .vjp = dropout_vjp,
                        .float64 = f64::dropout,
                        .float64_spread = Float64Spread::Exact};
const OpInfo kDropoutBackwardOp{.kind = OpKind::DropoutBackward,
                                .name = kDropoutBackwardName,
                                .num_inputs = 1,
                                .num_outputs = 1,
                                .num_ints = 3,
                                .num_floats = 1,
                                .infer = dropout_backward_infer,
                                .reference = dropout_reference<kDropoutBackwardName>,
                                .fast = dropout_fast<kDropoutBackwardName>,
                                .vjp = nullptr,
                                .float64 = f64::dropout,
                                .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
