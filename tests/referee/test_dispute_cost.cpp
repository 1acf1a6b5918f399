// What a dispute can cost the referee (engine/cost.h) and the referee's policy on it
// (referee_dispute.h check_dispute_cost): derived from the job, checked at the opening.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/step.h"
#include "referee/referee_dispute.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

// The shipped data sets, the regression fixture and the imported models' files (an onnx job's
// model.file, tests/fixtures/onnx/).
DataRegistry registry() {
  DataRegistry r = DataRegistry::debian();
  r.add("regression", tribunal::testing::source_dir() / "tests/fixtures/regression");
  for (const char* name : {"mlp", "cnn", "gpt2", "llama", "resnet", "regressor"})
    r.add_model(name,
                tribunal::testing::source_dir() / "tests/fixtures/onnx" / (std::string(name) + ".onnx"));
  return r;
}

JobSpec job_of(const std::string& file) {
  return load_job(tribunal::testing::source_dir() / "scenarios/jobs" / file, registry());
}

// Measured on the job's built step graph 0.
DisputeCost measured(const JobSpec& job, const DataShape& shape) {
  const StepGraph g =
      build_step_graph(job, shape, 0, std::vector<int64_t>(static_cast<size_t>(job.batch_size), 0));
  return dispute_cost(job, g);
}

DisputeCost cost_of(const std::string& file) {
  const JobSpec job = job_of(file);
  return dispute_cost(job, expected_data_shape(job));
}

void check_equal(const DisputeCost& derived, const DisputeCost& built) {
  CHECK(derived.parameters == built.parameters);
  CHECK(derived.nodes == built.nodes);
  CHECK(derived.max_node_work == built.max_node_work);
  CHECK(derived.heaviest_node == built.heaviest_node);
  CHECK(derived.max_opened_bytes == built.max_opened_bytes);
  CHECK(derived.max_node_memory == built.max_node_memory);
  CHECK(derived.shards == built.shards);
  CHECK(derived.batch == built.batch);
  CHECK(derived.context == built.context);
}

// A shipped job's text with `from` replaced by `to` (each pair in turn), parsed.
JobSpec variant(const std::string& file, const std::vector<std::pair<std::string, std::string>>& edits) {
  std::ifstream in(tribunal::testing::source_dir() / "scenarios/jobs" / file);
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  for (const auto& edit : edits) {  // (not a structured binding: clang 14 cannot capture one in CHECK)
    const std::string& from = edit.first;
    const std::string& to = edit.second;
    const size_t at = s.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, file << " has no '" << from << "'");
    s.replace(at, from.size(), to);
  }
  JobSpec job = parse_job(s, file + " (variant)");
  locate_data(job, registry());
  return job;
}

}  // namespace

TEST_CASE("node work counts a contraction's multiply-adds and other ops' elements") {
  StepGraph g;
  GraphBuilder b(g);
  const ValueId x = b.add_state("x", Shape({6, 5}));
  const ValueId w = b.add_state("w", Shape({5, 7}));
  const ValueId bias = b.add_state("b", Shape({7}));
  const ValueId y = b.add_node(OpKind::Linear, {}, {x, w, bias}, "y")[0];
  b.add_node(OpKind::Relu, {}, {y}, "r");
  CHECK(node_work(g, g.nodes[0]) == 6 * 7 * 5);  // [6,7] outputs, chains of 5
  CHECK(node_work(g, g.nodes[1]) == 6 * 7 * 2);  // reads and writes 42 elements
  CHECK(node_input_bytes(g, g.nodes[0]) == 4 * (30 + 35 + 7));
  // A data-set table is read (and opened, as proven samples) only at the gathered rows.
  const ValueId table = b.add_data("table", Shape({100, 5}));
  b.add_node(OpKind::Gather, Attrs{{1, 2, 3}, {}}, {table}, "batch");
  CHECK(node_input_bytes(g, g.nodes[2]) == 4 * 15);
  CHECK(node_work(g, g.nodes[2]) == 30);
}

