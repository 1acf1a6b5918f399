// Plain float32 matrix products for the "fast" numerics mode (docs/numerics.md "Fast mode",
// docs/verifiers.md): Linear and Matmul computed by whatever float32 GEMM a provider has, without the
// RepOps contract's order of operations. Two honest providers then reach different bits; a tolerance
// verifier (OVIG; Proof-of-Learning, Jia et al., IEEE S&P 2021) must accept their replays within a
// calibrated distance. The variants below are the honest heterogeneity it is calibrated on.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "ops/registry.h"
#include "ops/tensor.h"

namespace tribunal {

/// A float32 GEMM. Each computes C = op(A)·op(B) (+ C when accumulating) and differs from the others
/// only in how it orders and rounds each element's sum of K products:
///  - OpenBlas: cblas_sgemm of the linked OpenBLAS (fma, its own K blocking; its bits may change with
///    the core type OPENBLAS_CORETYPE picks and with its thread count, see set_float32_gemm_threads);
///  - Naive:    acc = acc + a·b for k = 0..K−1, a separately rounded multiply and add;
///  - Blocked:  the K products in blocks of 64, each block summed from 0 with fma, the block sums
///    added to C in order (a split-K kernel);
///  - Reversed: acc = fma(a, b, acc) for k = K−1 down to 0.
enum class Float32Gemm : uint8_t { OpenBlas, Naive, Blocked, Reversed };
inline constexpr Float32Gemm kFloat32Gemms[] = {Float32Gemm::OpenBlas, Float32Gemm::Naive,
                                                Float32Gemm::Blocked, Float32Gemm::Reversed};

/// "openblas", "naive", "blocked", "reversed" / parse (OpError naming the string and the accepted ones).
const char* float32_gemm_name(Float32Gemm gemm);
Float32Gemm parse_float32_gemm(std::string_view name);

/// Whether this build has `gemm` (OpenBlas only where OpenBLAS is linked, TRIBUNAL_HAVE_OPENBLAS).
bool float32_gemm_built(Float32Gemm gemm);

/// OpenBLAS's thread count for the following calls (openblas_set_num_threads); 0 leaves it as
/// OPENBLAS_NUM_THREADS set it. No effect without OpenBLAS.
void set_float32_gemm_threads(int threads);

/// Runs a Linear (x[M,K]·w[K,N] + b[N], or x·wᵀ + b for w[N,K] with ints {1}) or Matmul (op(a)·op(b), ints
/// {trans_a, trans_b}, rank 2 or a batch of rank 3) node with `gemm` into `out` (already shaped by the
/// registry's infer) and returns true; returns false for every other op kind (the caller runs its RepOps
/// kernel). Throws OpError when `gemm` is not built or the shapes disagree.
bool run_float32_gemm_op(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                         std::span<Tensor* const> out, Float32Gemm gemm);

}  // namespace tribunal
