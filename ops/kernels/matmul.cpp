// Matrix multiply under the RepOps dot-product contract (docs/numerics.md): a packed, register-blocked GEMM
// in the BLIS/GotoBLAS layout whose micro-kernels keep every output element ONE fma chain over k = 0..K-1.
//
// Why it is bitwise identical to matmul_reference on every path and thread count:
//  * a register tile holds one accumulator lane per output element; lane (i, j) only ever sees
//    acc = fma(A(i,p), B(p,j), acc) for increasing p — SIMD runs different elements side by side,
//    never different k of one element;
//  * K is cut into kc blocks only to keep panels in cache; between blocks the accumulator is stored to
//    C and reloaded (a float store/load is exact), so the chain simply continues. Partial sums of
//    different k ranges are never added together (no split-K, no reassociation);
//  * threads split the output into disjoint column or row ranges; the chain of an element does not
//    depend on which range or tile it lands in;
//  * packing copies floats (exact); edge lanes past N are masked, edge rows past M get their own
//    kernel instantiation, so nothing outside the matrix is ever stored.
// Layout follows Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication" (TOMS 2008)
// and the BLIS micro-kernel design (Van Zee & van de Geijn, TOMS 2015).
#include "ops/kernels/matmul.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ops/kernels/scratch.h"
#include "ops/tensor.h"

namespace tribunal {

namespace {

void check_args(const MatmulArgs& x) {
  if (x.m < 0 || x.n < 0 || x.k < 0) {
    throw OpError("matmul: negative shape m=" + std::to_string(x.m) + " n=" + std::to_string(x.n) +
                  " k=" + std::to_string(x.k));
  }
  if ((x.m > 0 && x.n > 0 && x.c == nullptr) || (x.m > 0 && x.k > 0 && x.a == nullptr) ||
      (x.k > 0 && x.n > 0 && x.b == nullptr)) {
    throw OpError("matmul: null operand pointer for a non-empty matrix");
  }
}

/// op(A)(i, p) and op(B)(p, j) exactly as the header defines them.
inline float a_at(const MatmulArgs& x, int64_t i, int64_t p) {
  return x.trans_a ? x.a[p * x.m + i] : x.a[i * x.k + p];
}
inline float b_at(const MatmulArgs& x, int64_t p, int64_t j) {
  return x.trans_b ? x.b[j * x.k + p] : x.b[p * x.n + j];
}

}  // namespace

void matmul_reference(const MatmulArgs& x) {
  check_args(x);
  for (int64_t i = 0; i < x.m; ++i) {
    for (int64_t j = 0; j < x.n; ++j) {
      float acc = x.bias ? x.bias[j] : 0.0f;
      // std::fma is IEEE fusedMultiplyAdd (one rounding), the same operation as vfmadd*ps and NEON's fmla.
      for (int64_t p = 0; p < x.k; ++p) acc = std::fma(a_at(x, i, p), b_at(x, p, j), acc);
      x.c[i * x.n + j] = acc;
    }
  }
}

namespace {

// ---------------------------------------------------------------------------------------------------
// Micro-kernels. One call computes an mr × (nv·W) tile of C over kb steps of k:
//   acc(i, j) = load_c ? C(i, j) : (bias ? bias[j] : +0);  for p < kb: acc = fma(A(i,p), B(p,j), acc)
// then stores the n valid columns. A is read as a[i*lda + p] (row_a: op(A) rows in place) or
// a[p*lda + i] (a packed micro-panel, or op(A) = Aᵀ in place); B as b[p*ldb + j].

struct TileArgs {
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb;
  float* c;
  int64_t ldc;
  int64_t kb;
  const float* bias;  ///< start values when !load_c (null: +0)
  bool load_c;        ///< continue the chains already stored in C (a later kc block)
  int n;              ///< valid columns, 1..nv·W
};

using TileKernel = void (*)(const TileArgs&);

// One kernel template per ISA of the build's architecture, instantiated for every row count 1..MR (edge rows
// of C get an exact-size kernel instead of padding) and 1..NV vectors (a narrow N uses one vector). kMasked:
// the last vector is partial (n is not a multiple of W); masked loads never touch memory past the valid
// lanes.

#if defined(__x86_64__)
__attribute__((target("avx2,fma"), always_inline)) inline __m256 load_avx2(const float* p, __m256i mask,
                                                                           bool masked) {
  return masked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}

/// AVX2 + FMA: 8-float vectors, up to a 6 × 16 tile (12 ymm accumulators, 2 for B, 1 broadcast).
template <int MR, int NV, bool kRowA, bool kMasked>
__attribute__((target("avx2,fma"))) void tile_avx2(const TileArgs& t) {
  constexpr int W = 8;
  __m256i mask[NV];
  bool partial[NV];
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    mask[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(t.n - v * W), lane);
    partial[v] = kMasked && v == NV - 1;
  }
  __m256 acc[MR][NV];
  if (t.load_c) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = load_avx2(t.c + i * t.ldc + v * W, mask[v], partial[v]);
  } else {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m256 init = t.bias ? load_avx2(t.bias + v * W, mask[v], partial[v]) : _mm256_setzero_ps();
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) acc[i][v] = init;
    }
  }
  const float* a = t.a;
  const float* b = t.b;
  const int64_t lda = t.lda, ldb = t.ldb, kb = t.kb;
  for (int64_t p = 0; p < kb; ++p) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = load_avx2(b + v * W, mask[v], partial[v]);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m256 av = _mm256_broadcast_ss(kRowA ? a + i * lda : a + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);  // the next k, in order
    }
    a += kRowA ? 1 : lda;
    b += ldb;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = t.c + i * t.ldc + v * W;
      if (partial[v]) {  // vmaskmovps stores are microcoded on AMD: spill the vector and copy instead
        alignas(32) float lanes[W];
        _mm256_store_ps(lanes, acc[i][v]);
        for (int l = 0; l < t.n - v * W; ++l) dst[l] = lanes[l];
      } else {
        _mm256_storeu_ps(dst, acc[i][v]);
      }
    }
}

