// Disputes about a rounding-log job (docs/protocol.md, "Rounding-log jobs"), in process on
// scenarios/jobs/short_mlp_rlog.toml: the responder opens its own log of a node, proven against its
// record; the referee re-executes in float64 and rounds by each party's log; a corrupted output, a
// forged decision, a bloated log and an omitted decision end as the protocol says.
#include <doctest/doctest.h>

#include "dispute/job_oracle.h"
#include "dispute/responder.h"
#include "engine/error.h"
#include "protocol/game.h"
#include "protocol/input_opening.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

using testing::Outcome;
using testing::Provider;
using testing::short_rlog_job;
using testing::train_set;

const Provider& honest() {
  static const Provider p(Fault{}, short_rlog_job());
  return p;
}

// A rounding fault; `also_corrupt` ≥ 0 also corrupts element 0 of that node of the same step, later in
// the step: bloat and omit leave every output unchanged, so alone they change no claim (two equal
// claims are never disputed); the game then stops at the first differing record, the tampered log.
Fault rounding(RoundingFault kind, int64_t step, int64_t node = 0, int64_t element = 0,
               int64_t also_corrupt = -1) {
  Fault f;
  if (also_corrupt >= 0) {
    f.step = step;
    f.node = also_corrupt;
    f.element = 0;
    f.delta = 1e-3f;
  }
  f.rounding = kind;
  f.rounding_step = step;
  f.rounding_node = node;
  f.rounding_element = element;
  return f;
}

// Plays the cheater in both seats; returns the verdict with the cheater as party 1.
Outcome both_seats(const Provider& cheater) {
  const Outcome first = testing::play_direct(cheater, honest());
  const Outcome second = testing::play_direct(honest(), cheater);
  CHECK(first.verdict.reason == second.verdict.reason);
  CHECK(first.verdict.step == second.verdict.step);
  CHECK(first.verdict.node == second.verdict.node);
  if (!first.verdict.losers.empty()) CHECK(first.verdict.losers == std::vector<uint8_t>{0});
  return second;
}

}  // namespace

TEST_CASE(
    "the responder opens its own rounding log of a node, proven against its record's last output hash") {
  const JobSpec job = short_rlog_job();
  ThreadPool pool(2);
  DisputeResponder r(job, train_set(), honest().store.path, pool);
  const JobOracle oracle(job, testing::data_shape());
  const StepSpec spec = oracle.step_spec(13);
  for (uint64_t node : {uint64_t{0}, uint64_t{2}, uint64_t{spec.nodes.size() - 1}}) {
    CAPTURE(node);
    REQUIRE(spec.nodes[node].rounding_log);
    Query q;
    q.round = 4;
    q.kind = QueryKind::OpenRecords;
    q.level = Level::Nodes;
    q.interval = 2;  // checkpoints 0, 8, 16, 24, 30: step 13 is in [8, 16)
    q.step = 13;
    q.indices = {node};
    const Records rec = std::get<Records>(r.answer(q).at(0));
    REQUIRE(rec.records.at(0).outputs.size() == spec.nodes[node].outputs);
    q.round = 5;
    q.kind = QueryKind::OpenLog;
    const std::vector<Body> chunks = r.answer(q);
    REQUIRE(!chunks.empty());
    InputOpening opening({ExpectedTensor{{static_cast<int64_t>(spec.nodes[node].log_values)},
                                         rec.records[0].outputs.back(),
                                         DType::Trits}},
                         {});
    for (const Body& b : chunks) {
      std::string why;
      CHECK(opening.accept(std::get<TensorChunk>(b), why) == Acceptance::Taken);
      CHECK(why.empty());
      CHECK(std::get<TensorChunk>(b).round == 5);
    }
    REQUIRE(opening.complete());
    const std::vector<uint8_t> log = opening.take().tensors.at(0).bytes;
    CHECK(rounding_log_leaf(RoundingLog{spec.nodes[node].log_values, log}) == rec.records[0].outputs.back());
  }
  Query bad;
  bad.kind = QueryKind::OpenLog;
  bad.interval = 2;
  bad.step = 13;
  bad.indices = {spec.nodes.size()};
  CHECK_THROWS_AS(r.answer(bad), EngineError);

  // A RepOps job has no logs to open.
  const Provider repops(Fault{});
  DisputeResponder plain(testing::short_job(), train_set(), repops.store.path, pool);
  bad.indices = {2};
  CHECK_THROWS_WITH_AS(plain.answer(bad), doctest::Contains("not a rounding-log job"), EngineError);
}

