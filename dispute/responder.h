// A provider's answers in a dispute about its own trajectory (docs/protocol.md): the game's queries
// answered from its stride checkpoints, recomputed with the step policy it trained with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/dataset.h"
#include "engine/step_policy.h"
#include "engine/trainer.h"
#include "protocol/game.h"
#include "protocol/merkle.h"

namespace tribunal {

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
  Body log_evidence(const Query& q) const;
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