/// AVX-512F: 16-float vectors, up to a 14 × 32 tile (28 zmm accumulators, 2 for B, 1 broadcast).
/// C and bias go through k-masks (cheap here); B loads are unmasked on full tiles, which measured faster.
/// Each B row is prefetched kPrefetchRows rows ahead (2 KiB in a packed 32-wide micro-panel; past a
/// panel's end, the next panel's start): the hardware prefetchers alone left the kernel waiting on L2
/// for the B micro-panel it streams (3-6 % on GPT-2-small's products on a Xeon of family 6 model 207,
/// docs/performance.md "Matmul"; the AVX2 kernel's showed no gain). A prefetch never faults, so one
/// past the matrix's end is harmless.
constexpr int64_t kPrefetchRows = 16;

template <int MR, int NV, bool kRowA, bool kMasked>
__attribute__((target("avx512f"))) void tile_avx512(const TileArgs& t) {
  constexpr int W = 16;
  __mmask16 mask[NV];
  bool partial[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    const int rem = t.n - v * W;
    mask[v] = rem >= W ? __mmask16(0xFFFF) : __mmask16((1u << std::max(rem, 0)) - 1u);
    partial[v] = kMasked && v == NV - 1;
  }
  __m512 acc[MR][NV];
  if (t.load_c) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_maskz_loadu_ps(mask[v], t.c + i * t.ldc + v * W);
  } else {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m512 init = t.bias ? _mm512_maskz_loadu_ps(mask[v], t.bias + v * W) : _mm512_setzero_ps();
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) acc[i][v] = init;
    }
  }
  const float* a = t.a;
  const float* b = t.b;
  const int64_t lda = t.lda, ldb = t.ldb, kb = t.kb;
  const int64_t ahead = kPrefetchRows * ldb;
  for (int64_t p = 0; p < kb; ++p) {
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      _mm_prefetch(reinterpret_cast<const char*>(b + ahead + v * W), _MM_HINT_T0);
      bv[v] = partial[v] ? _mm512_maskz_loadu_ps(mask[v], b + v * W) : _mm512_loadu_ps(b + v * W);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512 av = _mm512_set1_ps(kRowA ? a[i * lda] : a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);  // the next k, in order
    }
    a += kRowA ? 1 : lda;
    b += ldb;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(t.c + i * t.ldc + v * W, mask[v], acc[i][v]);
}

#endif  // __x86_64__

