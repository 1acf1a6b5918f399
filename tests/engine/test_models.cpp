// The GPT and CNN models: parameters (names, shapes, init), step graphs (shapes, value names,
// dropout sites, clipping, schedule and decay attributes), training on the short jobs (the loss
// falls; bit-identical trajectories on 1 and 2 threads and across a resume) and evaluation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/model.h"
#include "engine/schedule.h"
#include "engine/step.h"
#include "engine/trainer.h"
#include "tests/engine/engine_helpers.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using testing::TempDir;

namespace {

JobSpec job_file(const char* name) {
  return load_job(tribunal::testing::source_dir() / "scenarios/jobs" / name);
}

const Dataset& gpt_train() {
  static ThreadPool pool(2);
  static const Dataset d = load_dataset(job_file("short_gpt.toml"), Split::Train, pool);
  return d;
}

const Dataset& cnn_train() {
  static ThreadPool pool(2);
  static const Dataset d = load_dataset(job_file("short_cnn.toml"), Split::Train, pool);
  return d;
}

using testing::value_named;

const Node& producer(const StepGraph& g, ValueId v) {
  REQUIRE(g.values[v].source == ValueSource::Node);
  return g.nodes[g.values[v].index];
}

size_t count_op(const StepGraph& g, OpKind op) {
  return static_cast<size_t>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.op == op; }));
}

using testing::first_rows;

TrainResult train(const JobSpec& job, const Dataset& data, int threads, const std::filesystem::path& out,
                  int64_t stop_at = -1, bool resume = false) {
  return testing::train(job, threads, out, stop_at, resume, &data);
}

}  // namespace

TEST_CASE("gpt parameters: canonical names, shapes and init rules") {
  const JobSpec job = job_file("short_gpt.toml");  // V 256, T 32, D 32, 2 layers
  const std::vector<ParamSpec> params = model_params(job.model);
  std::vector<std::pair<std::string, Shape>> expected = {{"tok_emb", Shape{256, 32}},
                                                         {"pos_emb", Shape{32, 32}}};
  for (int l = 0; l < 2; ++l) {
    const std::string h = std::string("h") + std::to_string(l);
    for (const auto& [name, shape] :
         std::vector<std::pair<std::string, Shape>>{{".ln1.weight", Shape{32}},
                                                    {".ln1.bias", Shape{32}},
                                                    {".attn.q.weight", Shape{32, 32}},
                                                    {".attn.q.bias", Shape{32}},
                                                    {".attn.k.weight", Shape{32, 32}},
                                                    {".attn.k.bias", Shape{32}},
                                                    {".attn.v.weight", Shape{32, 32}},
                                                    {".attn.v.bias", Shape{32}},
                                                    {".attn.proj.weight", Shape{32, 32}},
                                                    {".attn.proj.bias", Shape{32}},
                                                    {".ln2.weight", Shape{32}},
                                                    {".ln2.bias", Shape{32}},
                                                    {".mlp.fc.weight", Shape{32, 128}},
                                                    {".mlp.fc.bias", Shape{128}},
                                                    {".mlp.proj.weight", Shape{128, 32}},
                                                    {".mlp.proj.bias", Shape{32}}})
      expected.emplace_back(h + name, shape);
  }
  for (const auto& e : std::vector<std::pair<std::string, Shape>>{{"ln_f.weight", Shape{32}},
                                                                  {"ln_f.bias", Shape{32}},
                                                                  {"head.weight", Shape{32, 256}},
                                                                  {"head.bias", Shape{256}}})
    expected.push_back(e);
  REQUIRE(params.size() == expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    CHECK(params[i].name == expected[i].first);
    CHECK(params[i].shape == expected[i].second);
  }

  const State s = initial_state(job);
  const auto index_of = [&](const std::string& name) {
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i].name == name) return i;
    FAIL("no parameter " << name);
    return size_t{0};
  };
  const auto max_abs = [&](const std::string& name) {
    float m = 0;
    for (float x : s.tensors[index_of(name)].values()) m = std::max(m, std::abs(x));
    return m;
  };
  CHECK(max_abs("tok_emb") <= 0.034641016f);
  CHECK(max_abs("tok_emb") > 0.03f);
  CHECK(max_abs("pos_emb") <= 0.034641016f);
  for (float x : s.tensors[index_of("h1.ln2.weight")].values()) CHECK(x == 1.0f);
  for (float x : s.tensors[index_of("ln_f.bias")].values()) CHECK(x == 0.0f);
  CHECK(max_abs("h0.mlp.proj.weight") <= 1.0f / std::sqrt(128.0f));  // fan_in 4D
  CHECK(max_abs("h0.mlp.proj.weight") > 0.8f / std::sqrt(128.0f));
}

