// Jobs of an imported model (model.kind = "onnx", docs/onnx.md): the fields read and refused, the model
// file located by name in the node's registry (never a path from the job), its bytes in job_id, and
// the importer's refusal surfaced with the job and the name.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/executor.h"
#include "engine/job.h"
#include "engine/model.h"
#include "engine/state.h"
#include "engine/step.h"
#include "tests/engine/job_text.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using namespace tribunal::jobtest;
using tribunal::testing::TempDir;

namespace {

const char* kOnnx = R"([model]
kind = "onnx"
file = "cnn"
input = "x"
output = "logits"
[data]
dataset = "fashion-mnist"
[train]
seed = 1
steps = 4
batch_size = 8
stride = 2
[optimizer]
kind = "adamw"
lr = 0.001
)";

const std::filesystem::path kCnn = testing::source_dir() / "tests/fixtures/onnx/cnn.onnx";
const DataShape kShape{60000, 784, 10, 0};

JobSpec located(const std::string& text, const std::filesystem::path& model) {
  JobSpec job = parse_job(text, "job.toml");
  DataRegistry r = DataRegistry::debian();
  r.add_model("cnn", model);
  locate_model_files(job, r);
  return job;
}

std::vector<char> read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("an onnx job names its model file, input and output") {
  const JobSpec job = parse_job(kOnnx, "job.toml");
  CHECK(job.model.kind == ModelKind::Onnx);
  CHECK(job.model.file == "cnn");
  CHECK(job.model.input == "x");
  CHECK(job.model.output == "logits");
  CHECK(job.model.classes == 10);
  CHECK(job.model.onnx == nullptr);  // imported only by locate_model_files, from the node's own registry

  CHECK(error_of(replace(kOnnx, "file = \"cnn\"\n", "")) ==
        "job.toml: model.kind = \"onnx\" needs model.file (a registered model file)");
  CHECK(error_of(replace(kOnnx, "file = \"cnn\"", "file = \"../etc/model.onnx\""))
            .find("model.file must name a registered model file") != std::string::npos);
  CHECK(error_of(replace(kOnnx, "file = \"cnn\"", "file = \"cnn\"\ninit = \"pre\"")).find("init") !=
        std::string::npos);
  CHECK(error_of(replace(kOnnx, "file = \"cnn\"", "file = \"cnn\"\nwidths = [784, 10]")).find("widths") !=
        std::string::npos);
  // Token ids: the text data needs the window length, which only text data reads.
  CHECK(
      error_of(replace(kOnnx, "dataset = \"fashion-mnist\"", "dataset = \"text\"")) ==
      "job.toml:2:8: an onnx model on data.dataset = \"text\" needs model.context (the tokens of one window, "
      "the model input's second dimension)");
  CHECK(error_of(replace(kOnnx, "output = \"logits\"", "output = \"logits\"\ncontext = 32")) ==
        "job.toml:6:11: model.context is read only for data.dataset = \"text\" (token ids), not "
        "'fashion-mnist'");
}

TEST_CASE("an onnx job on text reads token ids: byte classes, label sequences of the context") {
  const std::string text = replace(replace(kOnnx, "dataset = \"fashion-mnist\"", "dataset = \"text\""),
                                   "output = \"logits\"", "output = \"logits\"\ncontext = 32");
  const JobSpec job = parse_job(text, "job.toml");
  CHECK(job.model.context == 32);
  CHECK(job.model.classes == 256);  // bytes
  CHECK(job.data_name == "fortunes");
  CHECK(label_width(job) == 32);
  CHECK(label_width(parse_job(kOnnx, "job.toml")) == 0);
  // The windows must be the context's length; the classes the byte vocabulary.
  CHECK_THROWS_WITH_AS(check_job_against_data(job, 100, 64, 256),
                       "job.toml: model.context is 32 but the text windows hold 64 tokens", EngineError);
  CHECK_NOTHROW(check_job_against_data(job, 100, 32, 256));
  CHECK_THROWS_WITH_AS(build_step_graph(job, DataShape{100, 32, 256, 0}, 0, std::vector<int64_t>{0, 1}),
                       doctest::Contains("needs label sequences (label_width 32)"), EngineError);
}

