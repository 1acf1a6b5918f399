// Deliberate deviations from the honest computation: how a cheating provider is simulated (demo,
// tests, scenario scripts). A faulty trainer is the honest algorithm fed a wrong trace through the
// engine's one seam, its step policy (engine/step_policy.h; fault_policy(), cheats/fault_policy.h), so
// it answers every dispute question consistently with its own (wrong) trajectory: the
// DisputeResponder recomputes from its checkpoints with the same policy. Every behaviour below is off
// by default and can be combined with the others; docs/protocol.md ("Cheater behaviours in the
// engine") lists what the dispute makes of each.
#pragma once

#include <cstdint>
#include <string>

#include <span>
#include <vector>

#include "engine/job.h"
#include "ops/registry.h"
#include "ops/rounding_log.h"

namespace tribunal::cheats {

/// How a cheater on a rounding-log job tampers with its rounding logs (Fault::rounding).
enum class RoundingFault : uint8_t {
  None,
  /// At (rounding_step, rounding_node): the first value at or after rounding_element that is at least
  /// 3τ/2 from a rounding boundary (so no referee value within τ/2 allows a decision for it) is logged
  /// Down or Up, whichever names the float32 neighbour that is not its nearest rounding, and the node
  /// outputs that neighbour. Caught as bad_rounding_log at (rounding_step, rounding_node).
  Forge,
  /// At (rounding_step, rounding_node): the first Down/Up decision becomes Nearest and the node outputs
  /// the nearest rounding (nothing changes if the node logged none). Caught as bad_rounding_log there
  /// when the referee's value is within τ/2 of the boundary (Nearest is owed a decision there);
  /// otherwise both logs are allowed and the dispute ends both_valid.
  Omit,
  /// At step rounding_step: every value of every node is logged with its own nearest direction (a
  /// Down/Up where Nearest is owed), outputs unchanged. Caught as bad_rounding_log at the step's first
  /// node whose log differs from the honest one (node 0, a gather).
  Bloat,
};

/// What a lazy cheater claims for a skipped step.
enum class SkipMode : uint8_t {
  Unchanged,    ///< state t+1 := state t (the step counter still advances)
  Extrapolate,  ///< state t+1 := state t + Δ, Δ = state(skip_from) − state(skip_from − 1)
};

struct Fault {
  /// Corrupt one node output: at step `step`, add `delta` to element `element` (every element when
  /// −1) of output `slot` of node `node`, right after the node runs (later nodes see the corrupted
  /// value). Caught as wrong_output at (step, node).
  int64_t step = -1;
  int64_t node = -1;
  uint32_t slot = 0;
  int64_t element = 0;
  float delta = 1e-3f;

  /// Train on another sample: at step `swap_step`, batch position `swap_position` reads data-set row
  /// `swap_row` instead of the permutation's. The gather nodes' attributes (the batch indices) are
  /// then not the job's: inconsistent_input at (swap_step, node 0, gather).
  int64_t swap_step = -1;
  int64_t swap_position = 0;
  int64_t swap_row = 0;

  /// Start from wrong weights: add this to element 0 of the first parameter of state 0.
  /// Caught as wrong_initial_state at level 1.
  float init_delta = 0.0f;

  /// Lazy training: steps skip_from … skip_from + skip_count − 1 are not applied. The provider's
  /// node records of such a step stay those of the honest computation on its pre-state (it answers
  /// a dispute with them), but the state it claims after the step is `skip_mode`'s: every state
  /// tensor except "step" (parameters, optimizer slots and "loss") is copied from state t
  /// (Unchanged) or extrapolated linearly, x(t+1) = x(t) + Δx with Δ the change made by the last real
  /// step skip_from − 1 (Extrapolate; Δ = 0 when skip_from = 0; a trainer that did not run that step
  /// itself replays its trajectory from step 0 to learn Δ). Caught as wrong_post_state at
  /// (skip_from, node G = the step's node count).
  int64_t skip_from = -1;
  int64_t skip_count = 1;
  SkipMode skip_mode = SkipMode::Unchanged;

