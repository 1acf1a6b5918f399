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
  // The op's descriptor says how its float64 may differ between honest kernels (OpInfo::float64_spread);
  // τ per spread is this layer's policy. No default: a new Float64Spread fails to compile here.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
  switch (op_info(kind).float64_spread) {
    case Float64Spread::Sum:  // a vendor kernel may order (and block) the sum its own way
      return 0x1p-5;
    case Float64Spread::Exact:  // copies and one correctly rounded operation per value: no freedom
      return 0.0;
    case Float64Spread::Libm:  // fixed formulas whose only freedom is libm's last bit
      return 0x1p-16;
  }
#pragma GCC diagnostic pop
  return 0x1p-16;  // unreachable: op_info checks every entry's spread
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
