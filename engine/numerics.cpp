#include "engine/numerics.h"

namespace tribunal {

const char* numerics_mode_name(NumericsMode mode) {
  return mode == NumericsMode::RoundingLog ? "rounding-log" : "repops";
}

double default_rounding_tau(OpKind kind) {
  switch (kind) {
    case OpKind::Linear:
    case OpKind::Matmul:
    case OpKind::Conv2d:
    case OpKind::Conv2dBackwardInput:
    case OpKind::Conv2dBackwardWeight:
    case OpKind::Conv2dBackwardBias:
    case OpKind::SumRows:
    case OpKind::EmbeddingBackward:
    case OpKind::LayerNormBackward:
    case OpKind::SumSquares:
      return 0x1p-10;
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

}  // namespace tribunal
