// How a job's ops compute (docs/numerics.md): RepOps, the bitwise-reproducible float32 kernels, or
// rounding-log mode — float64 by any kernel, rounded to float32 with the rounding decisions near a
// boundary logged (Srivastava, Arora, Boneh, NeurIPS 2024, arXiv 2403.09603; ops/rounding_log.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ops/float64/float64.h"
#include "ops/registry.h"

namespace tribunal {

enum class NumericsMode : uint8_t {
  RepOps = 0,       ///< every op is a RepOps kernel: the same bits on every machine
  RoundingLog = 1,  ///< every op in float64, rounded to float32 with a log of near-boundary decisions
  /// Plain float32: Linear and Matmul by any float32 GEMM (ops/float32_gemm.h: OpenBLAS SGEMM at any
  /// thread count, or another summation order), the other ops by their RepOps kernels. Not
  /// reproducible across GEMMs: such a job is checked by a tolerance verifier (docs/verifiers.md), not
  /// by an exact dispute.
  Fast = 2,
};

/// "repops", "rounding-log", "fast".
const char* numerics_mode_name(NumericsMode mode);

/// The default τ of op `kind` in rounding-log mode, in units of the float32 spacing at the value
/// (ops/rounding_log.h), chosen from bench_rounding_log's measurements (docs/numerics.md
/// "Rounding-log mode"):
///  - 2^-5 for contractions and row sums (linear, matmul, the convolutions, sum_rows, layer norm and
///    the backward sums): OpenBLAS and a naive loop differ there by up to 0.015 spacings on the GPT job
///    (a sum that cancels), and a replay stays exact while two kernels differ by less than τ/2;
///  - 0 for copies and ops of one correctly rounded operation per value (gather, add, relu, dropout,
///    scale, …): every IEEE-754 machine computes their float64 alike, so nothing is logged;
///  - 2^-16 for the rest (softmax, GELU, the loss, the optimizers, clipping): fixed float64 formulas
///    whose only freedom is libm's last bit.
double default_rounding_tau(OpKind kind);

/// The float64 GEMM a trainer uses unless told otherwise: OpenBLAS where this build has it, else the
/// naive loop.
Float64Gemm default_float64_gemm();

/// The op kinds whose τ the job id has always held (OpKind values below this: gather … scale). Kinds
/// appended after them (broadcast_binary, …) enter the id only when a job sets their τ away from its
/// default (engine/job.h canonical_job_encoding), so the ids of existing rounding-log jobs stand.
inline constexpr size_t kTauKindsInIdV1 = static_cast<size_t>(OpKind::Scale) + 1;

/// The job's [numerics] table.
struct NumericsSpec {
  NumericsMode mode = NumericsMode::RepOps;
  /// rounding-log only: τ per op kind (by OpKind value), each in [0, kMaxRoundingTau].
  std::array<double, kOpKindCount> tau{};
  /// rounding-log only: log2 of a contraction's magnitude bound over its rounding quantum
  /// (ops/float64/float64.h rounding_quanta), in [kMinRoundingQuantumBits, kMaxRoundingQuantumBits].
  int quantum_bits = kDefaultRoundingQuantumBits;
  /// rounding-log only: the endpoint (ws:// URL, as its claim signs it) of the job's **trainer**
  /// (`[numerics] trainer`; docs/numerics.md "Trainer and auditors"). Empty: every provider trains
  /// with its own logs (independent trainers). Set: that provider trains and logs; every other one
  /// audits — it replays the trainer's logs — and a dispute between the trainer and an auditor is
  /// decided by the trainer's log (docs/protocol.md "Rounding-log jobs").
  std::string trainer;

  NumericsSpec();
  bool operator==(const NumericsSpec&) const = default;
  double tau_of(OpKind kind) const { return tau[static_cast<size_t>(kind)]; }
};

/// Throws EngineError (naming `where`) for a mode whose steps cannot be re-executed exactly — fast
/// mode, whose float32 kernels are free to differ — since no referee could settle a dispute over
/// them: providers refuse to train such a job for a client and referees refuse its disputes
/// (docs/verifiers.md: the tolerance verifier is what checks them).
void require_disputable(const NumericsSpec& numerics, const std::string& where);

}  // namespace tribunal
