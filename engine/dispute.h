// The engine's side of a dispute (docs/protocol.md): what the referee derives from the job without training
// (step graphs, one-node re-execution) and what a provider answers from its checkpoints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "engine/dataset.h"
#include "engine/step_policy.h"
#include "engine/trainer.h"
#include "protocol/game.h"

namespace tribunal {

/// The client's DisputeOpen (docs/protocol.md, "Opening a dispute") over two providers' signed Claim
/// envelopes for the job `job_toml` trained on `data`: the data set's root and shape come from `data`.
DisputeOpen dispute_open(const std::string& job_toml, const Dataset& data, std::vector<uint8_t> claim_a,
                         std::vector<uint8_t> claim_b);

/// The referee's StepOracle for a job: step t's graph as the job spec defines it, and the
/// re-execution of one of its nodes with the RepOps kernels (a rounding-log job: in float64, rounded
/// by each party's log). Never trains.
class JobOracle : public StepOracle {
 public:
  JobOracle(const JobSpec& job, const DataShape& data);

  StepSpec step_spec(uint64_t step) const override;

  /// state_hash(initial_state(job)), computed on first use (O(parameters)) and kept.
  Digest initial_state_hash() const override;

  /// Runs node rx.node of step rx.step on the inputs in `rx` (a Data input is rebuilt from the
  /// proven samples) and returns the tensor leaves of its outputs, for each party. RepOps job: the
  /// fast RepOps kernels, the same outputs for both. Rounding-log job (docs/protocol.md, "Rounding-log
  /// jobs"): run_float64 with default_float64_gemm(), then for each party its float64 outputs rounded
  /// by its log rx.logs[p] (round_outputs_replayed with the op's τ from the job's NumericsSpec); a log
  /// with a decision rounding_allowed refuses, or that does not unpack, sets that party's bad_log.
  /// Throws OpError on bad inputs (e.g. a shape that does not fit the op, a label out of range).
  std::array<PartyReexecution, 2> reexecute(const Reexecute& rx) const;

  /// The graph of a step (cached: the referee asks for the same step repeatedly).
  const StepGraph& graph(uint64_t step) const;

 private:
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

/// A provider's answers in a dispute about its own trajectory. It recomputes what it needs from its
/// stride checkpoints (store directory), with the same step policy it trained with.
class DisputeResponder {
 public:
  /// `train` and `pool` must outlive this. The store holds the job's checkpoints (state hashes of
  /// every checkpoint step; the tensors of the ones it recomputes from).
  DisputeResponder(const JobSpec& job, const Dataset& train, std::filesystem::path store, ThreadPool& pool,
                   StepPolicyPtr policy = {});

  /// The answer(s) to a query: one body, or a stream of TensorChunk/Samples for OpenInputs.
  /// Throws EngineError if the store cannot support it (missing checkpoint) or the query is out of
  /// range (a referee's query is checked like any peer input).
  std::vector<Body> answer(const Query& q);

 private:
  const std::vector<Digest>& trajectory_leaves();
  const std::vector<Digest>& interval_leaves(uint64_t interval);
  const StepTrace& trace(uint64_t step);
  void seek(uint64_t step);  // trainer_ state := state `step`, from the nearest checkpoint
  const MerkleTree& dataset_tree();

  JobSpec job_;
  const Dataset& train_;
  std::filesystem::path store_;
  ThreadPool& pool_;
  Trainer trainer_;
  std::vector<uint64_t> checkpoints_;
  std::vector<Digest> trajectory_;
  std::map<uint64_t, std::vector<Digest>> intervals_;
  std::optional<std::pair<uint64_t, StepTrace>> trace_;
  std::unique_ptr<MerkleTree> dataset_tree_;
};

}  // namespace tribunal