TEST_CASE("the shipped jobs' disputes fit the referee's default limits") {
  const DisputeLimits defaults;
  for (const char* file :
       {"short_mlp.toml", "short_gpt.toml", "short_cnn.toml", "gpt_chars.toml", "fashion_cnn.toml",
        "fashion_mlp.toml", "sharded_mlp.toml", "sharded_cnn.toml", "sharded_gpt.toml"}) {
    const DisputeCost c = cost_of(file);
    MESSAGE(std::string(file) << ": " << c.parameters << " parameters, heaviest node " << c.heaviest_node
                              << " " << c.max_node_work << ", largest opening " << c.max_opened_bytes
                              << " bytes, " << c.nodes << " nodes");
    CHECK(c.parameters > 0);
    CHECK(c.max_node_work > 0);
    CHECK_NOTHROW(check_dispute_cost(c, defaults));
    CHECK(c.nodes * 16 < defaults.max_graph_nodes);  // far inside the node limit
  }
  // The GPT's heaviest node is a matmul of the attention or MLP: [B·T, D]·[D, 4D] at least.
  const DisputeCost gpt = cost_of("gpt_chars.toml");
  CHECK(gpt.max_node_work >= uint64_t{16} * 128 * 128 * 512);
}

TEST_CASE("a job beyond the policy is refused, naming the term and the limit") {
  const DisputeCost c = cost_of("short_cnn.toml");
  DisputeLimits tight;
  tight.max_reexecution_work = c.max_node_work - 1;
  CHECK_THROWS_WITH_AS(check_dispute_cost(c, tight),
                       doctest::Contains(("re-execution work (" + c.heaviest_node).c_str()), ProtocolError);
  tight = DisputeLimits{};
  tight.max_opened_bytes = c.max_opened_bytes - 1;
  CHECK_THROWS_WITH_AS(check_dispute_cost(c, tight), doctest::Contains("largest opening"), ProtocolError);
  tight = DisputeLimits{};
  tight.max_parameters = c.parameters - 1;
  CHECK_THROWS_WITH_AS(check_dispute_cost(c, tight), doctest::Contains("parameter count"), ProtocolError);
  DisputeLimits exact;
  exact.max_parameters = c.parameters;
  exact.max_reexecution_work = c.max_node_work;
  exact.max_opened_bytes = c.max_opened_bytes;
  CHECK_NOTHROW(check_dispute_cost(c, exact));
}

