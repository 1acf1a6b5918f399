// Matrix multiply, the RepOps dot-product contract (docs/numerics.md "Dot products").
#pragma once

#include <cstdint>
#include <span>

#include "ops/simd.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// C[M×N] = op(A)·op(B) (+ bias), row-major, every element an fma chain in sequential k order:
///   acc = (bias ? bias[j] : +0.0f);  for p = 0..K-1: acc = fma(A(i,p), B(p,j), acc);  C[i,j] = acc
/// with A(i,p) = trans_a ? a[p*M + i] : a[i*K + p] and B(p,j) = trans_b ? b[j*K + p] : b[p*N + j].
/// K = 0 gives the bias (or +0). Pointers may not alias c.
struct MatmulArgs {
  const float* a = nullptr;
  const float* b = nullptr;
  const float* bias = nullptr;  ///< optional, length N
  float* c = nullptr;
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
};

/// The scalar reference: the contract itself, written as plainly as possible.
void matmul_reference(const MatmulArgs& args);

/// Fast matmul on active_simd_path(), split over the pool's threads by independent output blocks.
void matmul(const MatmulArgs& args, ThreadPool& pool);

/// Fast matmul forced onto one path (tests and benchmarks). Throws OpError if the CPU lacks it.
void matmul(const MatmulArgs& args, ThreadPool& pool, SimdPath path);

/// Fast matmul entirely on the calling thread on `path` (for callers that split independent products
/// over threads themselves). Bitwise equal to matmul_reference. Throws OpError if the CPU lacks it.
void matmul_on_thread(const MatmulArgs& args, SimdPath path);

/// `batch` independent products C_e = op(A_e)·op(B_e), e < batch, each exactly the 2-D contract of
/// MatmulArgs (no bias), with A_e = args.a + e·M·K, B_e = args.b + e·K·N, C_e = args.c + e·M·N
/// (contiguous [batch, …] tensors). Many small products (attention: 64 × 128×128×32) are split over
/// the pool's threads by whole batch elements, each run by the single-threaded SIMD GEMM; a few
/// large ones run one after another on the threaded GEMM. Throws OpError for batch < 0, a bias, or
/// a path the CPU lacks.
void matmul_batched(const MatmulArgs& args, int64_t batch, ThreadPool& pool, SimdPath path);

/// The reference of matmul_batched: matmul_reference on each batch element in turn.
void matmul_batched_reference(const MatmulArgs& args, int64_t batch);

}  // namespace tribunal
