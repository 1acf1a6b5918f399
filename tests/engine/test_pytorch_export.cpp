// The PyTorch form (engine/pytorch_export.h): for the short MLP, CNN and GPT jobs the exported tensors
// are exactly the trained checkpoint's, renamed to the reference torch modules' parameter paths and
// with every Linear weight (and its optimizer slots) transposed to [out, in]; the optimizer file holds
// every slot and the step as I64; the metadata names the job and the committed state.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/pytorch_export.h"
#include "engine/safetensors.h"
#include "engine/step.h"
#include "engine/trainer.h"
#include "tests/engine/engine_helpers.h"
#include "tests/engine/job_text.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using testing::TempDir;

namespace {

// One expected torch parameter: its name, torch shape, our name, and whether it is transposed.
struct Expected {
  std::string torch, ours;
  std::vector<int64_t> shape;
  bool transposed;
};

std::string job_text(const char* name) {
  return testing::read_text(testing::source_dir() / "scenarios/jobs" / name);
}

// The job of `text`, its data set located in the default registry.
JobSpec job_of(const std::string& text, const std::string& source) {
  JobSpec job = parse_job(text, source);
  locate_data(job, DataRegistry::debian());
  return job;
}

// The final checkpoint of `job` trained here, loaded and verified.
struct Trained {
  TrainResult result;
  State state;
};
Trained train_final(const JobSpec& job, const std::filesystem::path& dir) {
  Trained t{testing::train(job, 1, dir), {}};
  ThreadPool pool(1);
  t.state = load_checkpoint(checkpoint_path(dir, job.steps), job, t.result.job_id, pool);
  return t;
}

std::vector<int64_t> dims_of(const Tensor& t) {
  const auto d = t.shape().dims();
  return {d.begin(), d.end()};
}

// `got` is `ours` (transposed when asked), element by element and bitwise.
void check_values(const Tensor& got, const Tensor& ours, bool transposed, const std::string& what) {
  INFO(what);
  if (!transposed) {
    REQUIRE(got.shape() == ours.shape());
    CHECK(std::memcmp(got.data(), ours.data(), ours.bytes().size()) == 0);
    return;
  }
  const int64_t in = ours.shape()[0], out = ours.shape()[1];
  REQUIRE(got.shape() == Shape{out, in});
  int64_t mismatches = 0;
  for (int64_t i = 0; i < in; ++i)
    for (int64_t j = 0; j < out; ++j)
      if (std::memcmp(&got.data()[j * in + i], &ours.data()[i * out + j], 4) != 0) ++mismatches;
  CHECK(mismatches == 0);
}

// The state tensor of `job` named `name`.
const Tensor& state_tensor(const JobSpec& job, const State& state, const std::string& name) {
  const StateLayout layout = state_layout(job);
  for (size_t i = 0; i < layout.names.size(); ++i)
    if (layout.names[i] == name) return state.tensors[i];
  FAIL("no state tensor " << name);
  return state.tensors[0];
}

// The safetensors header of `path` as JSON (parsed by hand: the optimizer file holds an I64 tensor,
// which read_safetensors refuses), and the file's bytes.
std::pair<nlohmann::json, std::string> raw_header(const std::filesystem::path& path) {
  const std::string bytes = testing::read_text(path);
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[static_cast<size_t>(i)])) << (8 * i);
  REQUIRE(8 + n <= bytes.size());
  return {nlohmann::json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

// Converts, writes and checks the PyTorch form of `t` against `expected` (model_params order).
void check_export(const JobSpec& job, const Trained& t, const std::vector<Expected>& expected,
                  const std::vector<std::pair<std::string, std::string>>& slots) {
  const PytorchState form = to_pytorch(job, t.state);
  REQUIRE(form.model.size() == expected.size());
  for (size_t p = 0; p < expected.size(); ++p) {
    const Expected& e = expected[p];
    CHECK(form.model[p].name == e.torch);
    CHECK(dims_of(form.model[p].value) == e.shape);
    check_values(form.model[p].value, state_tensor(job, t.state, e.ours), e.transposed, e.torch);
  }
  REQUIRE(form.optimizer.size() == expected.size() * slots.size());
  for (size_t p = 0; p < expected.size(); ++p)
    for (size_t k = 0; k < slots.size(); ++k) {
      const TorchTensor& got = form.optimizer[p * slots.size() + k];
      const Expected& e = expected[p];
      CHECK(got.name == fmt::format("{}/{}", slots[k].second, e.torch));
      CHECK(dims_of(got.value) == e.shape);
      check_values(got.value, state_tensor(job, t.state, slots[k].first + e.ours), e.transposed, got.name);
    }
  CHECK(form.step == job.steps);
  CHECK(form.loss == t.state.tensors.back()[0]);
  CHECK(form.loss > 0.0f);

  // The files: the model's tensors as converted, in order; every slot and the I64 step in the other.
  TempDir dir("pytorch-export");
  const auto model = dir.path / "model.safetensors", optimizer = dir.path / "optimizer.safetensors";
  ThreadPool pool(1);
  const Digest hash = state_hash(t.state, pool);
  write_pytorch(model, optimizer, job, t.state, t.result.job_id, hash);
  const SafetensorsFile m = read_safetensors(model);
  REQUIRE(m.tensors.size() == expected.size());
  for (size_t p = 0; p < expected.size(); ++p) {
    CHECK(m.tensors[p].first == expected[p].torch);
    CHECK(m.tensors[p].second.values().size() == form.model[p].value.values().size());
    CHECK(std::memcmp(m.tensors[p].second.data(), form.model[p].value.data(),
                      form.model[p].value.bytes().size()) == 0);
  }
  CHECK(m.metadata.at("format") == "tribunal-pytorch-model-1");
  CHECK(m.metadata.at("job_id") == to_hex(t.result.job_id));
  CHECK(m.metadata.at("state_hash") == to_hex(hash));
  CHECK(hash == t.result.final_state_hash);
  CHECK(m.metadata.at("step") == std::to_string(job.steps));

  const auto [header, data] = raw_header(optimizer);
  CHECK(header.at("__metadata__").at("format") == "tribunal-pytorch-optimizer-1");
  CHECK(header.at("__metadata__").at("job_id") == to_hex(t.result.job_id));
  CHECK(header.size() == 1 + form.optimizer.size() + 1);  // metadata, the slots, step
  for (const TorchTensor& slot : form.optimizer) {
    INFO(slot.name);
    REQUIRE(header.contains(slot.name));
    const auto& entry = header.at(slot.name);
    CHECK(entry.at("dtype") == "F32");
    CHECK(entry.at("shape").get<std::vector<int64_t>>() == dims_of(slot.value));
    const auto begin = entry.at("data_offsets")[0].get<size_t>();
    CHECK(std::memcmp(data.data() + begin, slot.value.data(), slot.value.bytes().size()) == 0);
  }
  const auto& step = header.at("step");
  CHECK(step.at("dtype") == "I64");
  CHECK(step.at("shape").empty());
  const auto offsets = step.at("data_offsets").get<std::vector<size_t>>();
  REQUIRE(offsets.at(1) - offsets.at(0) == 8);
  int64_t stored = 0;
  std::memcpy(&stored, data.data() + offsets[0], 8);
  CHECK(stored == job.steps);
}

}  // namespace

