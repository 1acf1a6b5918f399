#include "engine/numerics.h"

#include "engine/error.h"

namespace tribunal {

const char* numerics_mode_name(NumericsMode mode) {
  switch (mode) {
    case NumericsMode::RoundingLog:
      return "rounding-log";
    case NumericsMode::Fast:
      return "fast";
    default:
      return "repops";
  }
}

double default_rounding_tau(OpKind kind) {
  switch (kind) {
    // Contractions and row sums: a vendor kernel may order (and block) the sum its own way.
    case OpKind::Linear:
    case OpKind::Matmul:
    case OpKind::Conv2d:
    case OpKind::Conv2dBackwardInput:
    case OpKind::Conv2dBackwardWeight:
    case OpKind::Conv2dBackwardBias:
    case OpKind::SumRows:
    case OpKind::EmbeddingBackward:
    case OpKind::LayerNorm:
    case OpKind::LayerNormBackward:
    case OpKind::SoftmaxBackward:
      return 0x1p-5;
    // Copies and one correctly rounded IEEE-754 operation per value: the same float64 everywhere.
    case OpKind::Gather:
    case OpKind::Reshape:
    case OpKind::Add:
    case OpKind::Relu:
    case OpKind::ReluBackward:
    case OpKind::Embedding:
    case OpKind::SplitHeads:
    case OpKind::MergeHeads:
    case OpKind::Dropout:
    case OpKind::DropoutBackward:
    case OpKind::MaxPool2d:
    case OpKind::MaxPool2dBackward:
    case OpKind::Scale:
      return 0.0;
    // Fixed formulas with libm calls (exp, log, tanh, sqrt) or short positive sums.
    default:
      return 0x1p-16;
  }
}

Float64Gemm default_float64_gemm() {
  return float64_gemm_built(Float64Gemm::OpenBlas) ? Float64Gemm::OpenBlas : Float64Gemm::Naive;
}

NumericsSpec::NumericsSpec() {
  for (size_t k = 0; k < kOpKindCount; ++k) tau[k] = default_rounding_tau(static_cast<OpKind>(k));
}

void require_disputable(const NumericsSpec& numerics, const std::string& where) {
  if (numerics.mode == NumericsMode::Fast)
    throw EngineError(
        where +
        ": the job is in fast numerics mode, whose float32 kernels may differ between machines: "
        "its steps cannot be re-executed exactly, so no referee can settle a dispute over it "
        "(docs/verifiers.md: the tolerance verifier checks such runs)");
}

}  // namespace tribunal
