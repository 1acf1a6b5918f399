// The one seam through which a trainer's steps may deviate from its job: the batch, the graph's
// attributes, a node's outputs after it runs, a rounding-log node's log, and the state it claims.
// The engine itself only ever runs the honest policy (every hook the job's computation); the cheaters
// that simulate dishonest providers (demo, tests, scenario scripts) implement it above the engine, in
// cheats/ (docs/protocol.md "Cheater behaviours in the engine"). A trainer answering a dispute
// recomputes with the policy it trained with, so a cheater answers consistently with its own trajectory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "engine/job.h"
#include "engine/sampler.h"
#include "engine/state.h"
#include "engine/step.h"

namespace tribunal {

/// The graph attributes of one step (StepPolicy::graph_attributes).
struct GraphAttributes {
  /// The job whose attributes (batch aside) step t's graph is built from; empty: the trainer's job.
  std::optional<JobSpec> job;
  /// The node records name the trainer's job's attributes, not the ones the step ran with.
  bool records_name_job = false;
};

/// How a trainer's steps are computed and claimed. Every hook's default is the honest one (the job's
/// computation, unchanged); a policy overrides only where it deviates. A policy may keep state across
/// the steps of one trainer: each Trainer runs its own clone(), so one policy object may be shared by
/// trainers on several threads.
class StepPolicy {
 public:
  /// `replay_to(s)` runs the calling trainer's own trajectory (this policy's, from its state 0) up to
  /// state s and then restores the state it had; the hooks see those steps again.
  using Replay = std::function<void(int64_t state)>;
  /// Called after node `n` of a rounding-log step is rounded (RoundingRun::tamper).
  using RoundingTamper = decltype(RoundingRun::tamper);

  virtual ~StepPolicy() = default;

  /// A fresh copy, without the state an earlier trainer left in this one.
  virtual std::unique_ptr<StepPolicy> clone() const = 0;

  /// Checks the policy's parameters against the job and its data; throws EngineError naming the
  /// parameter. The Trainer calls it once, before any step.
  virtual void check(const JobSpec& job, const DataShape& data) const { (void)job, (void)data; }

  /// True for a policy whose every hook is the honest one (logs mark other providers as cheating).
  virtual bool honest() const { return true; }

  /// One line for logs: "honest", or what the policy changes.
  virtual std::string describe() const { return "honest"; }

  /// The steps the trainer trains and claims (run_training's default target): the job's T.
  virtual int64_t claimed_steps(const JobSpec& job) const { return job.steps; }

  /// State 0 as claimed, given the job's initial_state.
  virtual void initial_state(State& state) const { (void)state; }

  /// The data-set rows step t trains on (the gathers' attributes): the job's permutation.
  virtual std::vector<int64_t> batch(int64_t t, BatchSampler& sampler) const { return sampler.indices(t); }

  /// The attributes step t's graph is built from, and the ones its node records name: the job's.
  virtual GraphAttributes graph_attributes(int64_t t, const JobSpec& job) const {
    (void)t, (void)job;
    return {};
  }

  /// The hook called after each node of step t (graph `g`) runs, with its outputs, which it may
  /// rewrite (later nodes see the rewritten values); empty: none.
  virtual Executor::NodeHook node_hook(int64_t t, const StepGraph& g) const {
    (void)t, (void)g;
    return {};
  }

  /// Rounding-log jobs: the tampering of step t's logs and outputs, applied instead of replaying
  /// stored logs (the trainer's own float64 values would refuse a tampered log); empty: none.
  virtual RoundingTamper rounding_tamper(int64_t t) const {
    (void)t;
    return {};
  }

  /// Called before step t runs. True: the trainer keeps a copy of the pre-state and calls
  /// claimed_state after the step.
  virtual bool begin_step(int64_t t, const Replay& replay_to) {
    (void)t, (void)replay_to;
    return false;
  }

  /// After step t (when begin_step said so): `post` is the state the nodes computed, which the policy
  /// may replace with the state it claims. True when the claim is not the nodes' outputs (the step's
  /// trace then commits `post` itself, and its loss is the claimed state's "loss").
  virtual bool claimed_state(int64_t t, const State& pre, State& post) {
    (void)t, (void)pre, (void)post;
    return false;
  }
};

/// The honest policy: the job's computation, every hook the default.
class HonestPolicy final : public StepPolicy {
 public:
  std::unique_ptr<StepPolicy> clone() const override { return std::make_unique<HonestPolicy>(); }
};

/// A policy shared by the trainers of one provider; empty means honest.
using StepPolicyPtr = std::shared_ptr<const StepPolicy>;

/// True when `policy` is empty or honest().
inline bool is_honest(const StepPolicyPtr& policy) {
  return !policy || policy->honest();
}

}  // namespace tribunal