TEST_CASE(
    "pytorch export: the MLP as nn.Sequential, Linear weights [out, in], AdamW's exp_avg and exp_avg_sq") {
  const JobSpec job = job_of(job_text("short_mlp.toml"), "short_mlp.toml");  // widths [784, 32, 10]
  TempDir dir("pytorch-mlp");
  const Trained t = train_final(job, dir.path);
  check_export(job, t,
               {{"0.weight", "l0.weight", {32, 784}, true},
                {"0.bias", "l0.bias", {32}, false},
                {"2.weight", "l1.weight", {10, 32}, true},
                {"2.bias", "l1.bias", {10}, false}},
               {{"adamw.m/", "exp_avg"}, {"adamw.v/", "exp_avg_sq"}});
}

TEST_CASE("pytorch export: an SGD job's slot is torch.optim.SGD's momentum_buffer") {
  const JobSpec job =
      job_of(jobtest::replace(job_text("short_mlp.toml"), "kind = \"adamw\"", "kind = \"sgd\""),
             "short_mlp_sgd.toml");
  REQUIRE(job.optimizer.kind == OptimizerKind::Sgd);
  TempDir dir("pytorch-sgd");
  const Trained t = train_final(job, dir.path);
  check_export(job, t,
               {{"0.weight", "l0.weight", {32, 784}, true},
                {"0.bias", "l0.bias", {32}, false},
                {"2.weight", "l1.weight", {10, 32}, true},
                {"2.bias", "l1.bias", {10}, false}},
               {{"sgd.momentum/", "momentum_buffer"}});
}

TEST_CASE("pytorch export: the CNN's convs as stored, fc.weight [classes, features]") {
  const JobSpec job = job_of(job_text("short_cnn.toml"), "short_cnn.toml");  // channels [4, 8], k 3
  TempDir dir("pytorch-cnn");
  const Trained t = train_final(job, dir.path);
  check_export(job, t,
               {{"convs.0.weight", "conv0.weight", {4, 1, 3, 3}, false},
                {"convs.0.bias", "conv0.bias", {4}, false},
                {"convs.1.weight", "conv1.weight", {8, 4, 3, 3}, false},
                {"convs.1.bias", "conv1.bias", {8}, false},
                {"fc.weight", "fc.weight", {10, 8 * 7 * 7}, true},
                {"fc.bias", "fc.bias", {10}, false}},
               {{"adamw.m/", "exp_avg"}, {"adamw.v/", "exp_avg_sq"}});
}