TEST_CASE("rounding-log disputes: a corrupted output loses with wrong_output at its node") {
  Fault f;
  f.step = 11;
  f.node = 2;
  f.element = -1;  // every element: one alone may be cut off by the ReLU and change nothing
  f.delta = 0.5f;
  const Outcome o = both_seats(Provider(f, short_rlog_job()));
  CHECK(o.verdict.reason == VerdictReason::WrongOutput);
  CHECK(o.verdict.losers == std::vector<uint8_t>{1});
  CHECK(o.verdict.winners == std::vector<uint8_t>{0});
  CHECK(o.verdict.step == 11);
  CHECK(o.verdict.node == 2);
  CHECK(o.verdict.op == static_cast<uint8_t>(OpKind::Linear));
}

TEST_CASE("rounding-log disputes: a forged decision loses with bad_rounding_log at its node") {
  // Node 13, the first adamw: its outputs are the next state, so the forged neighbour changes the claim.
  const Outcome o = both_seats(Provider(rounding(RoundingFault::Forge, 9, 13, 100), short_rlog_job()));
  CHECK(o.verdict.reason == VerdictReason::BadRoundingLog);
  CHECK(o.verdict.losers == std::vector<uint8_t>{1});
  CHECK(o.verdict.winners == std::vector<uint8_t>{0});
  CHECK(o.verdict.step == 9);
  CHECK(o.verdict.node == 13);
  CHECK(o.verdict.op == static_cast<uint8_t>(OpKind::AdamW));
  CHECK(o.verdict.detail.find("not allowed for the referee's float64 value") != std::string::npos);
}

TEST_CASE("rounding-log disputes: a bloated log loses with bad_rounding_log at the step's first node") {
  const Provider bloat_only(rounding(RoundingFault::Bloat, 20), short_rlog_job());
  CHECK(bloat_only.result.trajectory_root == honest().result.trajectory_root);  // nothing to dispute alone
  const Outcome o = both_seats(Provider(rounding(RoundingFault::Bloat, 20, 0, 0, 16), short_rlog_job()));
  CHECK(o.verdict.reason == VerdictReason::BadRoundingLog);
  CHECK(o.verdict.losers == std::vector<uint8_t>{1});
  CHECK(o.verdict.step == 20);
  CHECK(o.verdict.node == 0);
  CHECK(o.verdict.op == static_cast<uint8_t>(OpKind::Gather));
}

TEST_CASE(
    "rounding-log disputes: an omitted decision is caught where it was owed, else both logs are valid") {
  // Step 3, node 2: the first decision's value is within tau/2 of the boundary for the referee, so
  // "nearest" is refused there.
  const Outcome caught = both_seats(Provider(rounding(RoundingFault::Omit, 3, 2, 0, 16), short_rlog_job()));
  CHECK(caught.verdict.reason == VerdictReason::BadRoundingLog);
  CHECK(caught.verdict.losers == std::vector<uint8_t>{1});
  CHECK(caught.verdict.winners == std::vector<uint8_t>{0});
  CHECK(caught.verdict.step == 3);
  CHECK(caught.verdict.node == 2);
  CHECK(caught.verdict.detail.find("is nearest, not allowed") != std::string::npos);
  // Step 1, node 2: it is between tau/2 and tau away, so "nearest" is allowed. Both logs replay to
  // their party's outputs (the same ones), the dispute ends there undecided, and the corruption of
  // node 16 later in the step is never examined (docs/protocol.md, "Rounding-log jobs").
  const Outcome valid = both_seats(Provider(rounding(RoundingFault::Omit, 1, 2, 0, 16), short_rlog_job()));
  CHECK(valid.verdict.reason == VerdictReason::BothValid);
  CHECK(valid.verdict.losers.empty());
  CHECK(valid.verdict.winners.empty());
  CHECK(valid.verdict.step == 1);
  CHECK(valid.verdict.node == 2);
  // A node that logged no decision at that step (node 5, the scalar loss, tau 2^-16): the omission
  // changes nothing, node 16 is caught.
  const Outcome none = both_seats(Provider(rounding(RoundingFault::Omit, 3, 5, 0, 16), short_rlog_job()));
  CHECK(none.verdict.reason == VerdictReason::WrongOutput);
  CHECK(none.verdict.node == 16);
}
