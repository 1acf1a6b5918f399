// Mean squared error against float targets (model.loss = "mse", engine/loss.h; docs/numerics.md "Mean
// squared error"): the composed loss and its gradient against a naive double computation, the job keys
// and their refusals, the tensors data set's targets, and the regression jobs training: an MLP and the
// imported regressor of scenarios/jobs/short_onnx_mse.toml (its root golden, independent of threads and
// SIMD paths).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/autodiff.h"
#include "engine/cost.h"
#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/executor.h"
#include "engine/loss.h"
#include "engine/npy.h"
#include "engine/safetensors.h"
#include "engine/sampler.h"
#include "engine/step.h"
#include "engine/tensor_data.h"
#include "engine/trainer.h"
#include "ops/simd.h"
#include "tests/engine/engine_helpers.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using tribunal::testing::TempDir;

namespace {

const std::filesystem::path kSource = tribunal::testing::source_dir();
const std::filesystem::path kRegression = kSource / "tests/fixtures/regression";
const std::filesystem::path kRegressor = kSource / "tests/fixtures/onnx/regressor.onnx";
const std::string kMseJob = "scenarios/jobs/short_onnx_mse.toml";

DataRegistry registry() {
  DataRegistry r = DataRegistry::debian();
  r.add("regression", kRegression);
  r.add_model("regressor", kRegressor);
  return r;
}

// An MLP regressing the fixture's two targets from its four features.
const char* kMlpMse = R"([model]
kind = "mlp"
widths = [4, 16, 2]
loss = "mse"
[data]
dataset = "tensors"
name = "regression"
targets = 2
[train]
seed = 5
steps = 64
batch_size = 16
stride = 16
[optimizer]
lr = 0.01
)";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, "no '" << from << "'");
  return s.replace(at, from.size(), to);
}

// The message parse_job throws for `text` ("" when it parses).
std::string refusal(const std::string& text) {
  try {
    parse_job(text, "job.toml");
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Deterministic values in [−2, 2) that are not all representable sums: an LCG's top bits.
std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 24) * 4.0f - 2.0f;
  }
  return v;
}

// run_training with the evaluation on the test split (testing::train leaves it out).
TrainResult train_evaluated(const JobSpec& job, const std::filesystem::path& out) {
  TrainOptions o;
  o.threads = 1;
  o.out_dir = out;
  return run_training(job, o);
}

}  // namespace