TEST_CASE("the bound counts the numerics mode: a rounding-log re-execution costs more CPU and memory") {
  // The same job in both modes: the same heaviest node, its work and memory times the measured
  // rounding-log factors (engine/cost.h), and a referee whose limits admit the RepOps job refuses
  // the rounding-log one on each term.
  const JobSpec repops_job = variant("gpt_chars.toml", {});
  const JobSpec rlog_job =
      variant("gpt_chars.toml", {{"[optimizer]", "[numerics]\nmode = \"rounding-log\"\n\n[optimizer]"}});
  REQUIRE(rlog_job.numerics.mode == NumericsMode::RoundingLog);
  const DisputeCost repops = dispute_cost(repops_job, expected_data_shape(repops_job));
  const DisputeCost rlog = dispute_cost(rlog_job, expected_data_shape(rlog_job));
  CHECK(repops.heaviest_node == "linear 'h0.mlp.fc'");
  CHECK(rlog.heaviest_node == repops.heaviest_node);
  CHECK(repops.max_node_work == uint64_t{16} * 128 * 128 * 512);  // [2048, 128]·[128, 512]
  CHECK(rlog.max_node_work == kRoundingLogCpu * repops.max_node_work);
  CHECK(rlog.max_node_memory == kRoundingLogMemory * repops.max_node_memory);
  // The largest memory is a [16, 4, 128, 128] attention node's: inputs and outputs, float32.
  CHECK(repops.max_node_memory >= uint64_t{4} * 16 * 4 * 128 * 128 * 2);
  DisputeLimits limits;
  limits.max_reexecution_work = repops.max_node_work;
  limits.max_node_memory = repops.max_node_memory;
  CHECK_NOTHROW(check_dispute_cost(repops, limits));
  CHECK_THROWS_WITH_AS(check_dispute_cost(rlog, limits),
                       doctest::Contains("re-execution work (linear 'h0.mlp.fc'"), ProtocolError);
  limits.max_reexecution_work = rlog.max_node_work;
  CHECK_THROWS_WITH_AS(check_dispute_cost(rlog, limits), doctest::Contains("re-execution memory"),
                       ProtocolError);
  limits.max_node_memory = rlog.max_node_memory;
  CHECK_NOTHROW(check_dispute_cost(rlog, limits));
  // The per-node functions agree with the job's terms on the built graph.
  const DataShape shape = expected_data_shape(rlog_job);
  const StepGraph g =
      build_step_graph(rlog_job, shape, 0, std::vector<int64_t>(static_cast<size_t>(rlog_job.batch_size), 0));
  uint64_t work = 0, memory = 0, repops_memory = 0;
  for (const Node& n : g.nodes) {
    work = std::max(work, node_reexecution_work(g, n, NumericsMode::RoundingLog));
    memory = std::max(memory, node_memory(g, n, NumericsMode::RoundingLog));
    repops_memory = std::max(repops_memory, node_memory(g, n, NumericsMode::RepOps));
    CHECK(node_reexecution_work(g, n, NumericsMode::RepOps) == node_work(g, n));
  }
  CHECK(work == rlog.max_node_work);
  CHECK(memory == rlog.max_node_memory);
  CHECK(repops_memory == repops.max_node_memory);
}

TEST_CASE("the cost derived from the job text equals the cost measured on its built step graph") {
  // Every shipped job (fast-mode ones too: the derivation does not depend on the mode but for the logs).
  for (const auto& entry :
       std::filesystem::directory_iterator(tribunal::testing::source_dir() / "scenarios/jobs")) {
    const std::string file = entry.path().filename().string();
    CAPTURE(file);
    const JobSpec job = job_of(file);
    const DataShape shape = expected_data_shape(job);
    check_equal(dispute_cost(job, shape), measured(job, shape));
  }
  // Sharded, deeper, clipped, SGD, dropout-free and rounding-log variants of them.
  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> variants{
      {"short_mlp.toml", {{"batch_size = 32", "batch_size = 32\nshards = 2"}}},
      {"short_mlp.toml",
       {{"batch_size = 32", "batch_size = 32\nshards = 32"},
        {"widths = [784, 32, 10]", "widths = [784, 7, 9, 10]"}}},
      {"short_mlp.toml",
       {{"kind = \"adamw\"", "kind = \"sgd\"\nclip_norm = 0.5"},
        {"batch_size = 32", "batch_size = 32\nshards = 8"}}},
      {"short_mlp_rlog.toml", {{"batch_size = 32", "batch_size = 32\nshards = 4"}}},
      {"short_cnn.toml", {{"batch_size = 16", "batch_size = 16\nshards = 16"}}},
      {"short_cnn.toml",
       {{"channels = [4, 8]", "channels = [3, 5]"},
        {"kernel = 3", "kernel = 5"},
        {"kind = \"adamw\"", "kind = \"sgd\"\nclip_norm = 2.0"}}},
      {"short_gpt.toml", {{"layers = 2", "layers = 3"}, {"batch_size = 4", "batch_size = 4\nshards = 4"}}},
      {"short_gpt.toml", {{"layers = 2", "layers = 1"}, {"dropout = 0.1", "dropout = 0.0"}}},
      {"short_gpt.toml",
       {{"layers = 2", "layers = 5"},
        {"dropout = 0.1", "dropout = 0.0"},
        {"batch_size = 4", "batch_size = 4\nshards = 2"}}},
      {"short_gpt_rlog.toml", {{"batch_size = 4", "batch_size = 4\nshards = 2"}}},
      {"sharded_gpt.toml", {{"shards = 6", "shards = 3"}}},
      // Imported models: the sketch lowers one shard of the file's graph (dropout sites included).
      {"short_onnx_cnn.toml", {{"batch_size = 16", "batch_size = 16\nshards = 4"}}},
      {"parity_onnx_mlp.toml", {{"batch_size = 16", "batch_size = 16\nshards = 2"}}},
      {"short_onnx_gpt2.toml", {{"batch_size = 4", "batch_size = 4\nshards = 2"}}},
      {"short_onnx_llama.toml", {{"batch_size = 4", "batch_size = 4\nshards = 4"}}},
      // The mse loss head (engine/loss.h) on an imported regressor.
      {"short_onnx_mse.toml", {{"batch_size = 16", "batch_size = 16\nshards = 4"}}},
  };
  for (const auto& v : variants) {
    const std::string& file = v.first;
    const auto& edits = v.second;
    const JobSpec job = variant(file, edits);
    CAPTURE(file);
    CAPTURE(edits.front().second);
    const DataShape shape = expected_data_shape(job);
    check_equal(dispute_cost(job, shape), measured(job, shape));
  }
}

