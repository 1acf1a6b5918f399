// Cheaters that target the verifiers of verifiers/ (docs/verifiers.md "Cheaters"). Each writes a
// run directory as `tribunal train --out` does (checkpoints, losses.csv, resources.csv), claiming to
// have trained the job:
//  - the shortcut trainer skips part of every interval (claims its state unchanged or extrapolated);
//  - the loss forger is a shortcut trainer whose logs look like an honest run's;
//  - the hide-in-the-noise manipulator trains honestly but, knowing the tolerance verifier's boundary,
//    spends it on a targeted change after every interval.
#pragma once

#include <cstdint>
#include <filesystem>

#include "cheats/fault.h"
#include "engine/dataset.h"
#include "engine/job.h"
#include "engine/trainer.h"

namespace tribunal::cheats {

struct ShortcutPlan {
  /// The last ceil(skip_fraction × s) steps of every interval but the first are not computed.
  double skip_fraction = 0.5;
  SkipMode mode = SkipMode::Unchanged;  ///< what a skipped step claims (cheats/fault.h)
  /// Loss forger: instead of its real logs, a loss per step interpolated between its checkpoints' own
  /// losses (evaluated on 1 % of the training rows) with the noise of its real losses, and resource
  /// samples of skipped steps copied from its real steps. Without it, a skipped step logs the loss
  /// it claims and a sample of the time it idles (it sleeps the last real step's wall time, so that
  /// the run lasts as long as an honest one).
  bool forge_logs = false;
  uint64_t seed = 7;  ///< the forger's noise
};

/// What an attack did.
struct AttackRun {
  int64_t computed_steps = 0, skipped_steps = 0;
  double cpu_seconds = 0;  ///< process CPU time of the attack's training
  double shift = 0;        ///< hide-in-the-noise: the total change made to the target parameter
  double budget = 0;       ///< hide-in-the-noise: the L2 change per interval
};

/// The steps the plan skips: t is skipped when t ≥ s and t mod s ≥ s − ceil(skip_fraction × s).
bool shortcut_skips(const JobSpec& job, const ShortcutPlan& plan, int64_t t);

/// Trains `job` as the shortcut trainer (or loss forger) into `out_dir` (created; `fast` for a fast-mode
/// job).
AttackRun train_shortcut(const JobSpec& job, const Dataset& train, const std::filesystem::path& out_dir,
                         const ShortcutPlan& plan, const FastOptions& fast = {});

/// The engine Fault whose first deviation is the plan's (its first skipped run of steps), for the
/// exact dispute, which stops at the first deviation.
Fault shortcut_fault(const JobSpec& job, const ShortcutPlan& plan);

struct NoisePlan {
  double budget = 0;         ///< L2 change added after each interval (take boundary − honest max distance)
  int64_t target_class = 0;  ///< the output bias element (class; GPT: byte) raised
};

/// The index of the output layer's bias in the state (the last parameter of shape [classes]).
/// Throws EngineError when the model has none.
size_t output_bias_index(const JobSpec& job);

/// Trains `job` honestly with `fast` and, at the end of every interval, raises the output bias of
/// target_class by `budget` before committing the checkpoint.
AttackRun train_hide_in_noise(const JobSpec& job, const Dataset& train, const std::filesystem::path& out_dir,
                              const NoisePlan& plan, const FastOptions& fast = {});

/// The fraction of predictions (argmax of the logits, first maximum on ties) equal to `cls` over the
/// first `max_rows` rows of `data` (GPT: every position of those windows).
double prediction_rate(const JobSpec& job, const State& state, const Dataset& data, int64_t cls,
                       int64_t max_rows, ThreadPool& pool);

}  // namespace tribunal::cheats