TEST_CASE("the mse loss is the mean of (p − t)² over all B·K elements, its gradient 2(p − t)/(B·K)") {
  constexpr int64_t B = 7, K = 3, N = B * K;
  StepGraph g;
  GraphBuilder b(g);
  const ValueId p = b.add_state("p", Shape{B, K});
  const ValueId t = b.add_data("t", Shape{B, K});
  g.loss = append_mse(b, p, t, "test");
  const ValueId params[] = {p};
  const ValueId grad = append_backward(b, g.loss, params).front();
  // The composition docs/numerics.md states: sub, mul, reshape, reduce_mean, reshape.
  std::vector<OpKind> forward;
  for (size_t n = 0; n < 5; ++n) forward.push_back(g.nodes[n].op);
  CHECK(forward == std::vector<OpKind>{OpKind::BroadcastBinary, OpKind::BroadcastBinary, OpKind::Reshape,
                                       OpKind::ReduceMean, OpKind::Reshape});
  CHECK(g.values.at(g.loss).shape == Shape{});

  const std::vector<float> pv = values(N, 1), tv = values(N, 2);
  const Tensor pt(Shape{B, K}, std::span<const float>(pv)), tt(Shape{B, K}, std::span<const float>(tv));
  const Tensor* state[] = {&pt};
  const Tensor* data[] = {&tt};
  double want = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    const double d = static_cast<double>(pv[i]) - static_cast<double>(tv[i]);
    want += d * d;
  }
  want /= static_cast<double>(N);

  std::vector<float> first_loss, first_grad;
  for (const bool reference : {true, false})
    for (const int threads : {1, 2, 3}) {
      CAPTURE(reference);
      CAPTURE(threads);
      ThreadPool pool(threads);
      Executor ex(pool, reference);
      ex.run(g, state, data);
      const float loss = ex.value(g.loss)[0];
      // N float roundings of the squares and of the sum, one of the division.
      CHECK(std::abs(static_cast<double>(loss) - want) <= 3.0 * N * 0x1p-24 * want);
      const Tensor& dp = ex.value(grad);
      REQUIRE(dp.shape() == Shape{B, K});
      for (int64_t i = 0; i < N; ++i) {
        // Exactly 2·fl(fl(1/N)·fl(p − t)): reduce_mean_backward's one division, the product's rounding,
        // and the two equal contributions of d·d added (exact).
        const float d = pv[i] - tv[i];
        const float u = (1.0f / static_cast<float>(N)) * d;
        CHECK(dp[i] == 2.0f * u);
        const double exact = 2.0 * (static_cast<double>(pv[i]) - static_cast<double>(tv[i])) / N;
        CHECK(std::abs(static_cast<double>(dp[i]) - exact) <= 4.0 * 0x1p-24 * std::abs(exact));
      }
      // Every executor and thread count: the same bits.
      std::vector<float> grads(dp.data(), dp.data() + N);
      if (first_grad.empty()) {
        first_loss = {loss};
        first_grad = grads;
      }
      CHECK(std::memcmp(&first_loss[0], &loss, sizeof loss) == 0);
      CHECK(std::memcmp(first_grad.data(), grads.data(), grads.size() * sizeof(float)) == 0);
    }

  // Shapes that do not fit: the output must be [B, K] with the targets' K.
  StepGraph h;
  GraphBuilder hb(h);
  const ValueId wide = hb.add_state("p", Shape{B, 3});
  const ValueId narrow = hb.add_data("t", Shape{B, 2});
  CHECK_THROWS_WITH_AS(
      append_mse(hb, wide, narrow, "job.toml"),
      doctest::Contains("job.toml: the model output is [7, 3] (3 predictions per sample), but "
                        "the targets are [7, 2] (data.targets = 2)"),
      EngineError);
  const ValueId flat = hb.add_state("q", Shape{B});
  CHECK_THROWS_WITH_AS(append_mse(hb, flat, narrow, "job.toml"),
                       doctest::Contains("model.loss = \"mse\" reads a model output of shape [B, K]"),
                       EngineError);
}

TEST_CASE("model.loss: the default keeps every job id, mse adds 0x07 2 after the encoding") {
  // A default-valued key changes no byte of the canonical encoding.
  const std::string mlp = read_file(kSource / "scenarios/jobs/short_mlp.toml");
  const JobSpec plain = parse_job(mlp, "a.toml");
  const JobSpec stated = parse_job(replaced(mlp, "[model]", "[model]\nloss = \"cross_entropy\""), "b.toml");
  CHECK(stated.model.loss == LossKind::CrossEntropy);
  const Digest root{};
  const DataShape fashion{60000, 784, 10, 0};
  CHECK(canonical_job_encoding(stated, root, fashion) == canonical_job_encoding(plain, root, fashion));

  JobSpec mse = parse_job(kMlpMse, "mse.toml");
  CHECK(mse.model.loss == LossKind::Mse);
  CHECK(mse.data_targets == 2);
  CHECK(mse.data_classes == 0);
  CHECK(label_width(mse) == 2);
  const DataShape targets{256, 4, 2, 2};
  const std::vector<uint8_t> with = canonical_job_encoding(mse, root, targets);
  mse.model.loss = LossKind::CrossEntropy;
  std::vector<uint8_t> without = canonical_job_encoding(mse, root, targets);
  without.push_back(7);
  without.push_back(2);
  CHECK(with == without);

  // The imported regressor's job: K is the onnx model's output width.
  const JobSpec onnx = parse_job(read_file(kSource / kMseJob), kMseJob);
  CHECK(onnx.model.loss == LossKind::Mse);
  CHECK(onnx.model.classes == 2);
  CHECK(label_width(onnx) == 2);
}