TEST_CASE("gpt step graph: documented shapes, readable names, dropout sites, clipping, schedule, decay") {
  const JobSpec job = job_file("short_gpt.toml");  // B 4, T 32, H 2, E 16, dropout 0.1, clip 1, cosine
  const DataShape data{1000, 32, 256, 32};
  const int64_t t = 5;
  const StepGraph g = build_step_graph(job, data, t, first_rows(4));
  const auto shape_of = [&](const std::string& name) { return g.values[value_named(g, name)].shape; };
  CHECK(shape_of("data.labels") == Shape{1000, 32});
  CHECK(shape_of("batch.inputs") == Shape{4, 32});
  CHECK(shape_of("batch.labels") == Shape{4, 32});
  CHECK(shape_of("batch.labels.flat") == Shape{128});
  CHECK(shape_of("embed") == Shape{128, 32});
  CHECK(shape_of("h0.ln1") == Shape{128, 32});
  CHECK(shape_of("h0.attn.q") == Shape{128, 32});
  CHECK(shape_of("h0.attn.k.heads") == Shape{8, 32, 16});
  CHECK(shape_of("h1.attn.scores") == Shape{8, 32, 32});
  CHECK(shape_of("h1.attn.softmax") == Shape{8, 32, 32});
  CHECK(shape_of("h1.attn.context") == Shape{8, 32, 16});
  CHECK(shape_of("h1.attn.merge") == Shape{128, 32});
  CHECK(shape_of("h1.mlp.fc") == Shape{128, 128});
  CHECK(shape_of("h1.mlp.gelu") == Shape{128, 128});
  CHECK(shape_of("h1.out") == Shape{128, 32});
  CHECK(shape_of("ln_f") == Shape{128, 32});
  CHECK(shape_of("logits") == Shape{128, 256});
  CHECK(shape_of("grad/logits") == Shape{128, 256});
  CHECK(shape_of("loss") == Shape{});
  CHECK(g.values[g.loss].name == "loss");

  const Node& softmax = producer(g, value_named(g, "h1.attn.softmax"));
  CHECK(softmax.op == OpKind::Softmax);
  CHECK(softmax.attrs.ints == std::vector<int64_t>{1});
  CHECK(softmax.attrs.floats == std::vector<float>{0.25f});  // 1/√16
  const Node& scores = producer(g, value_named(g, "h0.attn.scores"));
  CHECK(scores.op == OpKind::Matmul);
  CHECK(scores.attrs.ints == std::vector<int64_t>{0, 1});
  CHECK(producer(g, value_named(g, "h0.attn.q.heads")).attrs.ints == std::vector<int64_t>{4, 32, 2});
  CHECK(producer(g, value_named(g, "h0.ln2")).attrs.floats == std::vector<float>{1e-5f});
  const Node& loss = producer(g, g.loss);
  CHECK(loss.op == OpKind::SoftmaxCrossEntropy);
  CHECK(loss.inputs == std::vector<ValueId>{value_named(g, "logits"), value_named(g, "batch.labels.flat")});

  // Dropout: after the embedding and after each attention and MLP projection, sites in forward order.
  std::vector<const Node*> drops;
  for (const Node& n : g.nodes)
    if (n.op == OpKind::Dropout) drops.push_back(&n);
  REQUIRE(drops.size() == 5);
  for (size_t i = 0; i < drops.size(); ++i) {
    CHECK(drops[i]->attrs.ints == std::vector<int64_t>{5, t, static_cast<int64_t>(i)});
    CHECK(drops[i]->attrs.floats == std::vector<float>{0.1f});
  }
  CHECK(&producer(g, value_named(g, "embed.dropout")) == drops[0]);
  CHECK(&producer(g, value_named(g, "h1.mlp.dropout")) == drops[4]);

  // Clipping: sum_squares of every gradient in parameter order, one coefficient, scaled gradients.
  const StateLayout layout = state_layout(job);
  const size_t P = layout.num_params;
  CHECK(count_op(g, OpKind::SumSquares) == P);
  CHECK(count_op(g, OpKind::Scale) == P);
  const Node& coef = producer(g, value_named(g, "clip.coef"));
  CHECK(coef.op == OpKind::ClipCoefficient);
  CHECK(coef.attrs.floats == std::vector<float>{1.0f});
  REQUIRE(coef.inputs.size() == P);
  for (size_t p = 0; p < P; ++p) {
    CHECK(g.values[coef.inputs[p]].name == std::string("clip.sumsq/") + layout.names[p]);
    CHECK(producer(g, coef.inputs[p]).inputs ==
          std::vector<ValueId>{value_named(g, std::string("grad/") + layout.names[p])});
  }

  // The optimizer: the scheduled rate, decay only on matrices, the clipped gradients.
  const float lr = learning_rate(job, t);
  CHECK(lr != job.optimizer.lr);
  for (size_t p = 0; p < P; ++p) {
    const Node& opt = g.nodes[g.nodes.size() - P + p];
    CAPTURE(layout.names[p]);
    CHECK(opt.op == OpKind::AdamW);
    CHECK(opt.attrs.floats[0] == lr);
    CHECK(opt.attrs.floats[4] == (layout.shapes[p].rank() >= 2 ? 0.1f : 0.0f));
    CHECK(g.values[opt.inputs[1]].name == std::string("clip.grad/") + layout.names[p]);
  }
  CHECK(build_step_graph(job, data, 0, first_rows(4)).nodes.back().attrs.floats[0] == learning_rate(job, 0));

  // Evaluation graphs and dropout 0 have no dropout nodes.
  const StepGraph eval = build_eval_graph(job, data, 3);
  CHECK(count_op(eval, OpKind::Dropout) == 0);
  CHECK(eval.values[eval.loss].shape == Shape{96, 256});
  const StepGraph eval_loss = build_eval_loss_graph(job, data, 3);
  CHECK(count_op(eval_loss, OpKind::Dropout) == 0);
  CHECK(eval_loss.values[eval_loss.loss].shape == Shape{});
  JobSpec no_drop = job;
  no_drop.model.dropout = 0.0f;
  CHECK(count_op(build_step_graph(no_drop, data, t, first_rows(4)), OpKind::Dropout) == 0);
  // Clipping off: no clip nodes and the raw gradients feed the optimizer.
  JobSpec no_clip = job;
  no_clip.optimizer.clip_norm = 0.0f;
  const StepGraph unclipped = build_step_graph(no_clip, data, t, first_rows(4));
  CHECK(count_op(unclipped, OpKind::SumSquares) == 0);
  CHECK(unclipped.values[unclipped.nodes.back().inputs[1]].name == "grad/head.bias");

  // The labels' layout must be the model's.
  CHECK_THROWS_WITH_AS(
      build_step_graph(job, DataShape{1000, 32, 256, 0}, t, first_rows(4)),
      (job.source + ": the next-token model's step graph needs label sequences (label_width 32), but the "
                    "data shape has label_width 0")
          .c_str(),
      EngineError);
  CHECK_THROWS_AS(build_eval_loss_graph(job, DataShape{1000, 32, 256, 16}, 3), EngineError);
}

