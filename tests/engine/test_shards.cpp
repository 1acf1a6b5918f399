// Sharded batch reductions (docs/numerics.md "Sharded batch reductions"): train.shards in the job
// and its id, the sharded step graph (per-shard nodes, partials, the fixed combine tree), the tree's
// exact order, and sharded trajectories that stay golden across threads, resumes and rank splits.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/data_parallel.h"
#include "engine/error.h"
#include "engine/step.h"
#include "engine/trainer.h"
#include "engine/tree_sum.h"
#include "tests/engine/engine_helpers.h"
#include "tests/engine/job_text.h"
#include "tests/engine/local_world.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using testing::TempDir;

namespace {

const std::filesystem::path kSource = tribunal::testing::source_dir();

JobSpec job_file(const std::string& name) {
  return load_job(kSource / "scenarios/jobs" / name);
}

// The pinned root of a sharded job (tests/fixtures/sharded_roots.txt, read by tests/mpi_roots.sh too).
std::string sharded_root(const std::string& job) {
  return testing::pinned_root("sharded_roots.txt", "scenarios/jobs/" + job);
}

using testing::first_rows;
using testing::train;
using testing::value_named;

const std::string kMlp = R"(
[model]
kind = "mlp"
widths = [784, 16, 10]
[train]
seed = 3
steps = 10
batch_size = 12
stride = 5
[optimizer]
kind = "sgd"
lr = 0.01
)";

}  // namespace

TEST_CASE("train.shards divides the batch and enters the job id only when it is not 1") {
  CHECK(parse_job(kMlp, "job.toml").shards == 1);
  CHECK(parse_job(jobtest::replace(kMlp, "stride = 5", "stride = 5\nshards = 4"), "job.toml").shards == 4);
  CHECK(jobtest::error_of(jobtest::replace(kMlp, "stride = 5", "stride = 5\nshards = 5"))
            .find("train.shards 5 does not divide train.batch_size 12") != std::string::npos);
  CHECK(jobtest::error_of(jobtest::replace(kMlp, "stride = 5", "stride = 5\nshards = 0"))
            .find("train.shards") != std::string::npos);
  const Digest root{};
  const DataShape shape{60000, 784, 10, 0};
  const Digest id = job_id(parse_job(kMlp, "job.toml"), root, shape);
  CHECK(job_id(parse_job(jobtest::replace(kMlp, "stride = 5", "stride = 5\nshards = 1"), "job.toml"), root,
               shape) == id);
  CHECK(job_id(parse_job(jobtest::replace(kMlp, "stride = 5", "stride = 5\nshards = 3"), "job.toml"), root,
               shape) != id);
}

TEST_CASE("the fixed tree sums level by level, adjacent pairs first, and its order shows in the bits") {
  // Crafted partials whose sum depends on the order: above 2^24 the float spacing is 2, so a 1 added
  // there is lost (ties to even), and each grouping loses a different one.
  const std::vector<float> p{16777216.0f, 16777216.0f, -16777216.0f, 1.0f, 1.0f, -16777216.0f};
  StepGraph g;
  GraphBuilder b(g);
  std::vector<ValueId> partials;
  for (size_t i = 0; i < p.size(); ++i) {
    Tensor t(Shape{});
    t[0] = p[i];
    partials.push_back(b.add_constant(fmt::format("p{}", i), t));
  }
  const ValueId sum = append_tree_sum(b, partials, "sum");
  CHECK(g.nodes.size() == 5);  // 3 pairs, then (01+23), then the root with 45
  CHECK(g.values[sum].name == "sum");
  ThreadPool pool(1);
  Executor ex(pool);
  ex.run(g, {}, {});
  const float tree = ((p[0] + p[1]) + (p[2] + p[3])) + (p[4] + p[5]);
  float sequential = 0.0f;
  for (float x : p) sequential += x;
  const float pairs_from_the_right = (p[0] + p[1]) + ((p[2] + p[3]) + (p[4] + p[5]));
  CHECK(ex.value(sum)[0] == tree);
  CHECK(tree == 1.0f);  // 2^25 + (1 − 2^24) = 2^24 + 1 → 2^24; + (1 − 2^24) = 1
  CHECK(sequential == 0.0f);
  CHECK(pairs_from_the_right == 2.0f);
  // One partial: no node, the partial itself.
  StepGraph one;
  GraphBuilder b1(one);
  const ValueId only = b1.add_constant("p", Tensor(Shape{2}));
  CHECK(append_tree_sum(b1, std::vector<ValueId>{only}, "sum") == only);
  CHECK(one.nodes.empty());
}