TEST_CASE("model.loss = \"mse\" is refused where it makes no sense, naming the file and the key") {
  const auto fashion =
      replaced(read_file(kSource / "scenarios/jobs/short_mlp.toml"), "[model]", "[model]\nloss = \"mse\"");
  CHECK(refusal(fashion).find("job.toml:") == 0);
  CHECK(refusal(fashion).find("model.loss = \"mse\" regresses float targets, which only data.dataset = "
                              "\"tensors\" holds (targets.npy, data.targets); data.dataset = "
                              "\"fashion-mnist\" has class ids (use the cross-entropy)") !=
        std::string::npos);
  const auto gpt =
      replaced(read_file(kSource / "scenarios/jobs/short_gpt.toml"), "[model]", "[model]\nloss = \"mse\"");
  CHECK(refusal(gpt).find("model.loss = \"mse\" is supported for model.kind = \"mlp\" or \"onnx\", not "
                          "\"gpt\" (a gpt predicts the next byte") != std::string::npos);
  const auto cnn =
      replaced(read_file(kSource / "scenarios/jobs/short_cnn.toml"), "[model]", "[model]\nloss = \"mse\"");
  CHECK(refusal(cnn).find("not \"cnn\" (a cnn classifies images") != std::string::npos);
  const auto text = replaced(read_file(kSource / "scenarios/jobs/short_onnx_gpt2.toml"), "[model]",
                             "[model]\nloss = \"mse\"");
  CHECK(refusal(text).find("data.dataset = \"text\" has next-byte ids (use the cross-entropy)") !=
        std::string::npos);
  CHECK(refusal(replaced(kMlpMse, "targets = 2", "classes = 2"))
            .find("job.toml:8:11: data.classes counts class ids, but model.loss = \"mse\" regresses float "
                  "targets: state data.targets") != std::string::npos);
  CHECK(refusal(replaced(kMlpMse, "loss = \"mse\"\n", ""))
            .find("job.toml:7:11: data.targets is read only with model.loss = \"mse\"") != std::string::npos);
  CHECK(refusal(replaced(kMlpMse, "\"mse\"", "\"huber\""))
            .find("job.toml:4:8: model.loss 'huber' is not supported (supported: cross_entropy, mse)") !=
        std::string::npos);
  CHECK(refusal(replaced(kMlpMse, "targets = 2\n", "")).find("data.targets") != std::string::npos);
  CHECK(refusal(replaced(kMlpMse, "targets = 2", "targets = 0")).find("data.targets = 0 is out of range") !=
        std::string::npos);
  CHECK(refusal(kMlpMse).empty());
}

