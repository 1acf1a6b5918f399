// Disputes on the real Fashion-MNIST MLP, in process: an honest provider against a cheater that
// corrupts one node output (at the first, a middle and the last step; at the first, a middle and the
// last node; forward, backward and optimizer nodes), swaps a data-set sample or starts from wrong
// weights. The honest provider wins every time and the verdict names the exact step and node.
#include <doctest/doctest.h>

#include <filesystem>

#include "dispute/job_oracle.h"
#include "engine/error.h"
#include "protocol/game.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

using testing::Outcome;
using testing::Provider;
using testing::short_job;
using testing::train_set;

Outcome play(const Provider& a, const Provider& b) {
  return testing::play_direct(a, b);
}

Fault corrupt(int64_t step, int64_t node, float delta = 10.0f) {  // large enough to survive a ReLU
  Fault f;
  f.step = step;
  f.node = node;
  f.delta = delta;
  return f;
}

}  // namespace

TEST_CASE("an honest provider beats a corrupted node output, located exactly") {
  const Provider honest(Fault{});
  const StepGraph g = JobOracle(short_job(), {60000, 784, 10}).graph(0);
  const int64_t last_node = static_cast<int64_t>(g.nodes.size()) - 1;
  // step × node: first/middle/last steps; gather, forward linear, backward matmul, optimizer.
  const std::vector<std::pair<int64_t, int64_t>> cases = {
      {0, 2}, {13, 2}, {29, 2}, {13, 0}, {13, last_node / 2}, {13, last_node}, {7, 8}, {23, last_node - 1}};
  for (const auto& c : cases) {
    const int64_t step = c.first, node = c.second;
    CAPTURE(step);
    CAPTURE(node);
    CAPTURE(op_name(g.nodes[static_cast<size_t>(node)].op));
    const Provider cheater(corrupt(step, node));
    REQUIRE(cheater.result.trajectory_root != honest.result.trajectory_root);
    for (int cheater_party = 0; cheater_party < 2; ++cheater_party) {
      const Outcome o = cheater_party == 0 ? play(cheater, honest) : play(honest, cheater);
      CHECK(o.verdict.losers == std::vector<uint8_t>{static_cast<uint8_t>(cheater_party)});
      CHECK(o.verdict.winners == std::vector<uint8_t>{static_cast<uint8_t>(1 - cheater_party)});
      CHECK(o.verdict.reason == VerdictReason::WrongOutput);
      CHECK(o.verdict.step == static_cast<uint64_t>(step));
      CHECK(o.verdict.node == static_cast<uint64_t>(node));
      CHECK(o.verdict.op == static_cast<uint8_t>(g.nodes[static_cast<size_t>(node)].op));
    }
  }
}

TEST_CASE("a swapped data-set sample is caught at the gather node") {
  const Provider honest(Fault{});
  Fault f;
  f.swap_step = 17;
  f.swap_position = 5;
  f.swap_row = 12345;
  const Provider cheater(f);
  const Outcome o = play(honest, cheater);
  CHECK(o.verdict.losers == std::vector<uint8_t>{1});
  CHECK(o.verdict.step == 17);
  CHECK(o.verdict.node <= 1);  // one of the two gathers (inputs, labels)
  CHECK(o.verdict.op == static_cast<uint8_t>(OpKind::Gather));
  CHECK(o.verdict.reason == VerdictReason::InconsistentInput);
}

TEST_CASE("wrong initial weights lose at the first checkpoint") {
  const Provider honest(Fault{});
  Fault f;
  f.init_delta = 0.01f;
  const Provider cheater(f);
  const Outcome o = play(cheater, honest);
  CHECK(o.verdict.losers == std::vector<uint8_t>{0});
  CHECK(o.verdict.reason == VerdictReason::WrongInitialState);
  CHECK(o.verdict.level == Level::Checkpoints);
}

TEST_CASE("two cheaters at the same node, differently: no valid claim") {
  const Provider a(corrupt(11, 4, 5.0f)), b(corrupt(11, 4, 7.0f));
  const Outcome o = play(a, b);
  CHECK(o.verdict.winners.empty());
  CHECK(o.verdict.losers == std::vector<uint8_t>{0, 1});
  CHECK(o.verdict.step == 11);
  CHECK(o.verdict.node == 4);
}

TEST_CASE("two honest providers make the same claim: nothing to dispute") {
  const Provider a(Fault{}), b(Fault{});
  CHECK(a.result.trajectory_root == b.result.trajectory_root);
  CHECK_THROWS_AS(play(a, b), ProtocolError);
}
