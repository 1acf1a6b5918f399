// Disputes on the real Fashion-MNIST MLP, in process: an honest provider against a cheater that
// corrupts one node output (at the first, a middle and the last step; at the first, a middle and the
// last node; forward, backward and optimizer nodes), swaps a data-set sample or starts from wrong
// weights. The honest provider wins every time and the verdict names the exact step and node.
#include <doctest/doctest.h>

#include <filesystem>

#include "engine/dispute.h"
#include "engine/error.h"
#include "protocol/game.h"
#include "tests/temp_dir.h"

using namespace tribunal;

namespace {

JobSpec short_job() { return load_job(std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/short_mlp.toml"); }

const Dataset& train_set() {
  static ThreadPool pool(2);
  static const Dataset data = load_fashion_mnist(short_job().data_dir, Split::Train, pool);
  return data;
}

struct Provider {
  testing::TempDir store{"dispute"};
  TrainResult result;
  Fault fault;
  explicit Provider(const Fault& f) : fault(f) {
    TrainOptions o;
    o.out_dir = store.path;
    o.evaluate = false;
    o.fault = f;
    result = run_training(short_job(), o);
  }
  Claim claim() const {
    return {result.job_id, static_cast<uint64_t>(result.steps), result.trajectory_root, result.final_state_hash};
  }
};

struct Outcome {
  Verdict verdict;
  uint32_t rounds = 0;
};

// Plays the game between two providers with the referee's JobOracle, delivering messages directly.
Outcome play(const Provider& a, const Provider& b) {
  const JobSpec job = short_job();
  const Dataset& data = train_set();
  ThreadPool pool(1);
  JobOracle oracle(job, {data.inputs.shape()[0], data.inputs.shape()[1], data.classes});
  GameParams params;
  params.job_id = a.result.job_id;
  params.steps = static_cast<uint64_t>(job.steps);
  params.stride = static_cast<uint64_t>(job.stride);
  params.initial_state_hash = state_hash(initial_state(job), pool);
  params.dataset_root = data.root;
  params.dataset_samples = static_cast<uint64_t>(data.labels.numel());
  params.claims = {a.claim(), b.claim()};
  DisputeResponder r0(job, data, a.store.path, pool, a.fault), r1(job, data, b.store.path, pool, b.fault);
  DisputeResponder* responders[2] = {&r0, &r1};
  Game game(params, oracle);
  std::vector<Action> pending = game.start(0);
  Outcome out;
  while (!pending.empty()) {
    std::vector<Action> next;
    for (const Action& act : pending) {
      std::vector<Action> more;
      if (const auto* q = std::get_if<SendQuery>(&act)) {
        for (const Body& body : responders[q->party]->answer(q->query)) {
          auto m = game.on_message(q->party, body, 0);
          more.insert(more.end(), m.begin(), m.end());
        }
      } else if (const auto* rx = std::get_if<Reexecute>(&act)) {
        more = game.on_reexecuted(oracle.reexecute(*rx), 0);
      } else if (const auto* f = std::get_if<Finished>(&act)) {
        out.verdict = f->verdict;
      } else if (const auto* rej = std::get_if<Rejected>(&act)) {
        FAIL("rejected: " << rej->reason);
      }
      next.insert(next.end(), more.begin(), more.end());
    }
    pending = std::move(next);
  }
  REQUIRE(game.done());
  out.rounds = game.rounds();
  return out;
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
