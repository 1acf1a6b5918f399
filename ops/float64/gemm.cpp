// The two float64 GEMMs of rounding-log mode (ops/float64/internal.h): OpenBLAS's cblas_dgemm and the
// naive triple loop, plus the names and the build query of float64.h.
//
// Naive: every C element is one sequential chain acc = acc + op(A)(i,p)·op(B)(p,j), p = 0..K−1, from
// +0 (or from C's value when accumulating), a separately rounded multiply and add per step (the build
// compiles with -ffp-contract=off, so no fma): the plain i-j-k triple loop's bits. Operands are copied
// so that op(A)'s row i and op(B)'s column j are contiguous, and 8 columns' chains run side by side
// (independent chains, so their adds overlap in the pipeline; about 3 times the plain loop's speed):
// changes of memory layout and interleaving only, each chain's terms and order are the plain loop's
// (tests/ops/test_float64.cpp checks the bits against it). No blocking of i or k for the cache.
// OpenBLAS: whatever its kernel for this CPU and thread count does (fma, register blocking, K split
// into blocks added to C): the honest "different vendor" the rounding log absorbs.
#include <algorithm>
#include <climits>
#include <string>

#include "ops/float64/internal.h"

#if defined(TRIBUNAL_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace tribunal {

const char* float64_gemm_name(Float64Gemm gemm) {
  switch (gemm) {
    case Float64Gemm::OpenBlas:
      return "openblas";
    case Float64Gemm::Naive:
      return "naive";
  }
  return "unknown";
}

Float64Gemm parse_float64_gemm(std::string_view name) {
  for (Float64Gemm g : {Float64Gemm::OpenBlas, Float64Gemm::Naive})
    if (name == float64_gemm_name(g)) return g;
  throw OpError("float64 gemm: unknown name '" + std::string(name) + "' (accepted: openblas, naive)");
}

bool float64_gemm_built(Float64Gemm gemm) {
#if defined(TRIBUNAL_HAVE_OPENBLAS)
  return gemm == Float64Gemm::OpenBlas || gemm == Float64Gemm::Naive;
#else
  return gemm == Float64Gemm::Naive;
#endif
}

