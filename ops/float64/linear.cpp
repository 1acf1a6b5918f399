// Float64 Linear, Matmul and SumRows. Linear and Matmul are the float64 GEMM (the gemm the caller
// picks); SumRows is a sequential double sum down each column.
#include <algorithm>

#include "ops/float64/internal.h"

namespace tribunal::f64 {

/// y[M,N] = x[M,K]·w[K,N] + b[N] (w[N,K] read transposed with ints {1}, trans_b): y starts as b in
/// every row, then the GEMM accumulates x·op(w) into it.
void linear(const Call& c) {
  const Tensor &x = *c.in[0], &w = *c.in[1], &b = *c.in[2];
  const bool tb = !c.attrs.ints.empty() && c.attrs.ints[0] != 0;
  const int64_t m = x.shape()[0], k = x.shape()[1], n = w.shape()[tb ? 0 : 1];
  std::vector<double>& y = c.out[0];
  for_each_range(
      c, m,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = 0; j < n; ++j) y[static_cast<size_t>(i * n + j)] = b[j];
      },
      std::max<int64_t>(1, kFloat64Grain / std::max<int64_t>(n, 1)));
  // Kept per thread: fresh operands would fault their pages in every call.
  thread_local std::vector<double> xd, wd;
  const double *xw = widen(x, xd, c.pool), *ww = widen(w, wd, c.pool);
  gemm(c.gemm, {xw, ww, y.data(), m, n, k, k, tb ? k : n, n, false, tb, true}, c.pool);
}

/// c = op(a)·op(b), ints {trans_a, trans_b}; rank 3: one GEMM per batch element (same batch on both
/// sides, the flags apply to the last two axes), the batch's GEMMs split over the pool.
void matmul(const Call& c) {
  const bool ta = c.attrs.ints[0] != 0, tb = c.attrs.ints[1] != 0;
  const Shape &as = c.in[0]->shape(), &bs = c.in[1]->shape(), &cs = c.out_shapes[0];
  const int r = as.rank() - 2;
  const int64_t batch = r == 0 ? 1 : as[0];
  const int64_t m = cs[r], n = cs[r + 1], k = ta ? as[r] : as[r + 1];
  const int64_t lda = as[r + 1], ldb = bs[r + 1];
  std::vector<double>& out = c.out[0];
  thread_local std::vector<double> a_wide, b_wide;  // kept per thread (each pool thread has its own)
  if (batch == 1) {
    const double *ad = widen(*c.in[0], a_wide, c.pool), *bd = widen(*c.in[1], b_wide, c.pool);
    gemm(c.gemm, {ad, bd, out.data(), m, n, k, lda, ldb, n, ta, tb, false}, c.pool);
    return;
  }
  // The batch's products side by side, each element's operands widened just before its GEMM, so that
  // the GEMM reads them from the cache (an attention head's are 16–64 KiB in float32).
  const float *a = c.in[0]->data(), *b = c.in[1]->data();
  c.pool.parallel_for(batch, [&](int64_t e0, int64_t e1) {
    for (int64_t e = e0; e < e1; ++e) {
      const double *ad = widen(a + e * m * k, m * k, a_wide), *bd = widen(b + e * k * n, k * n, b_wide);
      gemm(c.gemm, {ad, bd, out.data() + e * m * n, m, n, k, lda, ldb, n, ta, tb, false});
    }
  });
}

/// y[j] = Σ_i x[i,j], in increasing i.
void sum_rows(const Call& c) {
  const Tensor& x = *c.in[0];
  const int64_t m = x.shape()[0], n = x.shape()[1];
  std::vector<double>& y = c.out[0];
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) y[static_cast<size_t>(j)] += x[i * n + j];
}

}  // namespace tribunal::f64
