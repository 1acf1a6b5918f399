// What a verifier reads of a provider's run directory (docs/verifiers.md): the stride checkpoints'
// states (endpoint evidence, OVIG), the loss log and the resource samples (engine/run_log.h), and the
// replay of one checkpoint interval that the audits and the tolerance verifier both use.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <vector>

#include "engine/dataset.h"
#include "engine/run_log.h"
#include "engine/state.h"
#include "engine/trainer.h"

namespace tribunal::verifiers {

/// The run directory of one provider's job: its checkpoints by step and its logs.
struct RunEvidence {
  std::filesystem::path dir;
  std::map<int64_t, std::filesystem::path> checkpoints;  ///< step → DIR/step_*.safetensors of this job
  std::vector<LossRecord> losses;
  std::vector<ResourceSample> resources;
  uint64_t stored_bytes = 0;  ///< bytes of the checkpoints and the two logs on disk
};

/// Lists the run's checkpoints of `job_id` (by their headers) and reads its logs. Throws EngineError
/// when the directory cannot be read, holds a checkpoint of another job (naming both job ids: it is not
/// this job's run), or a log does not parse.
RunEvidence read_run(const std::filesystem::path& dir, const Digest& job_id);

/// Bytes of the file at `path` (0 when missing).
uint64_t file_bytes(const std::filesystem::path& path);

/// Loads the checkpoint of `step` (checks its job, layout and state hash: load_checkpoint). Throws
/// EngineError when the run has no checkpoint of that step.
State load_step(const RunEvidence& run, int64_t step, const JobSpec& job, const Digest& job_id,
                ThreadPool& pool);

/// `given` when it is not null, else the job's training set, loaded into `loaded` (the command line's
/// path; tests and benches pass the set they already hold).
const Dataset& training_set(const JobSpec& job, const Dataset* given, std::optional<Dataset>& loaded,
                            ThreadPool& pool);

/// Trains `steps` honest steps of `job` from `start` with this verifier's kernels (`fast` for a
/// fast-mode job; RepOps otherwise; a rounding-log job with its own float64 GEMM and logs) and
/// returns the state reached.
State replay(const JobSpec& job, const Dataset& train, ThreadPool& pool, const State& start, int64_t steps,
             const FastOptions& fast = {});

/// Distances between two states of one job over every tensor but "step" (parameters, optimizer
/// slots, loss): the L2 norm of the difference, its largest element, and the L2 norm over the
/// parameters alone. NaN when either holds a NaN.
struct StateDistance {
  double l2 = 0, max_abs = 0, params_l2 = 0;
};
StateDistance state_distance(const JobSpec& job, const State& a, const State& b);

/// L2 norm of the parameters' change from `a` to `b` (the "weight change" of Proof-of-Learning's
/// top-k selection).
double weight_change(const JobSpec& job, const State& a, const State& b);

/// The mean softmax cross-entropy of the state's parameters on `rows` of the training set (the
/// forward graph without dropout, engine/trainer.h evaluate_loss on those rows).
double loss_on_rows(const JobSpec& job, const State& state, const Dataset& train,
                    std::span<const int64_t> rows, ThreadPool& pool);

}  // namespace tribunal::verifiers