#if defined(__aarch64__)
/// The first n (1..4) floats at p, +0 in the other lanes (NEON has no masked load; only edge tiles).
inline float32x4_t loadn_neon(const float* p, int n) {
  float lanes[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::memcpy(lanes, p, static_cast<size_t>(n) * sizeof(float));
  return vld1q_f32(lanes);
}

/// AArch64 Advanced SIMD: 4-float vectors, up to an 8 × 8 tile (16 of the 32 q registers accumulate,
/// 2 for B, 1 broadcast). vfmaq_f32 is FMLA: acc + a·b with one rounding, the chain's fma.
template <int MR, int NV, bool kRowA, bool kMasked>
void tile_neon(const TileArgs& t) {
  constexpr int W = 4;
  int valid[NV];
  bool partial[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) {
    valid[v] = t.n - v * W;
    partial[v] = kMasked && v == NV - 1;
  }
  auto load = [&](const float* p, int v) { return partial[v] ? loadn_neon(p, valid[v]) : vld1q_f32(p); };
  float32x4_t acc[MR][NV];
  if (t.load_c) {
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = load(t.c + i * t.ldc + v * W, v);
  } else {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const float32x4_t init = t.bias ? load(t.bias + v * W, v) : vdupq_n_f32(0.0f);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) acc[i][v] = init;
    }
  }
  const float* a = t.a;
  const float* b = t.b;
  const int64_t lda = t.lda, ldb = t.ldb, kb = t.kb;
  for (int64_t p = 0; p < kb; ++p) {
    float32x4_t bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = load(b + v * W, v);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const float32x4_t av = vdupq_n_f32(kRowA ? a[i * lda] : a[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = vfmaq_f32(acc[i][v], av, bv[v]);  // the next k, in order
    }
    a += kRowA ? 1 : lda;
    b += ldb;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = t.c + i * t.ldc + v * W;
      if (partial[v]) {
        float lanes[W];
        vst1q_f32(lanes, acc[i][v]);
        std::memcpy(dst, lanes, static_cast<size_t>(valid[v]) * sizeof(float));
      } else {
        vst1q_f32(dst, acc[i][v]);
      }
    }
}
#endif  // __aarch64__

/// A register-tile shape and its kernels, one per (rows, vectors, A layout, full/partial).
struct KernelSet {
  int mr;     ///< rows of a full tile
  int width;  ///< floats per vector
  int nv;     ///< vectors per full tile row
  TileKernel (*select)(int rows, int vectors, bool row_a, bool full);
};

template <template <int, int, bool, bool> class K, int NV, bool kRowA, bool kFull, int... I>
constexpr std::array<TileKernel, sizeof...(I)> kernel_row(std::integer_sequence<int, I...>) {
  return {K<I + 1, NV, kRowA, kFull>::fn...};
}

#if defined(__x86_64__)
template <int MR, int NV, bool kRowA, bool kFull>
struct Avx2Kernel {
  static constexpr TileKernel fn = &tile_avx2<MR, NV, kRowA, !kFull>;
};
template <int MR, int NV, bool kRowA, bool kFull>
struct Avx512Kernel {
  static constexpr TileKernel fn = &tile_avx512<MR, NV, kRowA, !kFull>;
};
#elif defined(__aarch64__)
template <int MR, int NV, bool kRowA, bool kFull>
struct NeonKernel {
  static constexpr TileKernel fn = &tile_neon<MR, NV, kRowA, !kFull>;
};
#endif

/// Table [row_a][full][vectors-1][rows-1] of the kernel template K with MR rows and 2 vectors.
template <template <int, int, bool, bool> class K, int MR>
struct KernelTable {
  using Rows = std::make_integer_sequence<int, MR>;
  using ByRows = std::array<TileKernel, MR>;
  static constexpr std::array<std::array<std::array<ByRows, 2>, 2>, 2> table = {{
      {{{{kernel_row<K, 1, false, false>(Rows{}), kernel_row<K, 2, false, false>(Rows{})}},
        {{kernel_row<K, 1, false, true>(Rows{}), kernel_row<K, 2, false, true>(Rows{})}}}},
      {{{{kernel_row<K, 1, true, false>(Rows{}), kernel_row<K, 2, true, false>(Rows{})}},
        {{kernel_row<K, 1, true, true>(Rows{}), kernel_row<K, 2, true, true>(Rows{})}}}},
  }};
  static TileKernel select(int rows, int vectors, bool row_a, bool full) {
    return table[row_a][full][vectors - 1][rows - 1];
  }
};

#if defined(__x86_64__)
constexpr int kAvx2Mr = 6, kAvx512Mr = 14;
static_assert(kAvx512Mr <= 16, "copy_panel_rows copies at most 16 floats a row");
const KernelSet kAvx2Set{kAvx2Mr, 8, 2, &KernelTable<Avx2Kernel, kAvx2Mr>::select};
const KernelSet kAvx512Set{kAvx512Mr, 16, 2, &KernelTable<Avx512Kernel, kAvx512Mr>::select};
#elif defined(__aarch64__)
constexpr int kNeonMr = 8;
const KernelSet kNeonSet{kNeonMr, 4, 2, &KernelTable<NeonKernel, kNeonMr>::select};
#endif