TEST_CASE("the tensors data set's float targets: .npy and safetensors, one root, bad targets refused") {
  ThreadPool pool(2);
  const Dataset train = load_tensor_targets(kRegression, 2, Split::Train, pool);
  CHECK(train.samples() == 256);
  CHECK(train.inputs.shape() == Shape{256, 4});
  CHECK(train.labels.shape() == Shape{256, 2});
  CHECK(train.label_width() == 2);
  CHECK(train.classes == 2);
  CHECK(data_shape_of(train) == DataShape{256, 4, 2, 2});
  CHECK(tensor_targets_shape(kRegression, 2) == DataShape{256, 4, 2, 2});
  const Dataset test = load_tensor_targets(kRegression, 2, Split::Test, pool);
  CHECK(test.samples() == 64);
  // The targets are the file's floats as they are (targets.npy's first row, read independently).
  const NpyArray raw = read_npy(kRegression / "targets.npy");
  CHECK(std::memcmp(raw.bytes.data(), train.labels.data(), raw.bytes.size()) == 0);
  CHECK(raw.bytes.size() == 256 * 2 * sizeof(float));

  // The safetensors twin: the same root.
  TempDir dir("targets");
  const std::filesystem::path st = dir.path / "st";
  std::filesystem::create_directories(st);
  const auto tensors = [&](const char* second, const char* dtype, const std::vector<int64_t>& shape,
                           std::span<const std::byte> bytes) {
    return std::vector<RawTensor>{
        {"features", "F32", {256, 4}, std::as_bytes(std::span<const float>(train.inputs.data(), 256 * 4))},
        {second, dtype, shape, bytes}};
  };
  const auto targets = std::as_bytes(std::span<const float>(train.labels.data(), 256 * 2));
  write_safetensors_raw(st / "data.safetensors", tensors("targets", "F32", {256, 2}, targets), {});
  const Dataset twin = load_tensor_targets(st, 2, Split::Train, pool);
  CHECK(twin.root == train.root);
  CHECK(load_tensor_targets(st, 2, Split::Test, pool).samples() == 0);  // no test split

  // A class-id data file is not a targets file, and K is the job's.
  write_safetensors_raw(st / "data.safetensors", tensors("labels", "F32", {256, 2}, targets), {});
  CHECK_THROWS_WITH_AS(
      load_tensor_targets(st, 2, Split::Train, pool),
      doctest::Contains("unexpected tensor \"labels\" (a data file holds exactly \"features\" "
                        "and \"targets\")"),
      EngineError);
  write_safetensors_raw(st / "data.safetensors", tensors("targets", "F32", {128, 4}, targets), {});
  CHECK_THROWS_WITH_AS(load_tensor_targets(st, 2, Split::Train, pool),
                       doctest::Contains("tensor \"targets\": targets must be [N, 2] (data.targets = 2), not "
                                         "shape (128, 4)"),
                       EngineError);
  const std::vector<int64_t> ints(512, 1);
  write_safetensors_raw(st / "data.safetensors",
                        tensors("targets", "I64", {256, 2}, std::as_bytes(std::span<const int64_t>(ints))),
                        {});
  CHECK_THROWS_WITH_AS(load_tensor_targets(st, 2, Split::Train, pool),
                       doctest::Contains("targets must be float32 (F32), not I64"), EngineError);
  std::vector<float> bad(train.labels.data(), train.labels.data() + 512);
  bad[7] = NAN;
  write_safetensors_raw(st / "data.safetensors",
                        tensors("targets", "F32", {256, 2}, std::as_bytes(std::span<const float>(bad))), {});
  CHECK_THROWS_WITH_AS(load_tensor_targets(st, 2, Split::Train, pool),
                       doctest::Contains("sample 3: target 1 is nan (targets must be finite)"), EngineError);

  // .npy: a targets.npy of 3 columns for a job of 2.
  const std::filesystem::path npy = dir.path / "npy";
  std::filesystem::create_directories(npy);
  std::filesystem::copy_file(kRegression / "features.npy", npy / "features.npy");
  const std::vector<float> three(256 * 3, 0.5f);
  write_npy(npy / "targets.npy", "<f4", {256, 3}, three.data(), three.size() * sizeof(float));
  CHECK_THROWS_WITH_AS(
      load_tensor_targets(npy, 2, Split::Train, pool),
      doctest::Contains("targets.npy: targets must be [N, 2] (data.targets = 2), not shape (256, "
                        "3)"),
      EngineError);
  std::filesystem::remove(npy / "targets.npy");
  CHECK_THROWS_WITH_AS(load_tensor_targets(npy, 2, Split::Train, pool), doctest::Contains("targets.npy"),
                       EngineError);
}

TEST_CASE("an MLP regresses the fixture's targets with mse: the loss falls, roots equal across threads") {
  JobSpec job = parse_job(kMlpMse, "mlp_mse.toml");
  locate_data(job, registry());
  TempDir d1("mlp1"), d2("mlp2");
  const TrainResult one = train_evaluated(job, d1.path);
  const TrainResult two = testing::train(job, 2, d2.path);
  CHECK(two.trajectory_root == one.trajectory_root);
  CHECK(one.loss_last < 0.5f * one.loss_first);
  CHECK(one.test_accuracy == -1.0);
  CHECK(one.validation_loss > 0.0);
  CHECK(one.validation_loss < static_cast<double>(one.loss_first));
  // The referee's cost sketch of an mse MLP is its built step graph's.
  const DataShape shape = expected_data_shape(job);
  const DisputeCost sketched = dispute_cost(job, shape);
  const StepGraph g = build_step_graph(job, shape, 0, std::vector<int64_t>(16, 0));
  const DisputeCost built = dispute_cost(job, g);
  CHECK(sketched.nodes == built.nodes);
  CHECK(sketched.max_node_work == built.max_node_work);
  CHECK(sketched.max_opened_bytes == built.max_opened_bytes);
  CHECK(sketched.heaviest_node == built.heaviest_node);
  CHECK(sketched.context == 0);

  // Sharded (docs/numerics.md "Sharded batch reductions"): the mean of the 4 shards' means is the
  // batch's mean squared error up to rounding, and the trajectory is the same on 1 and 2 threads.
  JobSpec sharded = parse_job(replaced(kMlpMse, "batch_size = 16", "batch_size = 16\nshards = 4"), "s.toml");
  locate_data(sharded, registry());
  TempDir s1("sharded1"), s2("sharded2");
  const TrainResult four = testing::train(sharded, 1, s1.path);
  CHECK(testing::train(sharded, 2, s2.path).trajectory_root == four.trajectory_root);
  CHECK(std::abs(four.loss_first - one.loss_first) <= 1e-6f * one.loss_first);

  // The output width must be the targets'.
  JobSpec wide = parse_job(replaced(kMlpMse, "[4, 16, 2]", "[4, 16, 3]"), "wide.toml");
  locate_data(wide, registry());
  ThreadPool pool(1);
  CHECK_THROWS_WITH_AS(
      check_job_against_dataset(wide, load_dataset(wide, Split::Train, pool)),
      doctest::Contains("wide.toml: model.widths ends with 3 but tensors has 2 targets per sample"),
      EngineError);
}