TEST_CASE("pytorch export: the GPT's blocks, embeddings as stored, every Linear weight transposed") {
  const JobSpec job = job_of(job_text("short_gpt.toml"), "short_gpt.toml");  // V 256, T 32, D 32, 2 layers
  TempDir dir("pytorch-gpt");
  const Trained t = train_final(job, dir.path);
  std::vector<Expected> expected = {{"tok_emb.weight", "tok_emb", {256, 32}, false},
                                    {"pos_emb.weight", "pos_emb", {32, 32}, false}};
  for (int l = 0; l < 2; ++l) {
    const auto add = [&](const char* torch, const char* ours, std::vector<int64_t> shape, bool transposed) {
      expected.push_back({fmt::format("blocks.{}.{}", l, torch), fmt::format("h{}.{}", l, ours),
                          std::move(shape), transposed});
    };
    add("ln1.weight", "ln1.weight", {32}, false);
    add("ln1.bias", "ln1.bias", {32}, false);
    for (const char* m : {"q", "k", "v", "proj"}) {
      add(fmt::format("{}.weight", m).c_str(), fmt::format("attn.{}.weight", m).c_str(), {32, 32}, true);
      add(fmt::format("{}.bias", m).c_str(), fmt::format("attn.{}.bias", m).c_str(), {32}, false);
    }
    add("ln2.weight", "ln2.weight", {32}, false);
    add("ln2.bias", "ln2.bias", {32}, false);
    add("fc.weight", "mlp.fc.weight", {128, 32}, true);
    add("fc.bias", "mlp.fc.bias", {128}, false);
    add("mlp_proj.weight", "mlp.proj.weight", {32, 128}, true);
    add("mlp_proj.bias", "mlp.proj.bias", {32}, false);
  }
  expected.push_back({"ln_f.weight", "ln_f.weight", {32}, false});
  expected.push_back({"ln_f.bias", "ln_f.bias", {32}, false});
  expected.push_back({"head.weight", "head.weight", {256, 32}, true});
  expected.push_back({"head.bias", "head.bias", {256}, false});
  check_export(job, t, expected, {{"adamw.m/", "exp_avg"}, {"adamw.v/", "exp_avg_sq"}});
}

TEST_CASE("pytorch export: a state of another layout is refused, naming the tensor") {
  const JobSpec mlp = job_of(job_text("short_mlp.toml"), "short_mlp.toml");
  const JobSpec cnn = job_of(job_text("short_cnn.toml"), "short_cnn.toml");
  CHECK_THROWS_WITH_AS(to_pytorch(mlp, initial_state(cnn)), doctest::Contains("tensors, the job's layout"),
                       EngineError);
  State wrong = initial_state(mlp);
  wrong.tensors[0] = Tensor(Shape{32, 784});  // l0.weight stored [out, in]: not our layout
  CHECK_THROWS_WITH_AS(to_pytorch(mlp, wrong), doctest::Contains("'l0.weight' has shape [32, 784]"),
                       EngineError);
}

// An imported ResNet (tests/fixtures/onnx/resnet.onnx): the model file holds the parameters under the
// file's names, then the BatchNorm running statistics (our state's buffers, bitwise), then each
// BatchNorm's num_batches_tracked as an I64 scalar equal to the steps taken, as torch's state_dict
// has them (load_state_dict(strict=True) takes the file: docs/onnx.md "Parameters and buffers").
TEST_CASE("pytorch export: an imported ResNet's running statistics and num_batches_tracked") {
  DataRegistry registry = DataRegistry::debian();
  registry.add_model("resnet", testing::source_dir() / "tests/fixtures/onnx/resnet.onnx");
  const JobSpec job = load_job(testing::source_dir() / "scenarios/jobs/short_onnx_resnet.toml", registry);
  TempDir dir("pytorch-resnet");
  const Trained t = train_final(job, dir.path);
  const StateLayout layout = state_layout(job);
  REQUIRE(layout.num_buffers == 12);
  const PytorchState form = to_pytorch(job, t.state);
  REQUIRE(form.model.size() == layout.num_params + 12);
  for (size_t k = 0; k < 12; ++k) {
    const TorchTensor& got = form.model[layout.num_params + k];
    CHECK(got.name == layout.names[layout.first_buffer + k]);
    check_values(got.value, t.state.tensors[layout.first_buffer + k], false, got.name);
  }
  CHECK(form.model[layout.num_params].name == "bn1.running_mean");
  CHECK(form.batch_counters ==
        std::vector<std::string>{"bn1.num_batches_tracked", "layer1.bn1.num_batches_tracked",
                                 "layer1.bn2.num_batches_tracked", "layer2.bn1.num_batches_tracked",
                                 "layer2.bn2.num_batches_tracked",
                                 "layer2.downsample.1.num_batches_tracked"});
  ThreadPool pool(1);
  const auto model = dir.path / "model.safetensors", optimizer = dir.path / "optimizer.safetensors";
  write_pytorch(model, optimizer, job, t.state, t.result.job_id, state_hash(t.state, pool));
  const auto [header, data] = raw_header(model);
  const nlohmann::json& counter = header.at("layer2.downsample.1.num_batches_tracked");
  CHECK(counter.at("dtype") == "I64");
  CHECK(counter.at("shape") == nlohmann::json::array());
  const auto begin = counter.at("data_offsets")[0].get<size_t>();
  int64_t steps = 0;
  std::memcpy(&steps, data.data() + begin, 8);
  CHECK(steps == job.steps);
  CHECK(header.at("layer2.downsample.1.running_var").at("dtype") == "F32");
}