TEST_CASE("a sharded step graph computes each shard's partials, then combines them in the tree") {
  JobSpec job = parse_job(jobtest::replace(kMlp, "stride = 5", "stride = 5\nshards = 3"), "job.toml");
  const DataShape data{60000, 784, 10, 0};
  const StepGraph g = build_step_graph(job, data, 0, first_rows(12));
  REQUIRE(g.partials.size() == 3);
  REQUIRE(g.node_shards.size() == g.nodes.size());
  // Shard nodes first, in shard order, then the combines and the nodes every rank runs.
  size_t shard_nodes = 0;
  while (shard_nodes < g.nodes.size() && g.node_shards[shard_nodes].count == 1) ++shard_nodes;
  CHECK(std::is_sorted(g.node_shards.begin(), g.node_shards.begin() + static_cast<ptrdiff_t>(shard_nodes),
                       [](const ShardSpan& a, const ShardSpan& b) { return a.first < b.first; }));
  CHECK(g.node_shards[shard_nodes - 1] == ShardSpan{2, 1});
  for (size_t n = shard_nodes; n < g.nodes.size(); ++n) CHECK(g.node_shards[n].count != 1);
  for (size_t s = 0; s < 3; ++s) {
    const std::string prefix = "shard" + std::to_string(s) + "/";
    CHECK(g.values[g.partials[s][0]].name == prefix + "loss");
    CHECK(g.values[g.partials[s][1]].name == prefix + "grad/l0.weight");
    // Each shard gathers its own block of 4 batch rows.
    const Node& gather = g.nodes[g.values[value_named(g, prefix + "batch.inputs")].index];
    CHECK(gather.attrs.ints ==
          std::vector<int64_t>{static_cast<int64_t>(4 * s), static_cast<int64_t>(4 * s + 1),
                               static_cast<int64_t>(4 * s + 2), static_cast<int64_t>(4 * s + 3)});
  }
  // The combined gradient is the tree's root, an Add of (shard0 + shard1) and shard2.
  const Value& grad = g.values[value_named(g, "grad/l0.weight")];
  const Node& root = g.nodes[grad.index];
  CHECK(root.op == OpKind::Add);
  CHECK(g.node_shards[grad.index] == ShardSpan{0, 3});
  CHECK(g.values[root.inputs[0]].name == "grad/l0.weight/tree1.0");
  CHECK(g.node_shards[g.values[root.inputs[0]].index] == ShardSpan{0, 2});
  CHECK(g.values[root.inputs[1]].name == "shard2/grad/l0.weight");
  CHECK(g.nodes[g.values[g.loss].index].op == OpKind::Scale);
  // The unsharded graph has no shard bookkeeping.
  job.shards = 1;
  const StepGraph plain = build_step_graph(job, data, 0, first_rows(12));
  CHECK(plain.node_shards.empty());
  CHECK(plain.partials.empty());
  job.shards = 5;
  CHECK_THROWS_AS(build_step_graph(job, data, 0, first_rows(12)), EngineError);
}

TEST_CASE("the shards of a GPT step draw distinct dropout masks") {
  const JobSpec job = job_file("sharded_gpt.toml");
  const StepGraph g = build_step_graph(job, DataShape{1000, 32, 256, 32}, 0, first_rows(6));
  std::vector<int64_t> sites;
  for (const Node& n : g.nodes)
    if (n.op == OpKind::Dropout) sites.push_back(n.attrs.ints[2]);
  CHECK(sites.size() == 6 * 5);  // 6 shards × (embedding + 2 per layer × 2 layers)
  std::sort(sites.begin(), sites.end());
  CHECK(std::adjacent_find(sites.begin(), sites.end()) == sites.end());
}

TEST_CASE("a rank sends the roots of the subtrees within its block of shards") {
  const JobSpec job = job_file("sharded_mlp.toml");
  const StepGraph g = build_step_graph(job, DataShape{60000, 784, 10, 0}, 0, first_rows(24));
  const auto names = [&](int64_t first, int64_t count) {
    std::vector<std::string> out;
    for (ValueId v : block_outputs(g, ShardRun{first, count, {}}))
      if (g.values[v].name.find("l0.weight") != std::string::npos) out.push_back(g.values[v].name);
    return out;
  };
  // Tree of 6: ((p0+p1) + (p2+p3)) + (p4+p5).
  CHECK(names(0, 3) == std::vector<std::string>{"shard2/grad/l0.weight", "grad/l0.weight/tree1.0"});
  CHECK(names(3, 3) == std::vector<std::string>{"shard3/grad/l0.weight", "grad/l0.weight/tree1.2"});
  CHECK(names(2, 2) == std::vector<std::string>{"grad/l0.weight/tree1.1"});
  CHECK(names(5, 1) == std::vector<std::string>{"shard5/grad/l0.weight"});
}

TEST_CASE("the ranks of a sharded job take contiguous blocks of shards") {
  const JobSpec job = job_file("sharded_mlp.toml");
  CHECK(shards_of_rank(job, 0, 1).count == -1);
  CHECK(shards_of_rank(job, 1, 3).first == 2);
  CHECK(shards_of_rank(job, 1, 3).count == 2);
  CHECK_THROWS_WITH_AS(shards_of_rank(job, 0, 4), doctest::Contains("4 ranks cannot share train.shards = 6"),
                       EngineError);
}