  /// Poison a label: at step `relabel_step`, batch position `relabel_position` gets label
  /// `relabel_label` (a class index) in the output of the labels' gather node. Caught as wrong_output
  /// at (relabel_step, the labels' gather node 1).
  int64_t relabel_step = -1;
  int64_t relabel_position = 0;
  int64_t relabel_label = 0;

  /// Reorder batches: step `reorder_step` trains on the batch of step `reorder_with` and vice versa
  /// (when that step is run at all). Caught as inconsistent_input at the earlier of the two steps,
  /// node 0 (its gather's indices are not the job's).
  int64_t reorder_step = -1;
  int64_t reorder_with = -1;

  /// Change hyperparameters: from step `hparam_from` on, the optimizer node's learning rate is
  /// lr·lr_scale and its weight decay weight_decay·wd_scale (both are attributes of the adamw /
  /// sgd_momentum node). The records then name those attributes, so the node is not the job's:
  /// inconsistent_input at (hparam_from, the first optimizer node). With `hparam_hidden` the records
  /// name the job's attributes while the optimizer ran with the scaled ones: wrong_output there.
  int64_t hparam_from = -1;
  float lr_scale = 1.0f;
  float wd_scale = 1.0f;
  bool hparam_hidden = false;

  /// Lower precision ("cheap hardware"): from step `bf16_from` on, every output of every node of op
  /// kind `bf16_op` is rounded to bfloat16 (round_to_bf16) right after the node runs. Caught as
  /// wrong_output at (bf16_from, the first node of that kind).
  int64_t bf16_from = -1;
  OpKind bf16_op = OpKind::Linear;

  /// Tamper with the rounding logs of a rounding-log job (RoundingFault; EngineError from check_fault
  /// on a RepOps job). The cheater's dispute responder logs such a step afresh with the same tampering
  /// instead of replaying its stored logs (its own float64 values would refuse them).
  RoundingFault rounding = RoundingFault::None;
  int64_t rounding_step = -1;
  int64_t rounding_node = 0;
  int64_t rounding_element = 0;

  /// Different trajectory length: train and claim `claim_steps` steps instead of the job's T
  /// (run_training's TrainResult.steps, checkpoints, trajectory_root over checkpoint_steps(claim_steps,
  /// stride) and final_state_hash are those of the longer or shorter run). −1: the job's T.
  int64_t claim_steps = -1;

  /// True when any behaviour is switched on (false for the honest default).
  bool any() const {
    return step >= 0 || swap_step >= 0 || init_delta != 0.0f || skip_from >= 0 || relabel_step >= 0 ||
           reorder_step >= 0 || (hparam_from >= 0 && (lr_scale != 1.0f || wd_scale != 1.0f)) ||
           bf16_from >= 0 || claim_steps >= 0 || (rounding != RoundingFault::None && rounding_step >= 0);
  }
};

/// Applies `fault`'s rounding tampering (if any) to node `node` of step `step` of a rounding-log run:
/// `wide` are the node's float64 outputs, `log` and `out` the log and float32 outputs round_logged gave
/// them (ops/rounding_log.h); both are rewritten as RoundingFault says. `tau` is the op's τ, `quanta`
/// the node's rounding quanta (ops/float64/float64.h rounding_quanta).
void tamper_rounding(const Fault& fault, int64_t step, size_t node, std::span<const std::vector<double>> wide,
                     RoundingLog& log, std::span<Tensor* const> out, double tau,
                     std::span<const std::vector<double>> quanta);

/// One line for logs, e.g. "honest" or "relabel step 9 position 3 -> label 7; bf16 linear from step 4".
std::string describe(const Fault& fault);

/// Checks the fault's parameters against the job and its data (node, slot and element exist at that
/// step; batch positions < batch size; rows < samples; labels < classes; steps ≥ 0; skip_count ≥ 1;
/// scales finite; 1 ≤ claim_steps ≤ kMaxSteps). Throws EngineError naming the field. The Trainer
/// calls it (through the fault's policy, StepPolicy::check).
void check_fault(const Fault& fault, const JobSpec& job, const DataShape& data);

/// The float32 value rounded to bfloat16 precision (its upper 16 bits), round-to-nearest-even on the
/// bits as hardware converters do; NaN stays NaN (quiet), ±inf stays, overflow rounds to ±inf.
float round_to_bf16(float x);

}  // namespace tribunal::cheats
