// Disputes over an imported model through the real nodes (docs/onnx.md): the CNN that
// tools/onnx_export.py exported from PyTorch (tests/fixtures/onnx/cnn.onnx), registered by name on the
// referee, the providers and the delegate (--model cnn=…). A cheater corrupting any node of any step
// is located at that step and node and convicted by the referee's re-execution of the imported op;
// a provider that does not hold the model file refuses the job, naming it, before anything trains.
#include <doctest/doctest.h>

#include <optional>

#include <fmt/format.h>

#include "engine/dataset.h"
#include "engine/step.h"
#include "referee/report.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using tribunal::testing::corrupt;
using tribunal::testing::Network;

namespace {

const std::filesystem::path kJob = testing::source_dir() / "scenarios/jobs/short_onnx_cnn.toml";
const std::filesystem::path kModel = testing::source_dir() / "tests/fixtures/onnx/cnn.onnx";
const std::filesystem::path kGpt2Job = testing::source_dir() / "scenarios/jobs/short_onnx_gpt2.toml";
const std::filesystem::path kGpt2 = testing::source_dir() / "tests/fixtures/onnx/gpt2.onnx";
const std::filesystem::path kLlamaJob = testing::source_dir() / "scenarios/jobs/short_onnx_llama.toml";
const std::filesystem::path kLlama = testing::source_dir() / "tests/fixtures/onnx/llama.onnx";
const std::filesystem::path kResnetJob = testing::source_dir() / "scenarios/jobs/short_onnx_resnet.toml";
const std::filesystem::path kResnet = testing::source_dir() / "tests/fixtures/onnx/resnet.onnx";
const std::filesystem::path kMseJob = testing::source_dir() / "scenarios/jobs/short_onnx_mse.toml";
const std::filesystem::path kRegressor = testing::source_dir() / "tests/fixtures/onnx/regressor.onnx";
const std::filesystem::path kRegression = testing::source_dir() / "tests/fixtures/regression";

nodes::RefereeNodeOptions referee_with_model() {
  nodes::RefereeNodeOptions o;
  o.dispute.weights.add_model("cnn", kModel);
  o.dispute.weights.add_model("gpt2", kGpt2);
  o.dispute.weights.add_model("llama", kLlama);
  o.dispute.weights.add_model("resnet", kResnet);
  o.dispute.weights.add_model("regressor", kRegressor);
  return o;
}

// The imported job's step graph, as every party builds it.
StepGraph graph() {
  DataRegistry r = DataRegistry::debian();
  r.add_model("cnn", kModel);
  const JobSpec job = load_job(kJob, r);
  return build_step_graph(job, {60000, 784, 10, 0}, 0, std::vector<int64_t>(16, 0));
}

}  // namespace

TEST_CASE("an imported model's dispute: the honest provider wins against a corrupted node of any step") {
  const StepGraph g = graph();
  // The lowered graph holds the file's ops: a reshape of the data rows to [N, 1, 28, 28], the two
  // convolutions and the classifier as a linear with the transposed (nn.Linear) weight.
  int64_t conv = -1, linear = -1;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (g.nodes[n].op == OpKind::Conv2d && conv < 0) conv = static_cast<int64_t>(n);
    if (g.nodes[n].op == OpKind::Linear) {
      linear = static_cast<int64_t>(n);
      CHECK(g.nodes[n].attrs.ints == std::vector<int64_t>{1});
    }
  }
  REQUIRE(conv >= 0);
  REQUIRE(linear >= 0);
  const int64_t last = static_cast<int64_t>(g.nodes.size()) - 1;

  Network net(referee_with_model());
  net.job_file = kJob;
  const std::vector<std::pair<int64_t, int64_t>> cases = {{0, conv}, {5, linear}, {11, last / 2}, {7, last}};
  for (const auto& c : cases) {
    const int64_t step = c.first, node = c.second;
    CAPTURE(step);
    CAPTURE(node);
    auto honest_config = net.config(Fault{});
    honest_config.datasets.add_model("cnn", kModel);
    auto cheater_config = net.config(corrupt(step, node));
    cheater_config.datasets.add_model("cnn", kModel);
    const std::string honest = net.provider(std::move(honest_config));
    const std::string cheater = net.provider(std::move(cheater_config));
    nodes::DelegateRequest r = net.request({cheater, honest});
    r.datasets.add_model("cnn", kModel);
    const DelegateOutcome o = nodes::delegate_job(net.ctx, r, nodes::quiet_logger());
    REQUIRE(o.verdicts.size() == 1);
    const Verdict v = verify_verdict(o.verdicts[0], net.referee_key.public_key, &r.datasets);
    CHECK(v.losers == std::vector<uint8_t>{0});
    CHECK(v.winners == std::vector<uint8_t>{1});
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.step == static_cast<uint64_t>(step));
    CHECK(v.node == static_cast<uint64_t>(node));
    CHECK(o.accepted);
    CHECK(o.winner == 1);
    // The verdict's page draws the located node of the imported graph where the file is registered,
    // and still names it where it is not.
    ReportInput with_model;
    with_model.verdict = o.verdicts[0];
    with_model.models = r.datasets;
    const std::string page = dispute_report_html(with_model);
    CHECK(page.find(fmt::format("node {} ({})", node, op_name(g.nodes[static_cast<size_t>(node)].op))) !=
          std::string::npos);
    CHECK(page.find("<h2>The located op</h2>") != std::string::npos);
    ReportInput without;
    without.verdict = o.verdicts[0];
    const std::string bare = dispute_report_html(without);
    CHECK(bare.find("<h2>The located op</h2>") == std::string::npos);
    CHECK(bare.find(fmt::format("Node {} ({}) of step {} was located; its graph is not drawn here: ", node,
                                op_name(g.nodes[static_cast<size_t>(node)].op), step)) != std::string::npos);
    CHECK(bare.find("model file &#39;cnn&#39; (model.file) is not registered") != std::string::npos);
  }
}

