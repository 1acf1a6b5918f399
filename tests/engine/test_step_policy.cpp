// The engine's one seam for deviating from a job (engine/step_policy.h): a policy whose every hook
// is the identity commits exactly the honest trainer's trajectory, the golden root of
// scenarios/jobs/short_mlp.toml, while every hook is called.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>

#include "engine/step_policy.h"
#include "engine/trainer.h"
#include "tests/engine/engine_helpers.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

// Calls of each hook, over every clone of one policy.
struct HookCalls {
  std::atomic<int64_t> batch{0}, attributes{0}, nodes{0}, begin{0}, claimed{0};
};

// Overrides every hook of StepPolicy with the honest answer, counting the calls: the trainer then
// copies the pre-state of every step and runs a node hook after every node, and must still commit
// the honest bits.
class IdentityPolicy final : public StepPolicy {
 public:
  explicit IdentityPolicy(std::shared_ptr<HookCalls> calls) : calls_(std::move(calls)) {}
  std::unique_ptr<StepPolicy> clone() const override { return std::make_unique<IdentityPolicy>(calls_); }
  std::vector<int64_t> batch(int64_t t, BatchSampler& sampler) const override {
    ++calls_->batch;
    return sampler.indices(t);
  }
  GraphAttributes graph_attributes(int64_t, const JobSpec&) const override {
    ++calls_->attributes;
    return {};
  }
  Executor::NodeHook node_hook(int64_t, const StepGraph&) const override {
    return [calls = calls_](size_t, std::span<Tensor* const>) { ++calls->nodes; };
  }
  bool begin_step(int64_t, const Replay&) override {
    ++calls_->begin;
    return true;  // keep the pre-state: claimed_state sees every step
  }
  bool claimed_state(int64_t, const State& pre, State& post) override {
    ++calls_->claimed;
    CHECK(post.step() == pre.step() + 1);
    return false;
  }

 private:
  std::shared_ptr<HookCalls> calls_;
};

TrainResult train_with(StepPolicyPtr policy) {
  const JobSpec job = load_job(testing::source_dir() / "scenarios/jobs/short_mlp.toml");
  TrainOptions o;
  o.threads = 2;
  o.evaluate = false;
  o.policy = std::move(policy);
  return run_training(job, o);
}

}  // namespace

TEST_CASE("the default policy and a policy of identity hooks commit the golden trajectory root") {
  const std::string golden = testing::pinned_root("golden_roots.txt", "scenarios/jobs/short_mlp.toml");
  const TrainResult by_default = train_with(nullptr);
  CHECK(to_hex(by_default.trajectory_root) == golden);
  CHECK(to_hex(train_with(std::make_shared<HonestPolicy>()).trajectory_root) == golden);

  auto calls = std::make_shared<HookCalls>();
  const TrainResult identity = train_with(std::make_shared<IdentityPolicy>(calls));
  CHECK(identity.trajectory_root == by_default.trajectory_root);
  CHECK(identity.final_state_hash == by_default.final_state_hash);
  CHECK(identity.loss_last == by_default.loss_last);
  CHECK(identity.steps == 30);
  CHECK(calls->begin.load() == 30);
  CHECK(calls->claimed.load() == 30);
  CHECK(calls->batch.load() == 30);
  CHECK(calls->attributes.load() == 30);
  CHECK(calls->nodes.load() == 30 * 17);  // the short MLP's step has 17 nodes (docs/architecture.md)
}

TEST_CASE("the honest policy is honest") {
  const HonestPolicy honest;
  CHECK(honest.honest());
  CHECK(honest.describe() == "honest");
  CHECK(is_honest(nullptr));
  CHECK(is_honest(std::make_shared<HonestPolicy>()));
}