TEST_CASE("cnn parameters and step graph") {
  const JobSpec job = job_file("short_cnn.toml");  // channels [4, 8], kernel 3, batch 16
  const std::vector<ParamSpec> params = model_params(job.model);
  REQUIRE(params.size() == 6);
  CHECK(params[0].name == "conv0.weight");
  CHECK(params[0].shape == Shape{4, 1, 3, 3});
  CHECK(params[0].fan_in == 9);
  CHECK(params[1].name == "conv0.bias");
  CHECK(params[2].shape == Shape{8, 4, 3, 3});
  CHECK(params[2].fan_in == 36);
  CHECK(params[3].name == "conv1.bias");
  CHECK(params[4].name == "fc.weight");
  CHECK(params[4].shape == Shape{8 * 7 * 7, 10});
  CHECK(params[5].name == "fc.bias");
  CHECK(params[5].shape == Shape{10});

  const DataShape data{60000, 784, 10, 0};
  const StepGraph g = build_step_graph(job, data, 0, first_rows(16));
  const auto shape_of = [&](const std::string& name) { return g.values[value_named(g, name)].shape; };
  CHECK(shape_of("input.image") == Shape{16, 1, 28, 28});
  CHECK(shape_of("conv0.out") == Shape{16, 4, 28, 28});
  CHECK(shape_of("conv0.relu") == Shape{16, 4, 28, 28});
  CHECK(shape_of("conv0.pool") == Shape{16, 4, 14, 14});
  CHECK(shape_of("conv1.out") == Shape{16, 8, 14, 14});
  CHECK(shape_of("conv1.pool") == Shape{16, 8, 7, 7});
  CHECK(shape_of("flatten") == Shape{16, 392});
  CHECK(shape_of("logits") == Shape{16, 10});
  CHECK(shape_of("grad/conv0.weight") == Shape{4, 1, 3, 3});
  CHECK(producer(g, value_named(g, "conv1.out")).attrs.ints ==
        std::vector<int64_t>{1, 1});            // stride 1, pad k/2
  CHECK(count_op(g, OpKind::SumSquares) == 0);  // no clipping in this job
  CHECK(count_op(g, OpKind::Dropout) == 0);
  CHECK(g.nodes.back().attrs.floats[0] == job.optimizer.lr);  // constant schedule
  CHECK_THROWS_AS(build_step_graph(job, DataShape{60000, 784, 10, 28}, 0, first_rows(16)), EngineError);
}