TEST_CASE("an imported model's job is refused by a provider that does not hold the model file") {
  Network net(referee_with_model());
  net.job_file = kJob;
  auto with_model = net.config(Fault{});
  with_model.datasets.add_model("cnn", kModel);
  const std::string holder = net.provider(std::move(with_model));
  const std::string stranger = net.provider(Fault{});  // no --model cnn=…
  nodes::DelegateRequest r = net.request({stranger, holder});
  r.datasets.add_model("cnn", kModel);
  std::string error;
  try {
    nodes::delegate_job(net.ctx, r, nodes::quiet_logger());
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK(error.find(stranger +
                   ": refused: submitted job: model file 'cnn' (model.file) is not registered at this "
                   "node (its operator registers model files with --model NAME=PATH)") != std::string::npos);
}

namespace {

// {step, node, element (−1: every element)} of a cheater's corruption (adds 10).
struct Case {
  int64_t step, node, element;
};

/// A data set the shipped registry lacks, registered by name on the providers and the delegate (the
/// referee holds no data).
struct NamedData {
  std::string name;
  std::filesystem::path path;
};

/// An imported model's job (`name`: its model file's registered name; `data`: its data set when it is
/// not a shipped one): each case's cheater is convicted at its step and node through the real referee,
/// providers and delegate.
void check_convicted(const std::string& name, const std::filesystem::path& job_file,
                     const std::filesystem::path& model, const std::vector<Case>& cases, const StepGraph& g,
                     const std::optional<NamedData>& data = std::nullopt) {
  Network net(referee_with_model());
  net.job_file = job_file;
  for (const Case& c : cases) {
    const int64_t step = c.step, node = c.node;
    CAPTURE(step);
    CAPTURE(node);
    CAPTURE(op_name(g.nodes[static_cast<size_t>(node)].op));
    auto honest_config = net.config(Fault{});
    honest_config.datasets.add_model(name, model);
    Fault fault = corrupt(step, node);
    fault.element = c.element;
    auto cheater_config = net.config(fault);
    cheater_config.datasets.add_model(name, model);
    if (data) {
      honest_config.datasets.add(data->name, data->path);
      cheater_config.datasets.add(data->name, data->path);
    }
    const std::string honest = net.provider(std::move(honest_config));
    const std::string cheater = net.provider(std::move(cheater_config));
    nodes::DelegateRequest r = net.request({honest, cheater});
    r.datasets.add_model(name, model);
    if (data) r.datasets.add(data->name, data->path);
    const DelegateOutcome o = nodes::delegate_job(net.ctx, r, nodes::quiet_logger());
    REQUIRE(o.verdicts.size() == 1);
    const Verdict v = verify_verdict(o.verdicts[0], net.referee_key.public_key, &r.datasets);
    CHECK(v.losers == std::vector<uint8_t>{1});
    CHECK(v.winners == std::vector<uint8_t>{0});
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.step == static_cast<uint64_t>(step));
    CHECK(v.node == static_cast<uint64_t>(node));
    CHECK(o.accepted);
    CHECK(o.winner == 0);
  }
}

/// Step 0's graph of an imported model's job and the index of its first node of `kind` (with
/// ints[0] == fn when fn ≥ 0) or of the node whose first output is named `value`.
struct Graph {
  StepGraph g;
  Graph(const std::string& name, const std::filesystem::path& job_file, const std::filesystem::path& model,
        const std::optional<NamedData>& data = std::nullopt) {
    DataRegistry registry = DataRegistry::debian();
    registry.add_model(name, model);
    if (data) registry.add(data->name, data->path);
    const JobSpec job = load_job(job_file, registry);
    g = build_step_graph(job, expected_data_shape(job), 0, std::vector<int64_t>(4, 0));
  }
  int64_t first(OpKind kind, int64_t fn = -1) const {
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (g.nodes[n].op == kind && (fn < 0 || g.nodes[n].attrs.ints.at(0) == fn))
        return static_cast<int64_t>(n);
    FAIL("no node of kind " << op_name(kind));
    return -1;
  }
  int64_t named(const std::string& value) const {
    for (size_t n = 0; n < g.nodes.size(); ++n)
      if (g.values.at(g.nodes[n].outputs.at(0)).name == value) return static_cast<int64_t>(n);
    FAIL("no node named " << value);
    return -1;
  }
};

}  // namespace