/// The kernel set of a SIMD path (null for Scalar, and for paths this architecture does not compile,
/// which are never active: simd_path_available refuses them).
const KernelSet* kernel_set(SimdPath path) {
  switch (path) {
#if defined(__x86_64__)
    case SimdPath::Avx2:
      return &kAvx2Set;
    case SimdPath::Avx512:
      return &kAvx512Set;
#elif defined(__aarch64__)
    case SimdPath::Neon:
      return &kNeonSet;
#endif
    default:
      return nullptr;
  }
}

// ---------------------------------------------------------------------------------------------------
// Blocked driver, shared by the SIMD paths. Loop nest (per thread, on its own output range):
//   jc: nc columns of C     (the B block, kc × nc, packed once per (jc, pc) or read in place)
//   pc: kc steps of k       (chains continue through C between blocks)
//   ir: one MR-row micro-panel of op(A) (packed on the fly, reused by every jr)
//   jr: one NR-column micro-panel of the B block → micro-kernel

// kc × nc is the B block every A micro-panel of a thread's range meets; kc is also the length of the
// chains between two C reloads (a block size never changes a result: the chains continue through C).
// Chosen by measurement (bench_matmul, docs/performance.md "Matmul"): on Zen 4 (32 KiB L1, 1 MiB L2)
// the kernel is fma-bound and kc = 512 (larger blocks, fewer C reloads, less A repacking) beat keeping
// the B block in L2, AMD's L3 streaming it fast enough; on Intel's server cores (a Xeon of family 6
// model 167: 48 KiB L1, 2 MiB L2, a mesh L3) kc = 256 was 3-10 % faster on the products of K ≥ 1024
// (square_1024, GPT-2-small's weight gradients): a 1 MiB B block stays in L2 and the 14 KiB A
// micro-panel in L1 beside the B micro-panel it meets. Except where one block of 512 takes all of K
// (k ≤ 512) and 512 rows of the thread's block_cols columns fit in 512 KiB (≤ 256 columns, a quarter of
// the L2): C is then written once, never reloaded, 1.07-1.11× on gpt_chars' [2048 × 512]·[512 × 128]
// (either B layout, 1 and 2 threads, operands out of the caches, a Xeon of model 207). Blocks of 512
// for a longer K measured 0.96-1.04× on narrow products there, so those keep 256.
int64_t k_block([[maybe_unused]] int64_t k, [[maybe_unused]] int64_t block_cols) {
  constexpr int64_t kBlock = 512;
#if defined(__x86_64__)
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  constexpr int64_t kIntelBlock = 256, kNarrowCols = 256;  // 512 rows of 256 columns: 512 KiB
  if (intel && !(k <= kBlock && block_cols <= kNarrowCols)) return kIntelBlock;
#endif
  return kBlock;
}
constexpr int64_t kNc = 1024;
// Non-transposed B is read in place unless enough A panels reuse it to pay for the copy: a packed
// micro-panel is contiguous, where in-place rows N·4 bytes apart fall into few cache sets when that
// stride is a multiple of 1 KiB (N a multiple of 256: at most 4 of the L1's 64 sets per line of the
// panel's width), so a 256-row micro-panel no longer stays in L1 beside the A micro-panel. Such a B
// is packed from 64 rows of A on: `bench_matmul --operand-sets 16` (operands out of the caches, as in
// a training step) measured 1.2-1.6× on gpt_chars' 128 × 512 and 128 × 256 weight gradients (each
// thread's 64-70 rows of the latter on two threads) and 1.02-1.09× on the MLP's 64 × 256 × 784, which
// lost 10-18 % with its operands in cache; 14 and 28 rows lost 35-46 % in cache (docs/performance.md
// "Matmul").
constexpr int64_t kPackBMinRows = 256;
constexpr int64_t kPackAliasedBMinRows = 64;

bool pack_b_block_for(const MatmulArgs& x, int64_t rows) {
  if (x.trans_b || rows >= kPackBMinRows) return true;
  return x.n % 256 == 0 && rows >= kPackAliasedBMinRows;
}

// Packing only copies floats, so it cannot change a result; it only has to be fast. On x86-64 both SIMD
// paths need AVX2 (the AVX-512 path is offered only with it), so the packers use AVX2 8×8 transposes;
// on AArch64, NEON 4×4 transposes.

#if defined(__x86_64__)