TEST_CASE("the cost of a many-shard opening is derived in time linear in the job, not in its graph") {
  // The opening: a 10-parameter MLP (widths [1, 5] on a declared data set of 1 feature and 5
  // classes) with train.shards = 16384. Its graph would hold 7 nodes per shard plus the trees.
  const JobSpec job = parse_job(
      "[model]\nkind = \"mlp\"\nwidths = [1, 5]\n[train]\nsteps = 30\nbatch_size = 16384\n"
      "shards = 16384\nstride = 8\n[optimizer]\n",
      "stranger");
  const DataShape shape{16384, 1, 5, 0};
  const auto t0 = std::chrono::steady_clock::now();
  const DisputeCost c = dispute_cost(job, shape);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(c.parameters == 10);
  CHECK(c.shards == 16384);
  CHECK(c.nodes ==
        16384 * 7 + 16383 * 3 + 1 + 2);  // shards' nodes, trees (loss, weight, bias), loss scale, adamw ×2
  CHECK(took < std::chrono::milliseconds(100));
  DisputeLimits defaults;
  CHECK_THROWS_WITH_AS(
      check_dispute_cost(c, defaults),
      "dispute: the job's step graph node count is 163840, beyond this referee's limit of 65536",
      ProtocolError);
  // Its graph, built once the limit allows it, is linear in the shard count and agrees node for node.
  const auto t1 = std::chrono::steady_clock::now();
  const DisputeCost built = measured(job, shape);
  MESSAGE("16384 shards: " << built.nodes << " nodes built in "
                           << std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count()
                           << " s");
  check_equal(c, built);
}

TEST_CASE("every term of the cost saturates instead of wrapping") {
  // A GPT at the parser's limits: the attention's work and the logits' bytes exceed 2^64 nowhere,
  // but the parameters and nodes are large; nothing is built or allocated for them.
  const JobSpec job = parse_job(
      "[model]\nkind = \"gpt\"\nvocab = 65536\ncontext = 65536\nlayers = 1024\nheads = 1\n"
      "d_model = 65536\n[data]\ndataset = \"text\"\n[train]\nsteps = 1\nbatch_size = 1048576\n"
      "stride = 1\nshards = 1048576\n[optimizer]\nclip_norm = 1.0\n",
      "huge");
  const DisputeCost c = dispute_cost(job, DataShape{int64_t{1} << 26, 65536, 65536, 65536});
  CHECK(c.parameters > int64_t{1} << 40);
  CHECK(c.nodes > uint64_t{1} << 20);
  CHECK(c.max_node_work >= uint64_t{1} << 50);
  CHECK_THROWS_AS(check_dispute_cost(c, DisputeLimits{}), ProtocolError);
}
