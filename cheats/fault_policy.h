// A Fault (cheats/fault.h) as the engine's step policy (engine/step_policy.h): the cheater that
// `tribunal provider|demo --corrupt`, the scenario scripts' [provider.work] and the tests train with.
#pragma once

#include <memory>
#include <vector>

#include "cheats/fault.h"
#include "engine/step_policy.h"

namespace tribunal::cheats {

/// The step policy that trains as `fault` says: every behaviour of Fault through the hooks of
/// StepPolicy (the batch for swap and reorder, the graph attributes for hyperparameters, the node hook
/// for corrupt, relabel and bf16, the rounding tamper, the claimed state for skips, state 0 for
/// init_delta, the claimed steps). Honest (StepPolicy::honest) exactly when !fault.any().
class FaultPolicy final : public StepPolicy {
 public:
  explicit FaultPolicy(Fault fault) : fault_(fault) {}

  std::unique_ptr<StepPolicy> clone() const override { return std::make_unique<FaultPolicy>(fault_); }
  void check(const JobSpec& job, const DataShape& data) const override;
  bool honest() const override { return !fault_.any(); }
  std::string describe() const override { return cheats::describe(fault_); }
  int64_t claimed_steps(const JobSpec& job) const override;
  void initial_state(State& state) const override;
  std::vector<int64_t> batch(int64_t t, BatchSampler& sampler) const override;
  GraphAttributes graph_attributes(int64_t t, const JobSpec& job) const override;
  Executor::NodeHook node_hook(int64_t t, const StepGraph& g) const override;
  RoundingTamper rounding_tamper(int64_t t) const override;
  bool begin_step(int64_t t, const Replay& replay_to) override;
  bool claimed_state(int64_t t, const State& pre, State& post) override;

  const Fault& fault() const { return fault_; }

 private:
  bool skipped(int64_t t) const;  // step t is one of the fault's skipped steps

  Fault fault_;
  std::vector<Tensor> skip_delta_;  // Extrapolate: state(skip_from) − state(skip_from − 1), once known
};

/// The policy of `fault`, shared by the trainers of one provider (a FaultPolicy, honest when
/// !fault.any()).
StepPolicyPtr fault_policy(const Fault& fault);

}  // namespace tribunal::cheats
