// Disputes about a rounding-log job with roles (docs/protocol.md, "Rounding-log jobs"; docs/numerics.md,
// "Trainer and auditors"), in process on scenarios/jobs/short_mlp_rlog.toml with a named trainer: the
// auditor replays the trainer's logs, only the trainer opens its log at the located node, and that log
// decides for both parties. Every rounding cheat of the catalog is decided against the cheater in either
// role, the scenario (an in-band decision flipped, then an output corrupted in the same step)
// included, and no dispute with an honest party ends both_valid.
#include <doctest/doctest.h>

#include <fstream>

#include "engine/error.h"
#include "protocol/envelope.h"
#include "protocol/game.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

using testing::Outcome;
using testing::Provider;
using testing::train_set;

JobSpec roles_job() {
  JobSpec job = testing::short_rlog_job();
  job.numerics.trainer = "ws://trainer.invalid/";
  return job;
}

const Provider& honest_trainer() {
  static const Provider p(Fault{}, roles_job());
  return p;
}

const Provider& honest_auditor() {
  static const Provider p(Fault{}, roles_job(), honest_trainer().store.path);
  return p;
}

// A rounding fault; `also_corrupt` ≥ 0 also adds `delta` to element 0 of that node of the same step.
Fault rounding(RoundingFault kind, int64_t step, int64_t node = 0, int64_t element = 0,
               int64_t also_corrupt = -1, float delta = 1e-3f) {
  Fault f;
  if (also_corrupt >= 0) {
    f.step = step;
    f.node = also_corrupt;
    f.element = 0;
    f.delta = delta;
  }
  f.rounding = kind;
  f.rounding_step = step;
  f.rounding_node = node;
  f.rounding_element = element;
  return f;
}

// The cheater as the trainer against an honest auditor of its logs, in both seats; returns the verdict
// with the cheater as party 1 and checks the seats agree and the cheater alone loses.
Outcome cheating_trainer(const Fault& f) {
  const Provider cheater(f, roles_job());
  const Provider auditor(Fault{}, roles_job(), cheater.store.path);
  REQUIRE(cheater.result.trajectory_root != auditor.result.trajectory_root);
  const Outcome first = testing::play_direct(cheater, auditor, 0);
  const Outcome second = testing::play_direct(auditor, cheater, 1);
  CHECK(first.verdict.reason == second.verdict.reason);
  CHECK(first.verdict.step == second.verdict.step);
  CHECK(first.verdict.node == second.verdict.node);
  CHECK(first.verdict.losers == std::vector<uint8_t>{0});
  CHECK(first.verdict.winners == std::vector<uint8_t>{1});
  CHECK(second.verdict.losers == std::vector<uint8_t>{1});
  CHECK(second.verdict.winners == std::vector<uint8_t>{0});
  return second;
}

// The cheater as an auditor of the honest trainer's logs, in both seats; the same checks.
Outcome cheating_auditor(const Fault& f) {
  const Provider cheater(f, roles_job(), honest_trainer().store.path);
  REQUIRE(cheater.result.trajectory_root != honest_trainer().result.trajectory_root);
  const Outcome first = testing::play_direct(cheater, honest_trainer(), 1);
  const Outcome second = testing::play_direct(honest_trainer(), cheater, 0);
  CHECK(first.verdict.reason == second.verdict.reason);
  CHECK(first.verdict.step == second.verdict.step);
  CHECK(first.verdict.node == second.verdict.node);
  CHECK(first.verdict.losers == std::vector<uint8_t>{0});
  CHECK(first.verdict.winners == std::vector<uint8_t>{1});
  CHECK(second.verdict.losers == std::vector<uint8_t>{1});
  CHECK(second.verdict.winners == std::vector<uint8_t>{0});
  return second;
}

// Where a verdict located the fault, and why the cheater lost.
struct Decided {
  VerdictReason reason;
  uint64_t step;
  uint64_t node;
};