/// dst[q·ldd + r] = src[r·lds + q] for r < rows (≤ 8) and q < 8: an 8×8 transpose. Lanes r ≥ rows of
/// each destination row are left untouched (masked store), source rows r ≥ rows are never read.
__attribute__((target("avx2,fma"))) void transpose_8x8(const float* src, int64_t lds, float* dst, int64_t ldd,
                                                       int rows) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = i < rows ? _mm256_loadu_ps(src + i * lds) : _mm256_setzero_ps();
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  const __m256 out[8] = {_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
                         _mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
                         _mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
                         _mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31)};
  if (rows == 8) {
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + q * ldd, out[q]);
  } else {
    const __m256i mask =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) _mm256_maskstore_ps(dst + q * ldd, mask, out[q]);
  }
}

/// dst[q·ldd + r] = src[r·lds + q] for r < rows, q < cols: transpose of a rows × cols block.
__attribute__((target("avx2,fma"))) void transpose_block(const float* src, int64_t lds, int64_t rows,
                                                         int64_t cols, float* dst, int64_t ldd) {
  for (int64_t r0 = 0; r0 < rows; r0 += 8) {
    const int r = static_cast<int>(std::min<int64_t>(8, rows - r0));
    int64_t q0 = 0;
    for (; q0 + 8 <= cols; q0 += 8) transpose_8x8(src + r0 * lds + q0, lds, dst + q0 * ldd + r0, ldd, r);
    for (int64_t q = q0; q < cols; ++q)
      for (int64_t i = r0; i < r0 + r; ++i) dst[q * ldd + i] = src[i * lds + q];
  }
}

#else
/// dst[q·ldd + r] = src[r·lds + q] for r < rows, q < cols: transpose of a rows × cols block, 4 × 4 at
/// a time on AArch64 (vtrn + combine); the ragged edges, and other architectures, element by element.
void transpose_block(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst, int64_t ldd) {
  int64_t r0 = 0;
#if defined(__aarch64__)
  for (; r0 + 4 <= rows; r0 += 4) {
    int64_t q0 = 0;
    for (; q0 + 4 <= cols; q0 += 4) {
      const float* s = src + r0 * lds + q0;
      const float32x4x2_t t01 = vtrnq_f32(vld1q_f32(s), vld1q_f32(s + lds));
      const float32x4x2_t t23 = vtrnq_f32(vld1q_f32(s + 2 * lds), vld1q_f32(s + 3 * lds));
      float* d = dst + q0 * ldd + r0;
      vst1q_f32(d, vcombine_f32(vget_low_f32(t01.val[0]), vget_low_f32(t23.val[0])));
      vst1q_f32(d + ldd, vcombine_f32(vget_low_f32(t01.val[1]), vget_low_f32(t23.val[1])));
      vst1q_f32(d + 2 * ldd, vcombine_f32(vget_high_f32(t01.val[0]), vget_high_f32(t23.val[0])));
      vst1q_f32(d + 3 * ldd, vcombine_f32(vget_high_f32(t01.val[1]), vget_high_f32(t23.val[1])));
    }
    for (int64_t q = q0; q < cols; ++q)
      for (int64_t i = r0; i < r0 + 4; ++i) dst[q * ldd + i] = src[i * lds + q];
  }
#endif
  for (int64_t q = 0; q < cols; ++q)
    for (int64_t i = r0; i < rows; ++i) dst[q * ldd + i] = src[i * lds + q];
}
#endif

/// Packs op(B)(pc..pc+kb, jc..jc+nc) as nr-wide panels: panel q holds B(pc+p, jc+q·nr+j) at
/// dst[q·nr·kb + p·nr + j]. Columns past nc in the last panel are left unset (the kernel masks them).
void pack_b_block(const MatmulArgs& x, int64_t pc, int64_t kb, int64_t jc, int64_t nc, int nr, float* dst) {
  for (int64_t jr = 0; jr < nc; jr += nr) {
    const int64_t w = std::min<int64_t>(nr, nc - jr);
    float* panel = dst + jr * kb;
    if (!x.trans_b) {
      const float* src = x.b + pc * x.n + jc + jr;
      for (int64_t p = 0; p < kb; ++p) std::memcpy(panel + p * nr, src + p * x.n, sizeof(float) * w);
    } else {  // B(p, j) = b[j*K + p]: the panel is the transpose of w rows of b
      transpose_block(x.b + (jc + jr) * x.k + pc, x.k, w, kb, panel, nr);
    }
  }
}

