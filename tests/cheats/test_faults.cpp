// Wrong-work cheaters (cheats/fault.h) on the real Fashion-MNIST MLP of scenarios/jobs/short_mlp.toml,
// each against the one shared honest run: lazy training (skipped steps, stale or extrapolated), a
// poisoned sample or label, reordered batches, scaled hyperparameters (claimed or hidden), bf16
// rounding of one op kind, wrong initial weights — each trajectory differs, and the dispute played in
// process ends with the honest party winning, for the exact reason, step and node. A cheater that
// claims another trajectory length only has its claim checked (the referee's side is elsewhere).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>

#include "dispute/job_oracle.h"
#include "engine/error.h"
#include "protocol/game.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

using testing::data_shape;
using testing::Provider;
using testing::short_job;
using testing::train_set;

// run_training with a fault (it loads the data itself).
TrainResult run(const Fault& f, const std::filesystem::path& out) {
  TrainOptions o;
  o.out_dir = out;
  o.evaluate = false;
  o.threads = 2;
  o.policy = fault_policy(f);
  return run_training(short_job(), o);
}

// Trained once for every case.
const Provider& honest() {
  static const Provider p(Fault{});
  return p;
}

Verdict play(const Provider& a, const Provider& b) {
  return testing::play_direct(a, b).verdict;
}

// The graph of step t as the job defines it (the referee's view).
const StepGraph& job_graph(int64_t t) {
  static const JobOracle oracle(short_job(), data_shape());
  return oracle.graph(static_cast<uint64_t>(t));
}

// Index of the first node of kind `op` in the job's step graph.
uint64_t first_node(OpKind op) {
  const StepGraph& g = job_graph(0);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op == op) return n;
  FAIL("no node of kind " << op_name(op));
  return 0;
}

struct Expect {
  VerdictReason reason;
  int64_t step;
  uint64_t node;
  uint8_t op;
};

// Trains the cheater, checks that its trajectory differs and that it loses the dispute from either
// seat with exactly `e`.
void expect_caught(const Fault& f, const Expect& e) {
  CAPTURE(describe(f));
  const Provider cheater(f);
  REQUIRE(cheater.result.steps == honest().result.steps);
  REQUIRE(cheater.result.trajectory_root != honest().result.trajectory_root);
  for (int seat = 0; seat < 2; ++seat) {
    CAPTURE(seat);
    const Verdict v = seat == 0 ? play(cheater, honest()) : play(honest(), cheater);
    MESSAGE(describe(f) << ": " << std::string(reason_name(v.reason)) << " step " << v.step << " node "
                        << v.node << " op " << static_cast<int>(v.op) << " — " << v.detail);
    CHECK(v.losers == std::vector<uint8_t>{static_cast<uint8_t>(seat)});
    CHECK(v.winners == std::vector<uint8_t>{static_cast<uint8_t>(1 - seat)});
    CHECK(v.reason == e.reason);
    CHECK(v.step == static_cast<uint64_t>(e.step));
    CHECK(v.node == e.node);
    CHECK(v.op == e.op);
  }
}

uint8_t op_byte(OpKind op) {
  return static_cast<uint8_t>(op);
}

}  // namespace

TEST_CASE("Fault::any and describe cover every behaviour") {
  CHECK_FALSE(Fault{}.any());
  CHECK(describe(Fault{}) == "honest");
  Fault f;
  f.hparam_from = 3;  // scales of 1 change nothing
  CHECK_FALSE(f.any());
  const auto with = [](auto set) {
    Fault g;
    set(g);
    return g;
  };
  const std::vector<Fault> each = {
      with([](Fault& g) {
        g.step = 1;
        g.node = 2;
      }),
      with([](Fault& g) { g.swap_step = 1; }),
      with([](Fault& g) { g.init_delta = 0.5f; }),
      with([](Fault& g) { g.skip_from = 4; }),
      with([](Fault& g) { g.relabel_step = 2; }),
      with([](Fault& g) {
        g.reorder_step = 2;
        g.reorder_with = 5;
      }),
      with([](Fault& g) {
        g.hparam_from = 2;
        g.lr_scale = 2;
      }),
      with([](Fault& g) {
        g.hparam_from = 2;
        g.wd_scale = 0;
      }),
      with([](Fault& g) { g.bf16_from = 0; }),
      with([](Fault& g) { g.claim_steps = 12; }),
  };
  for (const Fault& g : each) {
    CAPTURE(describe(g));
    CHECK(g.any());
    CHECK(describe(g) != "honest");
    CHECK(describe(g).find('\n') == std::string::npos);
  }
  Fault two;
  two.relabel_step = 9;
  two.relabel_position = 3;
  two.relabel_label = 7;
  two.bf16_from = 4;
  CHECK(describe(two) == "relabel step 9 position 3 -> label 7; bf16 linear from step 4");
}

