// What training a job costs a provider, derived from the job alone before any data is loaded
// (docs/running.md, "Job admission"): the provider checks it against its operator's limits when a
// job is submitted, so a job whose steps are too heavy, too large or too many is refused up front.
#pragma once

#include <cstdint>

#include "engine/job.h"

namespace tribunal {

/// Estimates for one job; each saturates at its type's maximum.
struct TrainingCost {
  /// Nodes of one step graph: the nodes of one shard's graph × S, plus the combine tree's adds.
  uint64_t nodes = 0;
  /// Work of one step: node_work (engine/cost.h: multiply-adds of the contractions, else elements
  /// read and written) summed over one shard's graph × S, plus the combine tree's adds.
  uint64_t step_work = 0;
  /// step_work × train.steps.
  uint64_t total_work = 0;
  /// Bytes the executor holds while training: every node output of one step graph (float32; each
  /// shard's values are its own, activations and attention scores included) plus four copies of the
  /// state (the state, its next value, two checkpoints being written).
  uint64_t memory_bytes = 0;
};

/// The cost of training `job`. Builds the step graph of one shard (B/S rows, on a data shape derived
/// from the model: its input width, classes and context), whose size does not grow with S or B, and
/// scales it, so the time taken is linear in the model's size. Throws EngineError or OpError when the
/// job's shapes do not fit together (as training would).
TrainingCost training_cost(const JobSpec& job);

}  // namespace tribunal