// Slack after a packed A micro-panel, in floats: copy_panel_rows' stores run up to 16 floats from
// the start of a row, past the panel's last row.
constexpr int64_t kPanelSlack = 16;

#if defined(__x86_64__)
/// dst[p·ldd + i] = src[p·lds + i] for p < rows, i < n ≤ 16; dst has kPanelSlack floats after its last
/// row. Packs a micro-panel of op(A) = Aᵀ. A memcpy of a run-time size is a libc call per 56-byte row
/// (with it, memmove was 19 % of the GEMM micro-kernel's perf samples in gpt_chars steps, 8.7 % without:
/// docs/performance.md "Matmul"). Loads are masked (never past the matrix); stores are whole vectors
/// (masked stores are microcoded on AMD) that spill into the next row before it is written, and past
/// the last row into the slack.
__attribute__((target("avx2,fma"))) void copy_panel_rows(const float* src, int64_t lds, int64_t rows, int n,
                                                         float* dst, int64_t ldd) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
  const __m256i hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lane);
  if (n > 8) {
    for (int64_t p = 0; p < rows; ++p) {
      _mm256_storeu_ps(dst + p * ldd, _mm256_maskload_ps(src + p * lds, lo));
      _mm256_storeu_ps(dst + p * ldd + 8, _mm256_maskload_ps(src + p * lds + 8, hi));
    }
  } else {
    for (int64_t p = 0; p < rows; ++p) _mm256_storeu_ps(dst + p * ldd, _mm256_maskload_ps(src + p * lds, lo));
  }
}
#else
void copy_panel_rows(const float* src, int64_t lds, int64_t rows, int n, float* dst, int64_t ldd) {
  for (int64_t p = 0; p < rows; ++p) std::memcpy(dst + p * ldd, src + p * lds, sizeof(float) * n);
}
#endif

/// Packs op(A)(ir..ir+mr, pc..pc+kb) as one micro-panel: A(ir+i, pc+p) at dst[p·mr_full + i]; dst has
/// kPanelSlack floats of room after the panel.
void pack_a_panel(const MatmulArgs& x, int64_t ir, int mr, int64_t pc, int64_t kb, int mr_full, float* dst) {
  if (x.trans_a) {  // A(i, p) = a[p*M + i]: already mr contiguous floats per p
    copy_panel_rows(x.a + pc * x.m + ir, x.m, kb, mr, dst, mr_full);
  } else {
    transpose_block(x.a + ir * x.k + pc, x.k, mr, kb, dst, mr_full);
  }
}

/// Computes C[m0..m1, n0..n1) on the calling thread.
void gemm_range(const MatmulArgs& x, const KernelSet& ks, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  const int nr = ks.width * ks.nv;
  const int64_t ncols = n1 - n0;
  const int64_t ncb = std::min<int64_t>(kNc, ncols);
  // K blocks of near-equal size, so the last one is not a sliver.
  const int64_t kc_max = k_block(x.k, ncb);
  const int64_t nblocks = (x.k + kc_max - 1) / kc_max;
  const int64_t kc = (x.k + nblocks - 1) / nblocks;
  // A micro-panel used by a single column panel: packing it would cost as much as using it.
  const bool pack_a = ncols > nr;
  const bool pack_b = pack_b_block_for(x, m1 - m0);

  thread_local ScratchBuffer a_buf, b_buf;
  float* ap = pack_a ? scratch(a_buf, kc * ks.mr + kPanelSlack) : nullptr;
  float* bp = pack_b ? scratch(b_buf, kc * ((ncb + nr - 1) / nr) * nr) : nullptr;

  for (int64_t jc = n0; jc < n1; jc += ncb) {
    const int64_t nc = std::min(ncb, n1 - jc);
    for (int64_t pc = 0; pc < x.k; pc += kc) {
      const int64_t kb = std::min(kc, x.k - pc);
      if (pack_b) pack_b_block(x, pc, kb, jc, nc, nr, bp);
      for (int64_t ir = m0; ir < m1; ir += ks.mr) {
        const int mr = static_cast<int>(std::min<int64_t>(ks.mr, m1 - ir));
        TileArgs t{};
        bool row_a = false;
        if (pack_a) {
          pack_a_panel(x, ir, mr, pc, kb, ks.mr, ap);
          t.a = ap;
          t.lda = ks.mr;
        } else if (x.trans_a) {
          t.a = x.a + pc * x.m + ir;
          t.lda = x.m;
        } else {
          t.a = x.a + ir * x.k + pc;
          t.lda = x.k;
          row_a = true;
        }
        t.ldb = pack_b ? nr : x.n;
        t.ldc = x.n;
        t.kb = kb;
        t.load_c = pc > 0;
        for (int64_t jr = 0; jr < nc; jr += nr) {
          const int w = static_cast<int>(std::min<int64_t>(nr, nc - jr));
          const int vectors = (w + ks.width - 1) / ks.width;
          t.b = pack_b ? bp + jr * kb : x.b + pc * x.n + jc + jr;
          t.c = x.c + ir * x.n + jc + jr;
          t.bias = x.bias ? x.bias + jc + jr : nullptr;
          t.n = w;
          ks.select(mr, vectors, row_a, w % ks.width == 0)(t);
        }
      }
    }
  }
}

