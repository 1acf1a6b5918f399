// Training state, its commitment state_hash, stride checkpoints and the trajectory root (docs/architecture.md
// "State and commitments").
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "engine/job.h"
#include "engine/step.h"
#include "ops/thread_pool.h"
#include "protocol/hash.h"
#include "protocol/trajectory.h"

namespace tribunal {

/// The tensors of state_layout(job), same order.
struct State {
  std::vector<Tensor> tensors;
  /// Pointers for Executor::run.
  std::vector<Tensor*> pointers();
  /// The "step" tensor as an integer.
  int64_t step() const;
};

/// The state tensors an evaluation graph (build_eval_graph, build_eval_loss_graph) reads, in its
/// order: the parameters, then the buffers.
std::vector<const Tensor*> eval_state_inputs(const JobSpec& job, const State& state);

/// State 0: parameters from init_param (Philox), or from the job's model.init weights
/// (load_init_weights, which throws EngineError for a bad or missing file), or an imported model's
/// initializers (its buffers too); optimizer slots, step and loss all zero.
State initial_state(const JobSpec& job);

/// What training a job holds, computed from the job alone (nothing allocated), so that a node can
/// refuse a job before it trains or disputes it: the model's parameter count, the bytes of one state
/// (every state tensor, float32) and of all its stride checkpoints on disk (payloads; each file's
/// safetensors header adds a few KiB).
struct JobFootprint {
  int64_t parameters = 0;
  uint64_t state_bytes = 0;
  uint64_t checkpoint_bytes = 0;
};
JobFootprint job_footprint(const JobSpec& job);

/// state_hash = RFC 6962 Merkle root over tensor_leaf(tensor) in canonical order. Tensors are hashed
/// in parallel on the pool (the result does not depend on the thread count).
Digest state_hash(const State& state, ThreadPool& pool);

/// trajectory_root = Merkle root over the state hashes at checkpoint_steps(T, s), in order.
Digest trajectory_root(std::span<const Digest> checkpoint_hashes);

/// DIR/step_<9 digits>.safetensors.
std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step);

/// What a checkpoint's metadata says (read without loading the tensors).
struct CheckpointHeader {
  int64_t step = 0;
  Digest job_id{};
  Digest state_hash{};
};

/// Writes a safetensors file with the state's tensors under their layout names and metadata
/// {format: "tribunal-checkpoint-1", job_id, step, state_hash} (hex digests). Atomic (temp + rename).
/// Throws EngineError naming the path if it cannot be written.
void save_checkpoint(const std::filesystem::path& path, const JobSpec& job, const State& state,
                     const Digest& job_id, const Digest& state_hash);

/// Reads the metadata of a checkpoint. Throws EngineError on a missing/corrupt file or bad metadata.
CheckpointHeader read_checkpoint_header(const std::filesystem::path& path);

/// Loads a checkpoint of `job`: checks job_id, that names and shapes match the job's state layout,
/// and that the recomputed state hash equals the recorded one. Throws EngineError otherwise.
State load_checkpoint(const std::filesystem::path& path, const JobSpec& job, const Digest& job_id,
                      ThreadPool& pool);

}  // namespace tribunal
