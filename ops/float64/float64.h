// Float64 execution of every RepOps op, for the rounding-log numerics mode (Srivastava, Arora, Boneh,
// "Optimistic Verifiable Training by Controlling Hardware Nondeterminism", NeurIPS 2024, arXiv
// 2403.09603): each op is computed in binary64 by whatever kernel a provider has, and the caller rounds
// each output to float32 with ops/rounding_log.h (round_logged / round_replayed / rounding_allowed).
// Nothing here rounds to float32.
//
// Each op computes the mathematical function of its RepOps definition (ops/registry.h, docs/numerics.md)
// in double, without the float32 contract's operation order: float32 inputs and float attributes are
// converted to double exactly; sums are plain sequential double sums; exp is this library's (exp.h:
// GELU's 1 ± tanh from it), log/tanh/sqrt the C library's; the GELU constants are √(2/π) and 0.044715
// in double, the clipping epsilon 1e-6. What the contract decides by integers or comparisons is as the
// reference decides: labels and token ids (ops/ids.h), gather rows, the dropout keep mask (Philox,
// ops/pointwise.h, compared with the float p), the max-pool window choice (pool_choice), the causal
// mask, the ReLU and GELU selects. Matmul, Linear and the convolutions' contractions run through a
// Float64Gemm: the one place where two honest providers' float64 results may differ. Since the
// operands are float32 values, every product is exact in double (24 + 24 bits ≤ 53), so an fma and a
// multiply-then-add agree: two gemms differ only where they group the sum differently. Debian's
// OpenBLAS 0.3.21 keeps each element's k order within a block of a few hundred k and adds the blocks'
// partial sums into C, so it matches Naive bit for bit below that K and differs on some entries above
// it (tests/ops/test_float64.cpp: ~5% at K = 2053); its block sizes, hence its bits, also change with
// the core type and the thread count (measured on 256×2053×256: 237 of 65536 entries differ between
// 1 and 2 threads).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "ops/registry.h"
#include "ops/rounding_log.h"
#include "ops/tensor.h"

namespace tribunal {

class ThreadPool;

/// The float64 matrix product used by rounding-log mode: the "vendor kernel" two honest providers may
/// not share. OpenBlas: cblas_dgemm of Debian's OpenBLAS (its summation order changes with the core type
/// OPENBLAS_CORETYPE picks and its thread count); Naive: a plain i-j-k triple loop, sequential over k.
enum class Float64Gemm : uint8_t { OpenBlas, Naive };

/// "openblas", "naive" / parse (throws OpError naming the bad string and the accepted ones).
const char* float64_gemm_name(Float64Gemm gemm);
Float64Gemm parse_float64_gemm(std::string_view name);

/// Whether this build has OpenBLAS (Naive always exists). OpenBLAS is linked when CMake finds it for
/// the target architecture (TRIBUNAL_HAVE_OPENBLAS); the arm64 cross build has Naive only.
bool float64_gemm_built(Float64Gemm gemm);

/// Runs `kind` in float64 on float32 inputs: out[i] is resized to output i's element count (the shapes
/// registry's infer gives) and filled with the exact-math op computed in double (no rounding to float32
/// inside the op). Inputs, attrs and ints are validated like run_reference (call the op's infer; throw
/// OpError on bad input, e.g. a label out of range). Matmul, Linear and the convolutions' contractions
/// go through `gemm` (conv via im2col or a loop that calls the gemm); everything else is plain float64 code.
///
/// `in` holds the op's inputs in registry order; `out` must have exactly op_info(kind).num_outputs
/// vectors (OpError otherwise), each filled row-major in the output's shape. Throws OpError when `gemm`
/// is OpenBlas and the build has no OpenBLAS ("this build has no OpenBLAS"), whatever the op.
///
/// `pool` (null: the caller's thread alone) splits what is independent: the elementwise and row-wise
/// kernels' output elements or rows, and the gemm ops' outputs in fixed tiles of kFloat64GemmRowBlock
/// rows (× 256 columns), each one gemm call whatever the thread count. Every value is computed
/// by the same operations for any pool, so the results do not depend on it. OpenBLAS adds its own
/// threads per call when OPENBLAS_NUM_THREADS asks for them (never set here; its bits change with them).
void run_float64(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                 std::span<std::vector<double>> out, Float64Gemm gemm, ThreadPool* pool = nullptr);

/// The output rows of one gemm call when run_float64 splits a product over a pool: a product of more
/// rows is computed as calls on tiles of this many rows (ops/float64/internal.h: and 256 columns).
inline constexpr int64_t kFloat64GemmRowBlock = 256;

/// The default log2 of the ratio between a contraction's magnitude bound and its rounding quantum
/// (rounding_quanta; a job's `[numerics] quantum_bits`), chosen from bench_rounding_log's measurements
/// (docs/numerics.md, "Rounding-log mode").
inline constexpr int kDefaultRoundingQuantumBits = 38;

/// The range a job's quantum_bits may take: from a quantum as coarse as float32 rounding of the bound
/// to one finer than double rounding of it.
inline constexpr int kMinRoundingQuantumBits = 24, kMaxRoundingQuantumBits = 64;

/// The rounding quanta of one node in rounding-log mode (docs/numerics.md, "Rounding-log mode"): per
/// output element, the coarsest step its float64 value is rounded to, so that two honest gemms'
/// difference stays a small fraction of a step even where a sum cancels to near zero (the value's own
/// float32 spacing shrinks with it; the gemm's rounding error, which follows the partial sums, does not).
/// For the gemm ops (Linear, Matmul, Conv2d and its input and weight gradients) the quantum of an element
/// is 2^(E − quantum_bits), where 2^E bounds every partial sum of that element: 2^⌈log2 K⌉ times
/// the magnitudes (each rounded up to a power of two) of its row of the left operand and its column of
/// the right one — a convolution takes the filter and the whole image or channel — plus the bias. It is
/// derived from the float32 inputs by maxima and integer exponents only, so every party computes the
/// same quanta bit for bit. A quantum is 0 (the float32 grid) where the result is exact (a zero row or
/// column), has no bound (a NaN or an infinity), or would be finer than 2^-149.
///
/// Fills quanta[0] (quanta[i] for i > 0 left empty; every op with quanta has one output) and returns
/// true for the gemm ops; clears `quanta` and returns false for every other op, whose float64 code is
/// this library's own and the same on every machine. `in` as run_float64's, already valid for the op;
/// `quanta` must not be empty and quantum_bits must lie in [kMinRoundingQuantumBits,
/// kMaxRoundingQuantumBits] (OpError).
bool rounding_quanta(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                     std::span<std::vector<double>> quanta, int quantum_bits);

/// rounding_quanta's quanta of output 0 in factored form (ops/rounding_log.h QuantaFactors; its fill
/// gives the same vector): what the trainer's rounding takes, so that no quantum is stored per value.
/// `quanta` := none and false for the ops without quanta; OpError for quantum_bits out of range.
bool rounding_quanta_factors(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                             QuantaFactors& quanta, int quantum_bits);

}  // namespace tribunal