/// Scalar path: the reference's per-element chains, reordered (i, p, j) so B is read along rows.
void scalar_rows(const MatmulArgs& x, int64_t m0, int64_t m1) {
  for (int64_t i = m0; i < m1; ++i) {
    float* c = x.c + i * x.n;
    for (int64_t j = 0; j < x.n; ++j) c[j] = x.bias ? x.bias[j] : 0.0f;
    for (int64_t p = 0; p < x.k; ++p) {
      const float a = a_at(x, i, p);
      for (int64_t j = 0; j < x.n; ++j) c[j] = std::fma(a, b_at(x, p, j), c[j]);
    }
  }
}

// Below this many multiply-adds per thread (~40 µs of work), waking another thread costs more than it
// saves: a parallel_for round trip measured 25-55 µs on a 2-vCPU VM whose idle workers sleep.
constexpr int64_t kMinFmaPerThread = 1 << 21;
constexpr int64_t kMinScalarFmaPerThread = 1 << 15;

// A product narrower than one vector (N < W, e.g. a 10-class head's weight gradient) fills N of the W
// lanes of each register tile. Its transpose Cᵀ = op(B)ᵀ·op(A)ᵀ is M wide, and each of its elements is
// C's chain with the factors of every fma swapped, which fma's exactness makes the same value (a NaN's
// payload aside: docs/numerics.md compares NaNs canonically). So such a product is computed as Cᵀ into
// the caller's scratch and transposed into C (exact copies). A bias is per column of C, which the
// kernels cannot add per row of Cᵀ: those stay as they are.
bool narrow(const MatmulArgs& x, const KernelSet& ks) {
  return x.bias == nullptr && x.n < ks.width && x.m >= 2 * ks.width;
}

/// The product Cᵀ (N × M) into ct: A' = op(B)ᵀ, B' = op(A)ᵀ, read in place by flipping the transposes.
MatmulArgs transposed(const MatmulArgs& x, float* ct) {
  MatmulArgs y;
  y.a = x.b;
  y.b = x.a;
  y.c = ct;
  y.m = x.n;
  y.n = x.m;
  y.k = x.k;
  y.trans_a = !x.trans_b;  // A'(j, p) = B(p, j)
  y.trans_b = !x.trans_a;  // B'(p, i) = A(i, p)
  return y;
}

void matmul_simd(const MatmulArgs& x, ThreadPool& pool, const KernelSet& ks);

/// C from Cᵀ computed by `product` into this thread's scratch.
template <typename Product>
void via_transpose(const MatmulArgs& x, Product&& product) {
  thread_local ScratchBuffer ct_buf;
  float* ct = scratch(ct_buf, x.m * x.n);
  product(transposed(x, ct));
  transpose_block(ct, x.m, x.n, x.m, x.c, x.n);  // C[i, j] = Cᵀ[j, i]
}

void matmul_simd(const MatmulArgs& x, ThreadPool& pool, const KernelSet& ks) {
  if (narrow(x, ks)) {
    via_transpose(x, [&](const MatmulArgs& y) { matmul_simd(y, pool, ks); });
    return;
  }
  const int nr = ks.width * ks.nv;
  const int64_t n_panels = (x.n + nr - 1) / nr, m_panels = (x.m + ks.mr - 1) / ks.mr;
  // Split the dimension with more micro-panels; each thread packs what it needs of the other operand.
  const bool split_n = n_panels >= m_panels;
  const int64_t units = split_n ? n_panels : m_panels;
  auto run = [&](int64_t u0, int64_t u1) {
    if (split_n) {
      gemm_range(x, ks, 0, x.m, u0 * nr, std::min(x.n, u1 * nr));
    } else {
      gemm_range(x, ks, u0 * ks.mr, std::min(x.m, u1 * ks.mr), 0, x.n);
    }
  };
  // Static partition (ops/thread_pool.h): ranges of whole micro-panels, so no tile straddles two
  // threads; small products stay on the calling thread.
  const int64_t wanted = std::max<int64_t>(1, x.m * x.n * x.k / kMinFmaPerThread);
  pool.parallel_for(units, run, std::max<int64_t>(1, units / wanted));
}

}  // namespace