TEST_CASE("check_fault refuses parameters that do not fit the job") {
  const JobSpec job = short_job();
  const DataShape shape = data_shape();
  CHECK_NOTHROW(check_fault(Fault{}, job, shape));
  const auto refused = [&](auto set) {
    Fault f;
    set(f);
    CHECK_THROWS_AS(check_fault(f, job, shape), EngineError);
  };
  refused([](Fault& f) {
    f.step = 1;
    f.node = 1000;
  });
  refused([](Fault& f) {
    f.step = 1;
    f.node = 2;
    f.slot = 1;
  });
  refused([](Fault& f) {
    f.step = 1;
    f.node = 2;
    f.element = 32 * 32;
  });
  refused([](Fault& f) {
    f.swap_step = 1;
    f.swap_position = 32;
  });
  refused([](Fault& f) {
    f.swap_step = 1;
    f.swap_row = 60000;
  });
  refused([](Fault& f) {
    f.relabel_step = 1;
    f.relabel_label = 10;
  });
  refused([](Fault& f) {
    f.reorder_step = 1;
    f.reorder_with = 1;
  });
  refused([](Fault& f) {
    f.skip_from = 1;
    f.skip_count = 0;
  });
  refused([](Fault& f) {
    f.hparam_from = 1;
    f.lr_scale = std::numeric_limits<float>::infinity();
  });
  refused([](Fault& f) { f.claim_steps = 0; });
  // The trainer checks it too.
  Fault bad;
  bad.relabel_step = 0;
  bad.relabel_position = -1;
  ThreadPool pool(1);
  CHECK_THROWS_AS(Trainer(job, train_set(), pool, fault_policy(bad)), EngineError);
}