// Fault `f` played by a cheating trainer (cheating_trainer) and by a cheating auditor
// (cheating_auditor): checks each verdict's reason, step and node; returns the trainer's outcome.
Outcome check_both_roles(const Fault& f, const Decided& trainer, const Decided& auditor) {
  const Outcome t = cheating_trainer(f);
  CHECK(t.verdict.reason == trainer.reason);
  CHECK(t.verdict.step == trainer.step);
  CHECK(t.verdict.node == trainer.node);
  const Outcome a = cheating_auditor(f);
  CHECK(a.verdict.reason == auditor.reason);
  CHECK(a.verdict.step == auditor.step);
  CHECK(a.verdict.node == auditor.node);
  return t;
}

}  // namespace

TEST_CASE("roles: an honest auditor replaying the trainer's logs meets its claim, with either float64 GEMM") {
  CHECK(honest_auditor().result.trajectory_root == honest_trainer().result.trajectory_root);
  CHECK(honest_auditor().result.final_state_hash == honest_trainer().result.final_state_hash);
  // The auditor commits to the trainer's logs: its stored logs are the trainer's, byte for byte.
  const JobOracle oracle(roles_job(), testing::data_shape());
  std::vector<uint64_t> counts;
  for (const NodeSpec& n : oracle.step_spec(7).nodes) counts.push_back(n.log_values);
  CHECK(read_rounding_log(rounding_log_path(honest_auditor().store.path, 7), 7, counts).nodes ==
        read_rounding_log(rounding_log_path(honest_trainer().store.path, 7), 7, counts).nodes);
  // Another kernel: the naive loop replays the default GEMM's logs to the same root.
  testing::TempDir dir("audit-naive");
  TrainOptions o;
  o.out_dir = dir.path;
  o.evaluate = false;
  o.threads = 2;
  o.train = &train_set();
  o.rounding = RoundingOptions{Float64Gemm::Naive, honest_trainer().store.path, true};
  CHECK(run_training(roles_job(), o).trajectory_root == honest_trainer().result.trajectory_root);
  // The named trainer is part of the job id.
  CHECK(honest_trainer().result.job_id != Provider(Fault{}, testing::short_rlog_job()).result.job_id);
}

TEST_CASE("roles: the issue's scenario ends with the honest party winning in either role") {
  // An in-band decision of node 2 at step 1 omitted ("nearest"), then 10^6 added to the last adamw
  // node's output in the same step: between independent trainers the dispute ends both_valid at node 2
  // (tests/dispute/test_rounding_dispute.cpp); with roles the trainer's log decides.
  const Fault f = rounding(RoundingFault::Omit, 1, 2, 0, 16, 1e6f);
  // A cheating trainer: the auditor replays its log (the omission changes no output), so the records
  // first differ at the corrupted node, where the trainer's log gives other outputs than it committed.
  const Outcome trainer = cheating_trainer(f);
  CHECK(trainer.verdict.reason == VerdictReason::WrongOutput);
  CHECK(trainer.verdict.step == 1);
  CHECK(trainer.verdict.node == 16);
  CHECK(trainer.verdict.op == static_cast<uint8_t>(OpKind::AdamW));
  // A cheating auditor: its record of node 2 commits to another log than the trainer's.
  const Outcome auditor = cheating_auditor(f);
  CHECK(auditor.verdict.reason == VerdictReason::WrongOutput);
  CHECK(auditor.verdict.step == 1);
  CHECK(auditor.verdict.node == 2);
  CHECK(auditor.verdict.detail.find("does not commit to that log") != std::string::npos);
}