void matmul(const MatmulArgs& args, ThreadPool& pool) {
  matmul(args, pool, active_simd_path());
}

namespace {

void check_path(SimdPath path) {
  require_simd_path(path, "matmul");
}

/// The degenerate shapes every path handles alike. Returns true if C is complete.
bool matmul_trivial(const MatmulArgs& x) {
  if (x.m == 0 || x.n == 0) return true;
  if (x.k == 0) {  // empty chains: C is the start value
    for (int64_t i = 0; i < x.m; ++i)
      for (int64_t j = 0; j < x.n; ++j) x.c[i * x.n + j] = x.bias ? x.bias[j] : 0.0f;
    return true;
  }
  return false;
}

/// One product on the calling thread; args checked, path available, not trivial.
void matmul_serial(const MatmulArgs& x, SimdPath path) {
  if (const KernelSet* ks = kernel_set(path)) {
    if (narrow(x, *ks))
      via_transpose(x, [&](const MatmulArgs& y) { gemm_range(y, *ks, 0, y.m, 0, y.n); });
    else
      gemm_range(x, *ks, 0, x.m, 0, x.n);
  } else {
    scalar_rows(x, 0, x.m);
  }
}

/// Batch element e of a contiguous batched product.
MatmulArgs batch_element(const MatmulArgs& x, int64_t e) {
  MatmulArgs y = x;
  y.a = x.a + e * x.m * x.k;
  y.b = x.b + e * x.k * x.n;
  y.c = x.c + e * x.m * x.n;
  return y;
}

void check_batch(const MatmulArgs& x, int64_t batch) {
  if (batch < 0) throw OpError("matmul: negative batch " + std::to_string(batch));
  if (x.bias != nullptr) throw OpError("matmul: a batched product takes no bias");
}

}  // namespace

void matmul(const MatmulArgs& args, ThreadPool& pool, SimdPath path) {
  check_args(args);
  check_path(path);
  const MatmulArgs& x = args;
  if (matmul_trivial(x)) return;
  if (const KernelSet* ks = kernel_set(path)) {
    matmul_simd(x, pool, *ks);
    return;
  }
  const int64_t grain = std::max<int64_t>(1, kMinScalarFmaPerThread / std::max<int64_t>(x.n * x.k, 1));
  pool.parallel_for(
      x.m, [&](int64_t m0, int64_t m1) { scalar_rows(x, m0, m1); }, grain);
}

void matmul_on_thread(const MatmulArgs& args, SimdPath path) {
  check_args(args);
  check_path(path);
  if (!matmul_trivial(args)) matmul_serial(args, path);
}

void matmul_batched(const MatmulArgs& args, int64_t batch, ThreadPool& pool, SimdPath path) {
  check_path(path);
  check_batch(args, batch);
  if (batch == 0) return;  // empty tensors may have no storage: nothing to check or write
  check_args(args);
  const int64_t fma = args.m * args.n * args.k;
  const int64_t min_fma = path == SimdPath::Scalar ? kMinScalarFmaPerThread : kMinFmaPerThread;
  if (batch < pool.size() && fma >= min_fma) {
    // Too few elements to occupy every thread, each big enough to split: the threaded GEMM per element.
    for (int64_t e = 0; e < batch; ++e) matmul(batch_element(args, e), pool, path);
    return;
  }
  // Whole batch elements per thread (a static partition of independent products), enough of them that
  // each thread has about min_fma multiply-adds; a trivial element (K = 0) still needs its C written.
  const int64_t grain = std::max<int64_t>(1, min_fma / std::max<int64_t>(1, fma));
  pool.parallel_for(
      batch,
      [&](int64_t e0, int64_t e1) {
        for (int64_t e = e0; e < e1; ++e) {
          const MatmulArgs y = batch_element(args, e);
          if (!matmul_trivial(y)) matmul_serial(y, path);
        }
      },
      grain);
}

void matmul_batched_reference(const MatmulArgs& args, int64_t batch) {
  check_batch(args, batch);
  for (int64_t e = 0; e < batch; ++e) matmul_reference(batch_element(args, e));
}

}  // namespace tribunal