TEST_CASE("round_to_bf16 rounds the float32 bits to nearest even") {
  CHECK(round_to_bf16(1.0f) == 1.0f);
  CHECK(round_to_bf16(-2.5f) == -2.5f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1); just above rounds up.
  CHECK(round_to_bf16(1.0f + 0x1p-8f) == 1.0f);
  CHECK(round_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up.
  CHECK(round_to_bf16(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f);
  CHECK(round_to_bf16(0.1f) == 0.10009765625f);
  CHECK(std::isinf(round_to_bf16(std::numeric_limits<float>::max())));
  CHECK(std::isinf(round_to_bf16(-std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(round_to_bf16(std::bit_cast<float>(0x7F800001u))));  // payload only in the low bits
}

TEST_CASE("lazy training: skipped steps lose with wrong_post_state at the first skipped step") {
  const uint64_t nodes = job_graph(0).nodes.size();
  SUBCASE("unchanged state, mid-interval") {
    Fault f;
    f.skip_from = 13;
    f.skip_count = 3;
    expect_caught(f, {VerdictReason::WrongPostState, 13, nodes, 0});
  }
  SUBCASE("extrapolated state from a checkpoint step (the responder replays to learn the delta)") {
    Fault f;
    f.skip_from = 16;
    f.skip_count = 2;
    f.skip_mode = SkipMode::Extrapolate;
    expect_caught(f, {VerdictReason::WrongPostState, 16, nodes, 0});
  }
}

TEST_CASE("an extrapolating skipper claims x(t) + (x(t) − x(t−1)) with the step counter advanced") {
  const JobSpec job = short_job();
  ThreadPool pool(1);
  Fault f;
  f.skip_from = 5;
  f.skip_count = 2;
  f.skip_mode = SkipMode::Extrapolate;
  Trainer honest_trainer(job, train_set(), pool), lazy(job, train_set(), pool, fault_policy(f));
  std::vector<State> states{honest_trainer.state()};
  for (int t = 0; t < 5; ++t) {
    honest_trainer.step();
    lazy.step();
    states.push_back(honest_trainer.state());
  }
  CHECK(lazy.hash_state() == honest_trainer.hash_state());
  lazy.step();
  lazy.step();
  CHECK(lazy.state().step() == 7);
  const Tensor& w = lazy.state().tensors[0];
  const Tensor &w5 = states[5].tensors[0], &w4 = states[4].tensors[0];
  for (int64_t e : {int64_t{0}, int64_t{100}, w.numel() - 1})
    CHECK(w[e] == (w5[e] + (w5[e] - w4[e])) + (w5[e] - w4[e]));
  // A second trainer put straight at state 6 (as a dispute's responder loads a checkpoint) replays
  // from step 0 to learn the delta and claims the same state 7.
  Trainer resumed(job, train_set(), pool, fault_policy(f));
  State s6 = lazy.state();
  {
    Trainer again(job, train_set(), pool, fault_policy(f));
    for (int t = 0; t < 6; ++t) again.step();
    s6 = again.state();
  }
  resumed.set_state(s6);
  resumed.step();
  CHECK(resumed.hash_state() == lazy.hash_state());
  // The unchanged variant keeps every tensor but the step counter.
  Fault g = f;
  g.skip_mode = SkipMode::Unchanged;
  Trainer stale(job, train_set(), pool, fault_policy(g));
  for (int t = 0; t < 7; ++t) stale.step();
  CHECK(stale.state().step() == 7);
  for (size_t i = 0; i < states[5].tensors.size(); ++i)
    if (i != states[5].tensors.size() - 2)
      CHECK(stale.state().tensors[i].values()[0] == states[5].tensors[i].values()[0]);
}

TEST_CASE("poisoned data: a swapped sample and a changed label") {
  SUBCASE("swap: the gather's indices are not the job's") {
    Fault f;
    f.swap_step = 17;
    f.swap_position = 5;
    f.swap_row = 12345;
    expect_caught(f, {VerdictReason::InconsistentInput, 17, 0, op_byte(OpKind::Gather)});
  }
  SUBCASE("relabel: the labels' gather outputs another label") {
    Fault f;
    f.relabel_step = 9;
    f.relabel_position = 3;
    BatchSampler sampler(short_job().seed, data_shape().samples, short_job().batch_size);
    const auto label = static_cast<int64_t>(train_set().labels[sampler.indices(9)[3]]);
    f.relabel_label = (label + 1) % 10;
    expect_caught(f, {VerdictReason::WrongOutput, 9, 1, op_byte(OpKind::Gather)});
  }
}

TEST_CASE("reordered batches lose at the earlier step's gather") {
  Fault f;
  f.reorder_step = 21;
  f.reorder_with = 6;
  expect_caught(f, {VerdictReason::InconsistentInput, 6, 0, op_byte(OpKind::Gather)});
}

TEST_CASE("scaled hyperparameters are caught at the first optimizer node") {
  const uint64_t adamw = first_node(OpKind::AdamW);
  SUBCASE("learning rate ×2, claimed in the records: not the job's node") {
    Fault f;
    f.hparam_from = 20;
    f.lr_scale = 2.0f;
    expect_caught(f, {VerdictReason::InconsistentInput, 20, adamw, op_byte(OpKind::AdamW)});
  }
  SUBCASE("weight decay ×0 and learning rate ×1.5, hidden behind the job's attributes: wrong output") {
    Fault f;
    f.hparam_from = 4;
    f.lr_scale = 1.5f;
    f.wd_scale = 0.0f;
    f.hparam_hidden = true;
    expect_caught(f, {VerdictReason::WrongOutput, 4, adamw, op_byte(OpKind::AdamW)});
  }
}

TEST_CASE("lower precision: bf16 outputs of one op kind are caught at its first node") {
  SUBCASE("linear from step 6") {
    Fault f;
    f.bf16_from = 6;
    f.bf16_op = OpKind::Linear;
    expect_caught(f, {VerdictReason::WrongOutput, 6, first_node(OpKind::Linear), op_byte(OpKind::Linear)});
  }
  SUBCASE("matmul (backward) from step 25") {
    Fault f;
    f.bf16_from = 25;
    f.bf16_op = OpKind::Matmul;
    expect_caught(f, {VerdictReason::WrongOutput, 25, first_node(OpKind::Matmul), op_byte(OpKind::Matmul)});
  }
}

TEST_CASE("wrong initial weights lose with wrong_initial_state at level 1") {
  Fault f;
  f.init_delta = 0.01f;
  const Provider cheater(f);
  REQUIRE(cheater.result.trajectory_root != honest().result.trajectory_root);
  for (int seat = 0; seat < 2; ++seat) {
    const Verdict v = seat == 0 ? play(cheater, honest()) : play(honest(), cheater);
    CHECK(v.losers == std::vector<uint8_t>{static_cast<uint8_t>(seat)});
    CHECK(v.winners == std::vector<uint8_t>{static_cast<uint8_t>(1 - seat)});
    CHECK(v.reason == VerdictReason::WrongInitialState);
    CHECK(v.level == Level::Checkpoints);
  }
}

TEST_CASE("a different trajectory length: the claim covers claim_steps steps") {
  const TrainResult& h = honest().result;  // checkpoints 0, 8, 16, 24, 30
  testing::TempDir dir("claim");
  SUBCASE("training on a preloaded training set (TrainOptions::train) commits what loading it does") {
    const TrainResult r = run(Fault{}, dir.path);
    CHECK(r.trajectory_root == h.trajectory_root);
    CHECK(r.checkpoint_hashes == h.checkpoint_hashes);
  }
  SUBCASE("shorter: a prefix of the honest trajectory") {
    Fault f;
    f.claim_steps = 24;
    const TrainResult r = run(f, dir.path);
    CHECK(r.steps == 24);
    CHECK(r.job_id == h.job_id);
    REQUIRE(r.checkpoint_hashes.size() == 4);  // 0, 8, 16, 24
    for (size_t i = 0; i < 4; ++i) CHECK(r.checkpoint_hashes[i] == h.checkpoint_hashes[i]);
    CHECK(r.final_state_hash == h.checkpoint_hashes[3]);
    CHECK(r.trajectory_root != h.trajectory_root);
    CHECK(r.trajectory_root == trajectory_root(std::span(h.checkpoint_hashes).first(4)));
  }
  SUBCASE("longer: trains past the job's T, and the honest leaf T is not in it") {
    Fault f;
    f.claim_steps = 40;
    const TrainResult r = run(f, dir.path);
    CHECK(r.steps == 40);
    REQUIRE(r.checkpoint_hashes.size() == 6);  // 0, 8, 16, 24, 32, 40
    for (size_t i = 0; i < 4; ++i) CHECK(r.checkpoint_hashes[i] == h.checkpoint_hashes[i]);
    CHECK(std::filesystem::exists(checkpoint_path(dir.path, 40)));
    CHECK_FALSE(std::filesystem::exists(checkpoint_path(dir.path, 30)));
    CHECK(r.final_state_hash == read_checkpoint_header(checkpoint_path(dir.path, 40)).state_hash);
    CHECK(r.trajectory_root != h.trajectory_root);
  }
  SUBCASE("stop_at is bounded by the claimed length") {
    Fault f;
    f.claim_steps = 12;
    TrainOptions o;
    o.commit = false;
    o.evaluate = false;
    o.policy = fault_policy(f);
    o.stop_at = 13;
    CHECK_THROWS_AS(run_training(short_job(), o), EngineError);
  }
}