// The imported GPT-2 (tests/fixtures/onnx/gpt2.onnx) on text: a cheater corrupting the embedding's
// gather_rows, the causal mask's where, GELU's erf, the tanh form's pow, an attention softmax's
// backward or the tied head's gradient is convicted at that step and node. Adding 10 to every score
// of a row is no change at all after the softmax (it is shift-invariant), so the mask's corruption is
// one score: row 1, column 0 of the first head, which the causal mask keeps.
TEST_CASE("an imported GPT-2's dispute: the honest provider wins against a corrupted op of any step") {
  const Graph m("gpt2", kGpt2Job, kGpt2);
  check_convicted("gpt2", kGpt2Job, kGpt2,
                  {{0, m.first(OpKind::GatherRows), -1},
                   {3, m.first(OpKind::Where), 32},
                   {6, m.first(OpKind::Unary, 6), -1},
                   {9, m.first(OpKind::Unary, 10), -1},
                   {11, m.first(OpKind::SoftmaxBackward), -1},
                   {4, m.first(OpKind::EmbeddingBackward), -1}},
                  m.g);
}

// The imported Llama-style decoder (tests/fixtures/onnx/llama.onnx): RMSNorm's mean, the repeated
// key/value heads' expand, the rotary half's concat, SwiGLU's sigmoid and the mean's backward.
TEST_CASE("an imported Llama's dispute: the honest provider wins against a corrupted op of any step") {
  const Graph m("llama", kLlamaJob, kLlama);
  check_convicted("llama", kLlamaJob, kLlama,
                  {{1, m.first(OpKind::ReduceMean), -1},
                   {5, m.first(OpKind::Expand), -1},
                   {7, m.first(OpKind::Concat), -1},
                   {10, m.first(OpKind::Unary, 7), -1},
                   {2, m.first(OpKind::ReduceMeanBackward), -1}},
                  m.g);
}

// The imported ResNet (tests/fixtures/onnx/resnet.onnx): BatchNorm in training mode, its backward,
// the running-statistics update that only the next state's buffer reads (its corruption changes no
// loss, only the committed state), the residual add and the strided max-pool.
TEST_CASE("an imported ResNet's dispute: the honest provider wins against a corrupted op of any step") {
  const Graph m("resnet", kResnetJob, kResnet);
  check_convicted("resnet", kResnetJob, kResnet,
                  {{0, m.first(OpKind::BatchNorm), -1},
                   {3, m.first(OpKind::BatchNormRunning, 2), -1},
                   {6, m.first(OpKind::BatchNormBackward), -1},
                   {9, m.first(OpKind::Add), -1},
                   {11, m.first(OpKind::MaxPool2d), -1}},
                  m.g);
}

// The imported regressor's mse job (scenarios/jobs/short_onnx_mse.toml on tests/fixtures/regression/):
// a cheater corrupting the loss's difference, square, mean or the mean's backward, the tanh, or the last
// optimizer node is convicted at that step and node; the delegate and the providers hold the data set.
// The square and the mean reach no gradient, only the step's loss in the state: they are corrupted on
// the last step before a checkpoint (7 → state 8, 15 → state 16), where that loss is committed.
TEST_CASE(
    "an imported regressor's mse dispute: the honest provider wins against a corrupted op of any step") {
  const NamedData data{"regression", kRegression};
  const Graph m("regressor", kMseJob, kRegressor, data);
  const int64_t last = static_cast<int64_t>(m.g.nodes.size()) - 1;
  CHECK(m.g.nodes.at(static_cast<size_t>(m.named("loss.diff"))).op == OpKind::BroadcastBinary);
  CHECK(m.g.nodes.at(static_cast<size_t>(m.named("loss.mean"))).op == OpKind::ReduceMean);
  check_convicted("regressor", kMseJob, kRegressor,
                  {{0, m.named("loss.diff"), -1},
                   {7, m.named("loss.square"), 1},
                   {15, m.named("loss.mean"), -1},
                   {13, m.first(OpKind::ReduceMeanBackward), -1},
                   {21, m.first(OpKind::Unary, 5), -1},
                   {39, last, -1}},
                  m.g, data);
}