TEST_CASE("roles: every rounding cheat of the catalog is decided against the cheater") {
  SUBCASE("a corrupted output") {
    Fault f;
    f.step = 11;
    f.node = 2;
    f.element = -1;
    f.delta = 0.5f;
    for (const Outcome& o : {cheating_trainer(f), cheating_auditor(f)}) {
      CHECK(o.verdict.reason == VerdictReason::WrongOutput);
      CHECK(o.verdict.step == 11);
      CHECK(o.verdict.node == 2);
    }
  }
  SUBCASE("a forged decision") {
    // The auditor does not follow a direction beyond 2 tau of a boundary: it rounds to nearest, and the
    // referee refuses the trainer's decision.
    const Outcome t =
        check_both_roles(rounding(RoundingFault::Forge, 9, 13, 100), {VerdictReason::BadRoundingLog, 9, 13},
                         {VerdictReason::WrongOutput, 9, 13});
    CHECK(t.verdict.detail.find("the trainer's rounding log") != std::string::npos);
  }
  SUBCASE("a bloated log") {
    // The auditor follows a bloated direction only within 2 tau of a boundary, where it is the side the
    // value rounds to anyway: the bloated log changes no output, and the records first differ at the
    // corrupted node, where the referee refuses the bloated log's first decision.
    check_both_roles(rounding(RoundingFault::Bloat, 20, 0, 0, 16), {VerdictReason::BadRoundingLog, 20, 16},
                     {VerdictReason::WrongOutput, 20, 0});
  }
  SUBCASE("an omitted decision where one was owed") {
    check_both_roles(rounding(RoundingFault::Omit, 3, 2, 0, 16), {VerdictReason::WrongOutput, 3, 16},
                     {VerdictReason::WrongOutput, 3, 2});
  }
}

TEST_CASE("roles: only the trainer opens its log, and a trainer that withholds it loses on its clock") {
  const Fault f = rounding(RoundingFault::Omit, 1, 2, 0, 16, 1e6f);
  const Provider cheater(f, roles_job());
  const Provider auditor(Fault{}, roles_job(), cheater.store.path);
  const JobSpec job = roles_job();
  const JobOracle oracle(job, testing::data_shape());
  ThreadPool pool(1);
  GameParams params;
  params.job_id = cheater.result.job_id;
  params.steps = static_cast<uint64_t>(job.steps);
  params.stride = static_cast<uint64_t>(job.stride);
  params.dataset_root = train_set().root;
  params.dataset_samples = static_cast<uint64_t>(train_set().labels.numel());
  params.claims = {cheater.claim(), auditor.claim()};
  params.trainer = 0;
  DisputeResponder r0(job, train_set(), cheater.store.path, pool, fault_policy(f)),
      r1(job, train_set(), auditor.store.path, pool);
  DisputeResponder* responders[2] = {&r0, &r1};
  Game game(params, oracle);
  GameTime now{};
  std::vector<Action> pending = game.start(now);
  std::optional<Verdict> verdict;
  int log_questions = 0;
  while (!pending.empty()) {
    std::vector<Action> next;
    for (const Action& act : pending) {
      if (const auto* q = std::get_if<SendQuery>(&act)) {
        if (q->query.kind == QueryKind::OpenLog) {
          ++log_questions;
          CHECK(q->party == 0);  // the auditor is never asked for a log
          continue;              // the trainer withholds it
        }
        for (const Body& body : responders[q->party]->answer(q->query)) {
          if (!game.awaiting(q->party)) break;
          auto m = game.on_message(q->party, body, now);
          if (is_refusal(m) && std::get<Rejected>(m.front()).redundant) break;
          next.insert(next.end(), m.begin(), m.end());
        }
      } else if (const auto* f2 = std::get_if<Finished>(&act)) {
        verdict = f2->verdict;
      }
    }
    pending = std::move(next);
  }
  REQUIRE(log_questions == 1);
  REQUIRE_FALSE(game.done());
  CHECK(game.phase() == Phase::OpenLog);
  CHECK(game.awaiting(0));
  CHECK_FALSE(game.awaiting(1));
  const std::vector<Action> end = game.on_tick(*game.next_deadline() + std::chrono::hours(1));
  REQUIRE(end.size() == 1);
  const Verdict& v = std::get<Finished>(end.front()).verdict;
  CHECK(v.reason == VerdictReason::Timeout);
  CHECK(v.losers == std::vector<uint8_t>{0});
  CHECK(v.winners == std::vector<uint8_t>{1});
  CHECK(v.step == 1);
  CHECK(v.node == 16);
}