TEST_CASE("a sharded job's root is pinned and the same on any thread count, resumed, and split over shards") {
  for (const char* name : {"sharded_mlp.toml", "sharded_gpt.toml", "sharded_cnn.toml"}) {
    CAPTURE(name);
    const JobSpec job = job_file(name);
    TempDir d1("s1"), d2("s2"), d3("s3");
    const TrainResult one = train(job, 1, d1.path);
    MESSAGE(name << " " << to_hex(one.trajectory_root));
    CHECK(to_hex(one.trajectory_root) == sharded_root(name));
    CHECK(train(job, 3, d2.path).trajectory_root == one.trajectory_root);
    train(job, 2, d3.path, 3);
    CHECK(train(job, 1, d3.path, -1, true).trajectory_root == one.trajectory_root);
  }
}

TEST_CASE("a sharded job trained by 2 or 3 ranks in one process commits the pinned root, resumed too") {
  // In-process ranks (tests/engine/local_world.h) exchange through the same World interface as MPI,
  // so this checks the shard split, the partials' exchange and the state broadcast of a resume.
  const JobSpec job = job_file("sharded_mlp.toml");
  TempDir dir("ranks");
  const auto train_on = [&](int ranks, int64_t stop_at, bool resume, int threads = 1) {
    return testing::run_ranks(ranks, [&](World& world) {
      TrainOptions o;
      o.threads = threads;  // 2 threads on blocks of 2 shards: the shards of a block run side by side
      o.out_dir = dir.path;
      o.stop_at = stop_at;
      o.resume = resume;
      o.evaluate = false;
      o.world = &world;
      return run_training(job, o);
    });
  };
  const TrainResult two = train_on(2, -1, false);
  CHECK(two.ranks == 2);
  CHECK(to_hex(two.trajectory_root) == sharded_root("sharded_mlp.toml"));
  // Rank 0 of 2 holds shards 0–2: it sends the tree's (p0 + p1) and p2 of the loss and of every gradient.
  CHECK(two.exchange_bytes_per_step == doctest::Approx(2.0 * 4 * (1 + 784 * 32 + 32 + 32 * 10 + 10)));
  std::filesystem::remove_all(dir.path);
  train_on(3, 3, false, 2);
  CHECK(to_hex(train_on(2, -1, true, 2).trajectory_root) == sharded_root("sharded_mlp.toml"));
}

TEST_CASE("a rank's failure ends the job on every rank with its error, and the ranks stay in step") {
  // Rank 0 alone cannot write its checkpoint of step 4 (a directory holds the name, as a full disk
  // would fail it): both ranks throw RankFailure naming rank 0 and the file, none waits for the other.
  const JobSpec job = job_file("sharded_mlp.toml");
  TempDir dir("rank-failure");
  std::filesystem::create_directories(dir.path / "step_000000004.safetensors" / "taken");
  std::array<std::string, 2> errors;
  std::array<int, 2> next{};
  testing::run_ranks(2, [&](World& world) {
    const auto r = static_cast<size_t>(world.rank());
    TrainOptions o;
    o.out_dir = dir.path;
    o.evaluate = false;
    o.world = &world;
    try {
      run_training(job, o);
    } catch (const RankFailure& e) {
      CHECK(e.rank() == 0);
      errors[r] = e.what();
    }
    // In step after it: the next collective meets every rank.
    const std::byte mine{static_cast<unsigned char>(world.rank() + 1)};
    std::array<std::byte, 2> all{};
    world.allgather(std::span(&mine, 1), all);
    next[r] = static_cast<int>(all[0]) * 10 + static_cast<int>(all[1]);
    return 0;
  });
  for (const std::string& e : errors) {
    CHECK(e.find("rank 0 of 2 failed: ") == 0);
    CHECK(e.find("step_000000004.safetensors") != std::string::npos);
  }
  CHECK(next == std::array<int, 2>{12, 12});

  // A failure on rank 1 before any exchange (e.g. its data set missing), told through World::fail.
  std::array<std::string, 2> told;
  testing::run_ranks(2, [&](World& world) {
    try {
      if (world.rank() == 1) world.fail("data set 'x' is not registered here");
      lockstep(world, [&] {
        return run_training(job, [&] {
          TrainOptions o;
          o.evaluate = false;
          o.world = &world;
          return o;
        }());
      });
    } catch (const RankFailure& e) {
      told[static_cast<size_t>(world.rank())] = e.what();
    }
    return 0;
  });
  CHECK(told[0] == "rank 1 of 2 failed: data set 'x' is not registered here");
  CHECK(told[1] == told[0]);
}