TEST_CASE("short gpt job: the loss falls; bit-identical on 1 and 2 threads and across a resume") {
  const JobSpec job = job_file("short_gpt.toml");
  const Dataset& data = gpt_train();
  TempDir d1("gpt1"), d2("gpt2"), split("gptsplit");
  const TrainResult one = train(job, data, 1, d1.path);
  const TrainResult two = train(job, data, 2, d2.path);
  MESSAGE("short_gpt trajectory_root " << to_hex(one.trajectory_root) << ", loss " << one.loss_first << " -> "
                                       << one.loss_last);
  CHECK(one.steps == 12);
  CHECK(one.checkpoint_hashes.size() == 4);  // 0, 4, 8, 12
  CHECK(one.loss_first == doctest::Approx(std::log(256.0)).epsilon(0.05));
  CHECK(one.loss_last < one.loss_first - 0.5f);
  CHECK(two.trajectory_root == one.trajectory_root);
  CHECK(two.final_state_hash == one.final_state_hash);

  const TrainResult first = train(job, data, 2, split.path, 6);
  CHECK(first.steps == 6);
  const TrainResult resumed = train(job, data, 1, split.path, -1, true);
  CHECK(resumed.resumed_from == 6);
  CHECK(resumed.trajectory_root == one.trajectory_root);
  CHECK(resumed.final_state_hash == one.final_state_hash);
}

TEST_CASE("short cnn job: the loss falls; bit-identical on 1 and 2 threads and across a resume") {
  const JobSpec job = job_file("short_cnn.toml");
  const Dataset& data = cnn_train();
  TempDir d1("cnn1"), d2("cnn2"), split("cnnsplit");
  const TrainResult one = train(job, data, 1, d1.path);
  const TrainResult two = train(job, data, 2, d2.path);
  MESSAGE("short_cnn trajectory_root " << to_hex(one.trajectory_root) << ", loss " << one.loss_first << " -> "
                                       << one.loss_last);
  CHECK(one.loss_first == doctest::Approx(std::log(10.0)).epsilon(0.1));
  CHECK(one.loss_last < one.loss_first - 0.2f);
  CHECK(two.trajectory_root == one.trajectory_root);
  const TrainResult first = train(job, data, 2, split.path, 5);
  const TrainResult resumed = train(job, data, 2, split.path, -1, true);
  CHECK(resumed.resumed_from == 5);
  CHECK(resumed.trajectory_root == one.trajectory_root);
}

TEST_CASE("evaluate_loss: mean cross-entropy over every window, independent of chunking and threads") {
  const JobSpec job = job_file("short_gpt.toml");
  ThreadPool pool(2), serial(1);
  const Dataset full = load_dataset(job, Split::Test, pool);
  REQUIRE(full.samples() > 300);
  // 300 held-out windows: 256 per chunk (8192 predictions / 32), so two chunks of 256 and 44.
  Dataset part;
  part.inputs = Tensor(Shape{300, 32}, std::span<const float>(full.inputs.data(), 300 * 32));
  part.labels = Tensor(Shape{300, 32}, std::span<const float>(full.labels.data(), 300 * 32));
  part.classes = 256;
  const State s0 = initial_state(job);
  const double loss = evaluate_loss(job, s0, part, pool);
  CHECK(loss == doctest::Approx(std::log(256.0)).epsilon(0.05));  // small initial logits: near uniform
  CHECK(evaluate_loss(job, s0, part, serial) == loss);
  // The same as the one-chunk mean of each half, weighted by rows.
  Dataset a, b;
  a.inputs = Tensor(Shape{256, 32}, std::span<const float>(part.inputs.data(), 256 * 32));
  a.labels = Tensor(Shape{256, 32}, std::span<const float>(part.labels.data(), 256 * 32));
  b.inputs = Tensor(Shape{44, 32}, std::span<const float>(part.inputs.data() + 256 * 32, 44 * 32));
  b.labels = Tensor(Shape{44, 32}, std::span<const float>(part.labels.data() + 256 * 32, 44 * 32));
  a.classes = b.classes = 256;
  const double combined =
      (evaluate_loss(job, s0, a, pool) * 256 + evaluate_loss(job, s0, b, pool) * 44) / 300;
  CHECK(loss == doctest::Approx(combined).epsilon(1e-12));
  Dataset empty;
  empty.inputs = Tensor(Shape{0, 32});
  empty.labels = Tensor(Shape{0, 32});
  CHECK_THROWS_AS(evaluate_loss(job, s0, empty, pool), EngineError);
}
