// The float32 GEMMs of fast mode (ops/float32_gemm.h).
#include "ops/float32_gemm.h"

#include <climits>
#include <cmath>
#include <string>
#include <vector>

#if defined(TRIBUNAL_HAVE_OPENBLAS)
#include <cblas.h>
#endif

namespace tribunal {
namespace {

// C[M,N] (row-major, leading dimension ldc) = op(A)·op(B) (+ C when `accumulate`).
struct Gemm32 {
  const float* a;
  const float* b;
  float* c;
  int64_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b, accumulate;
  float at(int64_t i, int64_t p) const { return trans_a ? a[p * lda + i] : a[i * lda + p]; }
  float bt(int64_t p, int64_t j) const { return trans_b ? b[j * ldb + p] : b[p * ldb + j]; }
};

constexpr int64_t kBlock = 64;

void portable(const Gemm32& g, Float32Gemm kind) {
  // op(A) rows and op(B) columns copied contiguous, so each element's chain reads two rows.
  std::vector<float> ar(static_cast<size_t>(g.m * g.k)), bc(static_cast<size_t>(g.n * g.k));
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t p = 0; p < g.k; ++p) ar[static_cast<size_t>(i * g.k + p)] = g.at(i, p);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t p = 0; p < g.k; ++p) bc[static_cast<size_t>(j * g.k + p)] = g.bt(p, j);
  for (int64_t i = 0; i < g.m; ++i) {
    const float* x = ar.data() + i * g.k;
    for (int64_t j = 0; j < g.n; ++j) {
      const float* y = bc.data() + j * g.k;
      float acc = g.accumulate ? g.c[i * g.ldc + j] : 0.0f;
      switch (kind) {
        case Float32Gemm::Naive:
          for (int64_t p = 0; p < g.k; ++p) acc = acc + x[p] * y[p];
          break;
        case Float32Gemm::Reversed:
          for (int64_t p = g.k - 1; p >= 0; --p) acc = std::fma(x[p], y[p], acc);
          break;
        default:  // Blocked
          for (int64_t p0 = 0; p0 < g.k; p0 += kBlock) {
            float part = 0.0f;
            for (int64_t p = p0; p < std::min(g.k, p0 + kBlock); ++p) part = std::fma(x[p], y[p], part);
            acc = acc + part;
          }
      }
      g.c[i * g.ldc + j] = acc;
    }
  }
}

void gemm32(const Gemm32& g, Float32Gemm kind) {
  if (!float32_gemm_built(kind)) throw OpError("float32 gemm: this build has no OpenBLAS");
  if (g.m == 0 || g.n == 0) return;
#if defined(TRIBUNAL_HAVE_OPENBLAS)
  if (kind == Float32Gemm::OpenBlas) {
    if (g.m > INT_MAX || g.n > INT_MAX || g.k > INT_MAX)
      throw OpError("float32 gemm: a dimension exceeds INT_MAX");
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), 1.0f, g.a,
                static_cast<int>(g.lda), g.b, static_cast<int>(g.ldb), g.accumulate ? 1.0f : 0.0f, g.c,
                static_cast<int>(g.ldc));
    return;
  }
#endif
  portable(g, kind);
}

}  // namespace

const char* float32_gemm_name(Float32Gemm gemm) {
  switch (gemm) {
    case Float32Gemm::OpenBlas:
      return "openblas";
    case Float32Gemm::Naive:
      return "naive";
    case Float32Gemm::Blocked:
      return "blocked";
    case Float32Gemm::Reversed:
      return "reversed";
  }
  return "unknown";
}

Float32Gemm parse_float32_gemm(std::string_view name) {
  for (Float32Gemm g : kFloat32Gemms)
    if (name == float32_gemm_name(g)) return g;
  throw OpError("float32 gemm: unknown name '" + std::string(name) +
                "' (accepted: openblas, naive, blocked, reversed)");
}

bool float32_gemm_built(Float32Gemm gemm) {
#if defined(TRIBUNAL_HAVE_OPENBLAS)
  (void)gemm;
  return true;
#else
  return gemm != Float32Gemm::OpenBlas;
#endif
}

void set_float32_gemm_threads(int threads) {
#if defined(TRIBUNAL_HAVE_OPENBLAS)
  if (threads > 0) openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

bool run_float32_gemm_op(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                         std::span<Tensor* const> out, Float32Gemm gemm) {
  if (kind == OpKind::Linear) {
    const Tensor &x = *in[0], &w = *in[1], &b = *in[2];
    Tensor& y = *out[0];
    const bool tb = !attrs.ints.empty() && attrs.ints.at(0) != 0;  // w[N,K] (linear's trans_b)
    const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[tb ? 0 : 1];
    if (w.shape()[tb ? 1 : 0] != k || b.shape()[0] != n || y.shape()[0] != m || y.shape()[1] != n)
      throw OpError("linear (float32 gemm): shapes disagree");
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = b[j];
    gemm32({x.data(), w.data(), y.data(), m, n, k, k, tb ? k : n, n, false, tb, true}, gemm);
    return true;
  }
  if (kind == OpKind::Matmul) {
    const bool ta = attrs.ints.at(0) != 0, tb = attrs.ints.at(1) != 0;
    const Shape &as = in[0]->shape(), &bs = in[1]->shape(), &cs = out[0]->shape();
    const int r = as.rank() - 2;
    const int64_t batch = r == 0 ? 1 : as[0];
    const int64_t m = cs[r], n = cs[r + 1], k = ta ? as[r] : as[r + 1];
    const int64_t lda = as[r + 1], ldb = bs[r + 1];
    for (int64_t e = 0; e < batch; ++e)
      gemm32({in[0]->data() + e * m * k, in[1]->data() + e * k * n, out[0]->data() + e * m * n, m, n, k, lda,
              ldb, n, ta, tb, false},
             gemm);
    return true;
  }
  return false;
}

}  // namespace tribunal
