// Shared by the dispute tests (tests/dispute, and tests/cheats, tests/referee): the short job of
// scenarios/jobs/short_mlp.toml, its training set loaded once per test binary, providers trained into their
// own checkpoint stores (honest or with a Fault, cheats/fault.h), and the game played in process between
// their DisputeResponders with the referee's JobOracle, messages delivered directly (the signed-envelope path
// is tests/referee).
#pragma once

#include <doctest/doctest.h>

#include <filesystem>

#include "cheats/fault_policy.h"
#include "dispute/job_oracle.h"
#include "dispute/responder.h"
#include "protocol/game.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

namespace tribunal::testing {

inline JobSpec short_job() {
  return load_job(tribunal::testing::source_dir() / "scenarios/jobs/short_mlp.toml");
}

/// The short job in rounding-log mode (scenarios/jobs/short_mlp_rlog.toml): the same model, data
/// and schedule.
inline JobSpec short_rlog_job() {
  return load_job(tribunal::testing::source_dir() / "scenarios/jobs/short_mlp_rlog.toml");
}

inline const Dataset& train_set() {
  static ThreadPool pool(2);
  static const Dataset data = load_dataset(short_job(), Split::Train, pool);
  return data;
}

inline DataShape data_shape() {
  return data_shape_of(train_set());
}

/// A provider that trained `job` (the short job unless given) with `fault` into its own store
/// (run_training on `data`, by default the short job's shared training set).
struct Provider {
  TempDir store{"dispute"};
  TrainResult result;
  cheats::Fault fault;
  JobSpec job;
  const Dataset* data;
  /// `audit_of`: the store of the trainer whose rounding logs this provider replays as an auditor (a
  /// rounding-log job with roles); empty: it trains with its own.
  explicit Provider(const cheats::Fault& f, JobSpec j = short_job(),
                    const std::filesystem::path& audit_of = {}, const Dataset* train = &train_set())
      : fault(f), job(std::move(j)), data(train) {
    TrainOptions o;
    o.out_dir = store.path;
    o.evaluate = false;
    o.threads = 2;
    if (!audit_of.empty()) o.rounding = RoundingOptions{default_float64_gemm(), audit_of, true};
    o.policy = cheats::fault_policy(f);
    o.train = data;
    result = run_training(job, o);
  }
  Claim claim() const {
    return {result.job_id, static_cast<uint64_t>(result.steps), result.trajectory_root,
            result.final_state_hash, ""};
  }
};

struct Outcome {
  Verdict verdict;
  uint32_t rounds = 0;
};

/// Plays the game between `a` (party 0) and `b` (party 1) to its verdict; a rejected message fails
/// the test (honest algorithms fed wrong traces never send one).
/// `trainer`: in a rounding-log job with roles, the party whose claim is the trainer's (GameParams::trainer).
/// `trainer_key`: the trainer's claim key, which an auditor's LogEvidence must be signed by.
inline Outcome play_direct(const Provider& a, const Provider& b, int trainer = -1,
                           const std::array<uint8_t, 32>& trainer_key = {}) {
  const JobSpec& job = a.job;
  const Dataset& data = *a.data;
  ThreadPool pool(1);
  JobOracle oracle(job, data_shape_of(data));
  GameParams params;
  params.job_id = a.result.job_id;
  params.steps = static_cast<uint64_t>(job.steps);
  params.stride = static_cast<uint64_t>(job.stride);
  params.dataset_root = data.root;
  params.dataset_samples = static_cast<uint64_t>(data.labels.numel());
  params.claims = {a.claim(), b.claim()};
  params.trainer = trainer;
  params.trainer_key = trainer_key;
  DisputeResponder r0(job, data, a.store.path, pool, cheats::fault_policy(a.fault)),
      r1(job, data, b.store.path, pool, cheats::fault_policy(b.fault));
  DisputeResponder* responders[2] = {&r0, &r1};
  Game game(params, oracle);
  std::vector<Action> pending = game.start(GameTime{});
  Outcome out;
  while (!pending.empty()) {
    std::vector<Action> next;
    for (const Action& act : pending) {
      std::vector<Action> more;
      if (const auto* q = std::get_if<SendQuery>(&act)) {
        for (const Body& body : responders[q->party]->answer(q->query)) {
          if (!game.awaiting(q->party)) break;  // the other party's opening of inputs came first
          auto m = game.on_message(q->party, body, GameTime{});
          // The other party's opening of inputs came first and the logs are asked for now.
          if (is_refusal(m) && std::get<Rejected>(m.front()).redundant) break;
          more.insert(more.end(), m.begin(), m.end());
        }
      } else if (const auto* rx = std::get_if<Reexecute>(&act)) {
        more = game.on_reexecuted(oracle.reexecute(*rx), GameTime{});
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

}  // namespace tribunal::testing