namespace f64 {
namespace {

/// Output columns whose chains Naive runs side by side.
constexpr int kChains = 8;

void naive(const GemmArgs& x) {
  const int64_t m = x.m, n = x.n, k = x.k;
  // op(A) rows and op(B) columns, contiguous (copied only when stored the other way).
  std::vector<double> a_rows, b_cols;
  const double* ar = x.a;
  int64_t lda = x.lda;
  if (x.trans_a && k > 0) {
    a_rows.resize(static_cast<size_t>(m * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t i = 0; i < m; ++i) a_rows[static_cast<size_t>(i * k + p)] = x.a[p * x.lda + i];
    ar = a_rows.data();
    lda = k;
  }
  const double* bc = x.b;
  int64_t ldb = x.ldb;
  if (!x.trans_b && k > 0) {
    b_cols.resize(static_cast<size_t>(n * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j) b_cols[static_cast<size_t>(j * k + p)] = x.b[p * x.ldb + j];
    bc = b_cols.data();
    ldb = k;
  }
  for (int64_t i = 0; i < m; ++i) {
    const double* arow = ar + i * lda;
    double* crow = x.c + i * x.ldc;
    int64_t j = 0;
    // kChains outputs side by side: independent chains, each acc = acc + a·b in increasing p.
    for (; j + kChains <= n; j += kChains) {
      double acc[kChains];
      for (int r = 0; r < kChains; ++r) acc[r] = x.accumulate ? crow[j + r] : 0.0;
      const double* bcol = bc + j * ldb;
      for (int64_t p = 0; p < k; ++p) {
        const double av = arow[p];
#pragma GCC unroll 8
        for (int r = 0; r < kChains; ++r) acc[r] = acc[r] + av * bcol[r * ldb + p];
      }
      for (int r = 0; r < kChains; ++r) crow[j + r] = acc[r];
    }
    for (; j < n; ++j) {  // the last n mod kChains columns, one chain at a time
      const double* bcol = bc + j * ldb;
      double acc = x.accumulate ? crow[j] : 0.0;
      for (int64_t p = 0; p < k; ++p) acc = acc + arow[p] * bcol[p];
      crow[j] = acc;
    }
  }
}

#if defined(TRIBUNAL_HAVE_OPENBLAS)
blasint blas_int(int64_t v) {
  if (v > INT_MAX)
    throw OpError("float64 gemm: openblas: size " + std::to_string(v) + " exceeds its 32-bit integers");
  return static_cast<blasint>(v);
}

void openblas(const GemmArgs& x) {
  if (x.m == 0 || x.n == 0) return;
  if (x.k == 0) {  // C = C + 0 or C = 0; dgemm would refuse lda = 0
    if (!x.accumulate)
      for (int64_t i = 0; i < x.m; ++i) std::fill_n(x.c + i * x.ldc, x.n, 0.0);
    return;
  }
  // Leading dimensions at least the stored rows' lengths (dgemm's rule, met by any valid layout).
  const int64_t lda = std::max<int64_t>(x.lda, x.trans_a ? x.m : x.k);
  const int64_t ldb = std::max<int64_t>(x.ldb, x.trans_b ? x.k : x.n);
  cblas_dgemm(CblasRowMajor, x.trans_a ? CblasTrans : CblasNoTrans, x.trans_b ? CblasTrans : CblasNoTrans,
              blas_int(x.m), blas_int(x.n), blas_int(x.k), 1.0, x.a, blas_int(lda), x.b, blas_int(ldb),
              x.accumulate ? 1.0 : 0.0, x.c, blas_int(std::max<int64_t>(x.ldc, x.n)));
}
#endif

}  // namespace

void gemm(Float64Gemm g, const GemmArgs& args) {
  if (args.m < 0 || args.n < 0 || args.k < 0)
    throw OpError("float64 gemm: negative shape m=" + std::to_string(args.m) +
                  " n=" + std::to_string(args.n) + " k=" + std::to_string(args.k));
  switch (g) {
    case Float64Gemm::Naive:
      naive(args);
      return;
    case Float64Gemm::OpenBlas:
#if defined(TRIBUNAL_HAVE_OPENBLAS)
      openblas(args);
      return;
#else
      throw OpError("float64 gemm: this build has no OpenBLAS (use naive)");
#endif
  }
  throw OpError("float64 gemm: unknown variant " + std::to_string(static_cast<int>(g)));
}

void gemm(Float64Gemm g, const GemmArgs& args, ThreadPool& pool) {
  const int64_t row_blocks = (args.m + kFloat64GemmRowBlock - 1) / kFloat64GemmRowBlock;
  const int64_t column_blocks = (args.n + kFloat64GemmColumnBlock - 1) / kFloat64GemmColumnBlock;
  if (row_blocks * column_blocks <= 1) return gemm(g, args);
  const auto tiles = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = (t / column_blocks) * kFloat64GemmRowBlock,
                    j0 = (t % column_blocks) * kFloat64GemmColumnBlock;
      GemmArgs tile = args;
      tile.m = std::min(kFloat64GemmRowBlock, args.m - i0);
      tile.n = std::min(kFloat64GemmColumnBlock, args.n - j0);
      tile.a = args.a + (args.trans_a ? i0 : i0 * args.lda);
      tile.b = args.b + (args.trans_b ? j0 * args.ldb : j0);
      tile.c = args.c + i0 * args.ldc + j0;
      gemm(g, tile);
    }
  };
  pool.parallel_for(row_blocks * column_blocks, tiles);
}

ThreadPool& serial_pool() {
  thread_local ThreadPool pool(1);
  return pool;
}

std::span<const Tensor> fast_outputs(OpKind kind, const Call& c) {
  thread_local std::vector<Tensor> y;
  y.resize(c.out_shapes.size());
  for (size_t i = 0; i < y.size(); ++i)
    if (y[i].shape() != c.out_shapes[i] ||
        y[i].values().size() != static_cast<size_t>(c.out_shapes[i].numel()))
      y[i].reshape_storage(c.out_shapes[i]);
  std::vector<Tensor*> out;
  for (Tensor& t : y) out.push_back(&t);
  run_fast(kind, c.attrs, c.in, out, c.pool);
  return y;
}

std::vector<double> widen(const Tensor& x) {
  return {x.values().begin(), x.values().end()};
}

const double* widen(const float* x, int64_t n, std::vector<double>& into) {
  if (into.size() < static_cast<size_t>(n)) into.resize(static_cast<size_t>(n));
  std::copy_n(x, n, into.data());
  return into.data();
}

const double* widen(const Tensor& x, std::vector<double>& into, ThreadPool& pool) {
  const float* v = x.data();
  const auto n = static_cast<int64_t>(x.values().size());
  if (into.size() < static_cast<size_t>(n)) into.resize(static_cast<size_t>(n));  // grows only: no zeroing
  double* out = into.data();
  pool.parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = v[i];
      },
      kFloat64Grain);
  return out;
}

}  // namespace f64
}  // namespace tribunal
