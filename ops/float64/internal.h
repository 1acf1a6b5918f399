// Internal to ops/: the float64 GEMM both gemm variants implement, and the per-op float64 kernels and
// rounding quanta that the ops' descriptors (OpInfo::float64, OpInfo::quanta in ops/kernels/*.cpp)
// point to. See ops/float64/float64.h for the contract.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "ops/float64/float64.h"
#include "ops/rounding_log.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// One op invocation, already validated by infer_shapes: `out[i]` has out_shapes[i].numel() elements,
/// all +0 unless the op's kernel stores every value (ops/float64/dispatch.cpp writes_every_value: then
/// they are whatever the buffer held). Named outside f64 so that ops/registry.h can declare it without
/// the f64 namespace.
struct Float64Call {
  const Attrs& attrs;
  std::span<const Tensor* const> in;
  std::span<const Shape> out_shapes;
  std::span<std::vector<double>> out;
  Float64Gemm gemm;
  ThreadPool& pool;  ///< splits independent elements, rows and gemm row blocks (float64.h run_float64)
};

}  // namespace tribunal

namespace tribunal::f64 {

/// C[M×N] (+)= op(A)·op(B), row-major with leading dimensions (elements between rows of the stored
/// matrix): op(A)(i, p) = trans_a ? a[p·lda + i] : a[i·lda + p], op(B)(p, j) = trans_b ? b[j·ldb + p]
/// : b[p·ldb + j]. `accumulate`: C = C + op(A)·op(B) (Naive: each element's chain starts from C's
/// value), else C = op(A)·op(B) (K = 0 gives +0). Pointers may not alias c.
struct GemmArgs {
  const double* a = nullptr;
  const double* b = nullptr;
  double* c = nullptr;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;
};

/// Runs the product on `gemm`. Throws OpError for OpenBlas in a build without it, or for a size that
/// OpenBLAS's 32-bit integers cannot hold.
void gemm(Float64Gemm gemm, const GemmArgs& args);

/// The columns of one gemm call when a product is split over a pool (gemm below).
inline constexpr int64_t kFloat64GemmColumnBlock = 256;

/// The product as calls on the tiles of kFloat64GemmRowBlock rows × kFloat64GemmColumnBlock columns of
/// C (row-major order of tiles), run over `pool`: the same calls, hence the same bits, for any thread
/// count. Columns are split too so that a weight gradient (M = d_model rows, K = batch·context) is not
/// one serial call. The tiles are fixed, so the bits do not depend on the thread count; they need not be
/// the single call's: the naive loop's are; on OpenBLAS's SkylakeX kernels they differ in the last bits
/// (tests/ops/test_float64.cpp).
void gemm(Float64Gemm gemm, const GemmArgs& args, ThreadPool& pool);

using Call = Float64Call;

/// A pool of one thread (the caller's), for the RepOps kernels the float64 code reuses.
ThreadPool& serial_pool();

/// Elements (or rows) at least this many to a thread in for_each_range.
inline constexpr int64_t kFloat64Grain = 1 << 14;

/// fn(begin, end) over [0, n) split on the call's pool, ranges of at least `grain`: for kernels whose
/// every output element (row) is computed on its own, so that the split changes no bit.
template <class F>
void for_each_range(const Call& c, int64_t n, F&& fn, int64_t grain = kFloat64Grain) {
  c.pool.parallel_for(
      n, [&](int64_t b, int64_t e) { fn(b, e); }, grain);
}

/// The outputs of the fast RepOps kernel of `kind` on the call's inputs, in tensors kept per thread
/// (fresh tensors would fault their pages in every step) until the next call on this thread.
std::span<const Tensor> fast_outputs(OpKind kind, const Call& c);

/// The float64 kernel of an op whose every output value is one of its float32 inputs or +0 (copies,
/// selections, masks): its float64 result is the RepOps reference's, widened, so the reference alone
/// defines what it selects. Computed by the fast kernel, memcmp-equal to the reference by the
/// contract (tests/ops).
template <OpKind K>
void selected(const Call& c) {
  const std::span<const Tensor> y = fast_outputs(K, c);
  for (size_t i = 0; i < y.size(); ++i) {
    const float* v = y[i].data();
    double* out = c.out[i].data();
    for_each_range(c, static_cast<int64_t>(y[i].values().size()), [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) out[j] = v[j];
    });
  }
}

/// x converted to double, element by element (exact).
std::vector<double> widen(const Tensor& x);
/// x widened into the first x.numel() values of `into`, elements split over `pool`; returns into.data().
/// `into` only grows (a kept buffer sized down and up again would be zeroed each time it grows).
const double* widen(const Tensor& x, std::vector<double>& into, ThreadPool& pool);
/// The n floats at x widened into the first n values of `into` (which only grows) on this thread; returns
/// into.data().
const double* widen(const float* x, int64_t n, std::vector<double>& into);

// linear.cpp
void linear(const Call&);
void matmul(const Call&);
void sum_rows(const Call&);
// elementwise.cpp
void add(const Call&);
void gelu(const Call&);
void gelu_backward(const Call&);
void dropout(const Call&);  ///< Dropout and DropoutBackward (the same map of x or dy)
void scale(const Call&);
void broadcast_binary(const Call&);
void sum_to_shape(const Call&);
void reduce_mean(const Call&);           ///< Σ along the axis in double, then / N
void reduce_mean_backward(const Call&);  ///< dy / N in double, broadcast along the axis
// unary.cpp
void unary(const Call&);
void unary_backward(const Call&);
// layout.cpp (the embeddings)
void embedding(const Call&);
void embedding_backward(const Call&);
// nn.cpp
void softmax_cross_entropy(const Call&);
void softmax_cross_entropy_backward(const Call&);
void softmax(const Call&);
void softmax_backward(const Call&);
void layer_norm(const Call&);
void layer_norm_backward(const Call&);
// optim.cpp
void sgd_momentum(const Call&);
void adamw(const Call&);
void sum_squares(const Call&);
void clip_coefficient(const Call&);
// pool.cpp
void max_pool2d_backward(const Call&);
void global_avg_pool(const Call&);
void global_avg_pool_backward(const Call&);
// batch_norm.cpp
void batch_norm(const Call&);
void batch_norm_backward(const Call&);
void batch_norm_running(const Call&);
void batch_norm_inference(const Call&);
// conv.cpp
void conv2d(const Call&);
void conv2d_backward_input(const Call&);
void conv2d_backward_weight(const Call&);
void conv2d_backward_bias(const Call&);

// quantum.cpp: the rounding quanta of the gemm ops (OpInfo::quanta; float64.h rounding_quanta).
void linear_quanta(const Attrs&, std::span<const Tensor* const> in, QuantaFactors& q, int bits);
void matmul_quanta(const Attrs&, std::span<const Tensor* const> in, QuantaFactors& q, int bits);
void conv2d_quanta(const Attrs&, std::span<const Tensor* const> in, QuantaFactors& q, int bits);
void conv2d_backward_input_quanta(const Attrs&, std::span<const Tensor* const> in, QuantaFactors& q,
                                  int bits);
void conv2d_backward_weight_quanta(const Attrs&, std::span<const Tensor* const> in, QuantaFactors& q,
                                   int bits);

}  // namespace tribunal::f64