TEST_CASE(
    "roles: a trainer that signed its auditor other logs than its records commit to loses by equivocation") {
  // The trainer (honest records) served its auditor logs in which every in-band decision of node 2 at
  // step 3 is flipped, under a LogHeader it signed. The auditor follows the flipped decisions (within 2
  // tau of the boundary), so its claim differs, and its record of that node commits to the served log.
  const Provider& trainer = honest_trainer();
  const JobSpec job = roles_job();
  const JobOracle oracle(job, testing::data_shape());
  testing::TempDir served("served-logs");
  for (int64_t t = 0; t < job.steps; ++t) {
    std::vector<uint64_t> counts;
    for (const NodeSpec& n : oracle.step_spec(static_cast<uint64_t>(t)).nodes) counts.push_back(n.log_values);
    StepRoundingLog log = read_rounding_log(rounding_log_path(trainer.store.path, t), t, counts);
    if (t == 3) {
      RoundingLog& node = log.nodes.at(2);
      std::vector<Rounding> d = unpack_trits(node.packed, node.count);
      int flipped = 0;
      for (Rounding& r : d)
        if (r != Rounding::Nearest) {
          r = r == Rounding::Down ? Rounding::Up : Rounding::Down;
          ++flipped;
        }
      REQUIRE(flipped > 0);
      node.packed = pack_trits(d);
    }
    write_rounding_log(rounding_log_path(served.path, t), log);
  }
  const Provider auditor(Fault{}, job, served.path);
  REQUIRE(auditor.result.trajectory_root != trainer.result.trajectory_root);
  const KeyPair key = generate_keypair();
  // Without the trainer's signed header the auditor cannot show it was served that log: it loses.
  const Outcome unproven = testing::play_direct(trainer, auditor, 0, key.public_key);
  CHECK(unproven.verdict.reason == VerdictReason::WrongOutput);
  CHECK(unproven.verdict.losers == std::vector<uint8_t>{1});
  CHECK(unproven.verdict.step == 3);
  CHECK(unproven.verdict.node == 2);
  // The header it kept when it fetched the logs (nodes/trainer_logs.h): the trainer's signature over
  // the served leaves convicts the trainer, in either seat.
  std::vector<uint64_t> counts;
  for (const NodeSpec& n : oracle.step_spec(3).nodes) counts.push_back(n.log_values);
  LogHeader header{auditor.result.job_id, 3, {}};
  for (const RoundingLog& node : read_rounding_log(rounding_log_path(served.path, 3), 3, counts).nodes)
    header.leaves.push_back(rounding_log_leaf(node));
  const auto file = log_header_path(audited_logs_dir(auditor.store.path), 3);
  std::filesystem::create_directories(file.parent_path());
  const std::vector<uint8_t> signed_header = seal(key, auditor.result.job_id, 1, header);
  std::ofstream(file, std::ios::binary)
      .write(reinterpret_cast<const char*>(signed_header.data()),
             static_cast<std::streamsize>(signed_header.size()));
  for (int seat = 0; seat < 2; ++seat) {
    const Outcome o = seat == 0 ? testing::play_direct(trainer, auditor, 0, key.public_key)
                                : testing::play_direct(auditor, trainer, 1, key.public_key);
    CHECK(o.verdict.reason == VerdictReason::Equivocation);
    CHECK(o.verdict.losers == std::vector<uint8_t>{static_cast<uint8_t>(seat)});
    CHECK(o.verdict.step == 3);
    CHECK(o.verdict.node == 2);
  }
  // A header signed by another key than the trainer's proves nothing.
  const Outcome forged = testing::play_direct(trainer, auditor, 0, generate_keypair().public_key);
  CHECK(forged.verdict.reason == VerdictReason::WrongOutput);
  CHECK(forged.verdict.losers == std::vector<uint8_t>{1});
}