// scenarios/jobs/short_onnx_mse.toml: the imported regressor (tests/fixtures/onnx/regressor.onnx). Its
// root is pinned in tests/fixtures/golden_roots.txt like the other short jobs', and the first step's loss
// is the mean of the squared errors of state 0's predictions on that step's batch, in double.
TEST_CASE("the imported regressor's mse job trains, its root golden across threads and SIMD paths") {
  const JobSpec job = load_job(kSource / kMseJob, registry());
  const std::string golden = testing::pinned_root("golden_roots.txt", kMseJob);
  TempDir d1("onnx1"), d3("onnx3");
  const TrainResult one = train_evaluated(job, d1.path);
  CHECK(to_hex(one.trajectory_root) == golden);
  CHECK(to_hex(testing::train(job, 3, d3.path).trajectory_root) == golden);
  CHECK(one.loss_last < 0.25f * one.loss_first);
  CHECK(one.test_accuracy == -1.0);
  CHECK(one.validation_loss > 0.0);
  CHECK(one.validation_loss < 0.1);
  for (SimdPath path : available_simd_paths()) {
    CAPTURE(simd_path_name(path));
    const ScopedSimdPath forced(path);
    TempDir dir("path");
    CHECK(to_hex(testing::train(job, 2, dir.path).trajectory_root) == golden);
  }

  // Step 0's loss against the forward alone (no loss head) and a double mean of squares.
  ThreadPool pool(2);
  const Dataset data = load_dataset(job, Split::Train, pool);
  const State s0 = load_checkpoint(checkpoint_path(d1.path, 0), job, one.job_id, pool);
  BatchSampler sampler(job.seed, data.samples(), job.batch_size);
  const std::vector<int64_t> rows = sampler.indices(0);
  const StepGraph g = build_eval_graph(job, data_shape_of(data), job.batch_size);
  Tensor x(Shape{job.batch_size, 4});
  for (int64_t r = 0; r < job.batch_size; ++r)
    for (int64_t f = 0; f < 4; ++f) x[r * 4 + f] = data.inputs[rows[r] * 4 + f];
  std::vector<const Tensor*> params;
  for (size_t p = 0; p < state_layout(job).num_params; ++p) params.push_back(&s0.tensors[p]);
  const Tensor* in[] = {&x};
  Executor ex(pool);
  ex.run(g, params, in);
  const Tensor& prediction = ex.value(g.loss);
  REQUIRE(prediction.shape() == Shape{job.batch_size, 2});
  double want = 0.0;
  for (int64_t r = 0; r < job.batch_size; ++r)
    for (int64_t k = 0; k < 2; ++k) {
      const double d = static_cast<double>(prediction[r * 2 + k]) - data.labels[rows[r] * 2 + k];
      want += d * d;
    }
  want /= static_cast<double>(job.batch_size * 2);
  CHECK(std::abs(static_cast<double>(one.loss_first) - want) <= 1e-6 * want);

  // A job stating 3 targets of a model predicting 2: refused when the step graph is built.
  JobSpec three = job;
  three.data_targets = 3;
  three.model.classes = 3;
  CHECK_THROWS_WITH_AS(build_step_graph(three, DataShape{256, 4, 3, 3}, 0, std::vector<int64_t>(16, 0)),
                       doctest::Contains("the model output is [16, 2] (2 predictions per sample), but the "
                                         "targets are [16, 3] (data.targets = 3)"),
                       EngineError);
}
