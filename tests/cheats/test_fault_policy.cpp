// A Fault through the engine's step policy (cheats/fault_policy.h): a corrupting policy changes the
// chosen node's output at the chosen step, by the chosen delta at the chosen element, and nothing
// before it; the honest trainer and the policy of an honest Fault trace the same steps.
#include <doctest/doctest.h>

#include <vector>

#include "cheats/fault_policy.h"
#include "engine/trainer.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

using testing::short_job;
using testing::train_set;

// The traces of steps 0 … steps − 1 of the short job under `policy`.
std::vector<StepTrace> traces(StepPolicyPtr policy, int steps) {
  ThreadPool pool(1);
  Trainer trainer(short_job(), train_set(), pool, std::move(policy));
  std::vector<StepTrace> out;
  for (int t = 0; t < steps; ++t) out.push_back(trainer.traced_step());
  return out;
}

// Whether two node records commit the same (NodeRecord has no operator==).
bool same(const NodeRecord& a, const NodeRecord& b) {
  return node_record_hash(a) == node_record_hash(b);
}

}  // namespace

TEST_CASE("a corrupting policy changes exactly the chosen node's output at the chosen step") {
  Fault f;
  f.step = 2;
  f.node = 4;
  f.slot = 0;
  f.element = 3;
  f.delta = 0.5f;
  const StepPolicyPtr cheat = fault_policy(f);
  CHECK_FALSE(cheat->honest());
  CHECK(cheat->describe() == "corrupt step 2 node 4 output 0 element 3 by +0.5");

  const std::vector<StepTrace> honest = traces(nullptr, 3), corrupt = traces(cheat, 3);
  for (int t = 0; t < 2; ++t) {  // before the step: the same trajectory
    CHECK(corrupt[t].records.size() == honest[t].records.size());
    for (size_t n = 0; n < honest[t].records.size(); ++n)
      CHECK(same(corrupt[t].records[n], honest[t].records[n]));
    CHECK(corrupt[t].post_state == honest[t].post_state);
  }
  const StepTrace &h = honest[2], &c = corrupt[2];
  for (size_t n = 0; n < 4; ++n) CHECK(same(c.records[n], h.records[n]));  // the nodes before it
  // The node's inputs are the honest ones; its output differs at element 3 alone, by the delta.
  CHECK(c.records[4].inputs == h.records[4].inputs);
  CHECK(c.records[4].outputs != h.records[4].outputs);
  const ValueId out = h.graph.nodes[4].outputs[0];
  const std::span<const float> hv = h.values[out].values(), cv = c.values[out].values();
  REQUIRE(hv.size() == cv.size());
  REQUIRE(hv.size() > 3);
  for (size_t e = 0; e < hv.size(); ++e) {
    if (e == 3)
      CHECK(cv[e] == hv[e] + 0.5f);
    else
      CHECK(cv[e] == hv[e]);
  }
  CHECK(c.post_state != h.post_state);  // the corruption reaches the claimed state
}

TEST_CASE("the policy of an honest Fault traces the honest steps") {
  const StepPolicyPtr none = fault_policy(Fault{});
  CHECK(none->honest());
  CHECK(none->describe() == "honest");
  const std::vector<StepTrace> honest = traces(nullptr, 2), policy = traces(none, 2);
  for (int t = 0; t < 2; ++t) {
    for (size_t n = 0; n < honest[t].records.size(); ++n)
      CHECK(same(policy[t].records[n], honest[t].records[n]));
    CHECK(policy[t].post_state == honest[t].post_state);
  }
}