TEST_CASE("an onnx language model's vocabulary may be wider than the byte classes") {
  // GPT-2's 50257 tokens (bench/bench_onnx_gpt2.py): byte ids are token ids of any vocabulary of at
  // least 256, so the next-byte loss reads logits [B, T, V] with V > 256. The fixture: V = 512,
  // context 8, GPT-2's initialization (std 0.02), so the first loss is about ln 512, not ln 256.
  std::string text = replace(replace(kOnnx, "dataset = \"fashion-mnist\"", "dataset = \"text\""),
                             "output = \"logits\"", "output = \"logits\"\ncontext = 8");
  text = replace(replace(text, "file = \"cnn\"", "file = \"wide\""), "input = \"x\"", "input = \"ids\"");
  JobSpec job = parse_job(text, "job.toml");
  DataRegistry r = DataRegistry::debian();
  r.add_model("wide", testing::source_dir() / "tests/fixtures/onnx/gpt2_vocab512.onnx");
  locate_model_files(job, r);
  CHECK(job.model.classes == 256);  // the data's classes: the byte values the labels take
  CHECK_NOTHROW(check_job_against_data(job, 64, 8, 256));

  const DataShape shape{64, 8, 256, 8};
  const StepGraph g = build_step_graph(job, shape, 0, std::vector<int64_t>{3, 7, 11, 60});
  const auto flat =
      std::find_if(g.values.begin(), g.values.end(), [](const Value& v) { return v.name == "logits.flat"; });
  REQUIRE(flat != g.values.end());
  CHECK(flat->shape == Shape{32, 512});
  Tensor x(Shape{64, 8}), y(Shape{64, 8});
  for (int64_t i = 0; i < 64 * 8; ++i) {  // windows of bytes, each label the next byte
    x[i] = static_cast<float>((i * 37 + 5) % 256);
    y[i] = static_cast<float>(((i + 1) * 37 + 5) % 256);
  }
  ThreadPool pool(1);
  Executor exec(pool);
  State s0 = initial_state(job);
  const Tensor* data[] = {&x, &y};
  exec.run(g, s0.pointers(), data);
  const float loss = exec.value(g.loss)[0];
  CHECK(std::abs(loss - std::log(512.0f)) < 0.05f);
}

TEST_CASE("an onnx job's model is located by name, imported, and its bytes are in job_id") {
  TempDir dir("onnxjob");
  const JobSpec job = located(kOnnx, kCnn);
  REQUIRE(job.model.onnx);
  const std::vector<ParamSpec> params = model_params(job.model);
  REQUIRE(params.size() == 6);  // the torch module's state_dict, in the file's order and layouts
  CHECK(params[0].name == "conv1.weight");
  CHECK(params[0].shape == Shape{8, 1, 3, 3});
  CHECK(params[4].name == "fc.weight");
  CHECK(params[4].shape == Shape{10, 784});  // nn.Linear's [out, in], read by linear with trans_b
  CHECK(job_footprint(job).parameters == 9098);
  const State s0 = initial_state(job);  // state 0 holds the file's initializers
  CHECK(s0.tensors[4][0] == job.model.onnx->initializers().at("fc.weight").floats[0]);

  // The same bytes under another path and name: the same id (the name is the node's, not the job's).
  const auto copy = dir.path / "renamed.onnx";
  std::filesystem::copy_file(kCnn, copy);
  CHECK(job_id(located(kOnnx, copy), Digest{}, kShape) == job_id(job, Digest{}, kShape));
  // One byte of one weight changed: another job.
  std::vector<char> bytes = read(kCnn);
  const std::vector<char> pattern = [&] {
    const float w = job.model.onnx->initializers().at("fc.bias").floats[0];
    std::vector<char> p(4);
    std::memcpy(p.data(), &w, 4);
    return p;
  }();
  const auto at = std::search(bytes.begin(), bytes.end(), pattern.begin(), pattern.end());
  REQUIRE(at != bytes.end());
  *at ^= 1;
  const auto changed = dir.path / "changed.onnx";
  std::ofstream(changed, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const JobSpec other = located(kOnnx, changed);
  CHECK(job_id(other, Digest{}, kShape) != job_id(job, Digest{}, kShape));
  // The process reuses an import for the very same bytes (the renamed copy's too), never for others.
  CHECK(located(kOnnx, copy).model.onnx == job.model.onnx);
  CHECK(other.model.onnx != job.model.onnx);
  CHECK(other.model.onnx->initializers().at("fc.bias").floats[0] !=
        job.model.onnx->initializers().at("fc.bias").floats[0]);
  // The input and output names are part of the job too.
  CHECK(job_id(located(replace(kOnnx, "input = \"x\"\n", ""), kCnn), Digest{}, kShape) !=
        job_id(job, Digest{}, kShape));
}

TEST_CASE("an onnx job's model file: unregistered, unreadable or refused by the importer") {
  TempDir dir("onnxbad");
  JobSpec job = parse_job(kOnnx, "job.toml");
  CHECK_THROWS_WITH_AS(locate_model_files(job, DataRegistry::debian()),
                       "job.toml: model file 'cnn' (model.file) is not registered at this node (its operator "
                       "registers model files with --model NAME=PATH)",
                       EngineError);
  CHECK_THROWS_WITH_AS(
      job_id(job, Digest{}, kShape),
      "job.toml: the model file 'cnn' (model.file) has not been located in this node's registry",
      EngineError);
  const auto junk = dir.path / "junk.onnx";
  std::ofstream(junk) << "not a model";
  try {
    located(kOnnx, junk);
    FAIL("a file that is not ONNX was imported");
  } catch (const EngineError& e) {
    CHECK(std::string(e.what()) ==
          "job.toml (model.file 'cnn'): junk.onnx: not an ONNX model: the protobuf message does not parse");
  }
  // A graph output that is not the logits' name.
  const JobSpec wrong = located(replace(kOnnx, "output = \"logits\"", "output = \"probabilities\""), kCnn);
  CHECK_THROWS_WITH_AS(build_step_graph(wrong, kShape, 0, std::vector<int64_t>(8, 0)),
                       "cnn.onnx: 'probabilities' is not a graph output (outputs: logits)", EngineError);
}
