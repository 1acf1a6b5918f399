// The referee's view of a job in a dispute (docs/protocol.md): step t's graph as the job spec defines
// it, the StepSpec the game checks records against, and the re-execution of one node. Never trains.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "engine/graph.h"
#include "engine/job.h"
#include "engine/sampler.h"
#include "protocol/game.h"

namespace tribunal {

/// The bytes of tensors a referee thread keeps between re-executions (JobOracle::reexecute): a
/// GPT-2-small-sized node's inputs and outputs (66 MB for an AdamW update of a 768 × 3072 weight) with
/// room to spare. Idle memory of at most this much per thread that re-executes.
inline constexpr size_t kReexecutionPoolBytes = size_t{256} << 20;

/// The referee's StepOracle for a job: step t's graph as the job spec defines it, and the
/// re-execution of one of its nodes with the RepOps kernels (a rounding-log job: in float64, rounded
/// by each party's log). Never trains.
class JobOracle : public StepOracle {
 public:
  JobOracle(const JobSpec& job, const DataShape& data);

  StepSpec step_spec(uint64_t step) const override;

  /// state_hash(initial_state(job)), computed on first use (O(parameters)) and kept.
  Digest initial_state_hash() const override;

  /// The input ranges of the node's part (ops/op_part.h op_part) that computes elements `out` of
  /// output `slot`; nullopt when its op has none, or in a rounding-log job (its logs open whole nodes).
  /// Throws OpError when `out` is not a range of that output.
  std::optional<std::vector<ElementSpan>> part_inputs(uint64_t step, uint64_t node, uint32_t slot,
                                                      ElementSpan out) const override;

  /// Runs node rx.node of step rx.step on the inputs in `rx` (a Data input is rebuilt from the
  /// proven samples) and returns the tensor leaves of its outputs, for each party. With rx.part
  /// (level 4) it runs the node's part on the opened chunks and returns the located chunk's hash
  /// (tensor_chunk_hash), the same for both parties. RepOps job: the
  /// fast RepOps kernels, the same outputs for both. Rounding-log job (docs/protocol.md, "Rounding-log
  /// jobs"): run_float64 with default_float64_gemm(), then for each party its float64 outputs rounded
  /// by its log rx.logs[p] (round_outputs_replayed with the op's τ from the job's NumericsSpec); a log
  /// with a decision rounding_allowed refuses, or that does not unpack, sets that party's bad_log.
  /// Throws OpError on bad inputs (e.g. a shape that does not fit the op, a label out of range). The
  /// tensors it runs on are kept for the calling thread's next re-execution, at most
  /// kReexecutionPoolBytes of them (engine/tensor_pool.h).
  std::array<PartyReexecution, 2> reexecute(const Reexecute& rx) const;

  /// The graph of a step (cached: the referee asks for the same step repeatedly).
  const StepGraph& graph(uint64_t step) const;

 private:
  std::array<PartyReexecution, 2> reexecute_part(const Reexecute& rx) const;

  JobSpec job_;
  DataShape data_;
  mutable BatchSampler sampler_;
  mutable std::optional<std::pair<uint64_t, StepGraph>> cache_;
  mutable std::optional<Digest> initial_state_hash_;
};

/// The StepSpec of a built graph: records must match op, attributes and arity; inputs come from the
/// state, the data set (dataset_root), a constant (its tensor leaf) or an earlier node. With
/// `rounding_log` (a rounding-log job) every node has one more output, its log's leaf, of
/// log_values = the node's output elements.
StepSpec step_spec_of(const StepGraph& g, bool rounding_log = false);

}  // namespace tribunal
