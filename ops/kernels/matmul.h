// Matrix multiply, the RepOps dot-product contract (DESIGN §4, docs/numerics.md "Dot products").
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

}  // namespace tribunal
