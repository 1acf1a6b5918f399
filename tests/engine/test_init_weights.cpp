// Pretrained initial weights (model.init, engine/init_weights.h): a job started from the final
// weights of a trained run has them as state 0, its id binds the file's bytes, and a node without the
// file, or with a wrong one, refuses the job naming what is wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "engine/data_registry.h"
#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/init_weights.h"
#include "engine/model.h"
#include "engine/pytorch_export.h"
#include "engine/safetensors.h"
#include "engine/state.h"
#include "tests/engine/engine_helpers.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using tribunal::testing::TempDir;

namespace {

JobSpec short_mlp() {
  return load_job(testing::source_dir() / "scenarios/jobs/short_mlp.toml");
}

// The parameters of the final checkpoint of `run` (a directory run_training wrote) as a weights file.
void write_final_weights(const JobSpec& job, const TrainResult& run, const std::filesystem::path& run_dir,
                         const std::filesystem::path& file) {
  ThreadPool pool(2);
  const State final_state = load_checkpoint(checkpoint_path(run_dir, run.steps), job, run.job_id, pool);
  const std::vector<ParamSpec> params = model_params(job.model);
  std::vector<NamedTensor> named;
  for (size_t p = 0; p < params.size(); ++p) named.push_back({params[p].name, &final_state.tensors[p]});
  write_safetensors(file, named, {{"note", "the short MLP's final weights"}});
}

// The short MLP started from the weights registered as "pre" at `file`.
JobSpec fine_tune(const std::filesystem::path& file) {
  JobSpec job = short_mlp();
  job.model.init = "pre";
  DataRegistry registry = DataRegistry::debian();
  registry.add_weights("pre", file);
  locate_data(job, registry);
  return job;
}

std::string error_of_initial_state(const JobSpec& job) {
  try {
    initial_state(job);
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("model.init parses, and a job without it keeps its id") {
  const std::string text = testing::read_text(testing::source_dir() / "scenarios/jobs/short_mlp.toml");
  std::string with_init = text;
  with_init.replace(with_init.find("kind = \"mlp\""), 12, "kind = \"mlp\"\ninit = \"pre\"");
  const JobSpec job = parse_job(with_init, "ft.toml");
  CHECK(job.model.init == "pre");
  CHECK(parse_job(text, "short.toml").model.init.empty());
  std::string bad = with_init;
  bad.replace(bad.find("\"pre\""), 5, "\"../x\"");
  CHECK_THROWS_WITH_AS(parse_job(bad, "ft.toml"),
                       doctest::Contains("model.init must name registered weights"), EngineError);
  // Its id needs the weights located, and a job without model.init has the id it always had.
  CHECK_THROWS_WITH_AS(job_id(job, Digest{}, DataShape{60000, 784, 10, 0}),
                       doctest::Contains("the weights 'pre' (model.init) have not been located"),
                       EngineError);
  const JobSpec plain = short_mlp();
  CHECK(canonical_job_encoding(plain, Digest{}, DataShape{60000, 784, 10, 0}) ==
        canonical_job_encoding(parse_job(text, "x"), Digest{}, DataShape{60000, 784, 10, 0}));
}

TEST_CASE("a job started from a trained run's final weights has them as state 0") {
  TempDir dir("init");
  const JobSpec base = short_mlp();
  const TrainResult first = testing::train(base, 2, dir.path / "run");
  const auto file = dir.path / "weights.safetensors";
  write_final_weights(base, first, dir.path / "run", file);

  const JobSpec job = fine_tune(file);
  CHECK(job.init_path == std::filesystem::absolute(file));
  ThreadPool pool(2);
  const State s0 = initial_state(job);
  const State trained =
      load_checkpoint(checkpoint_path(dir.path / "run", first.steps), base, first.job_id, pool);
  const size_t params = model_params(job.model).size();
  for (size_t p = 0; p < params; ++p) {
    CAPTURE(p);
    CHECK(s0.tensors[p].shape() == trained.tensors[p].shape());
    CHECK(std::memcmp(s0.tensors[p].data(), trained.tensors[p].data(), trained.tensors[p].bytes().size()) ==
          0);
  }
  for (size_t i = params; i < s0.tensors.size(); ++i)  // optimizer slots, step and loss start at zero
    for (int64_t k = 0; k < s0.tensors[i].numel(); ++k) CHECK(s0.tensors[i][k] == 0.0f);

  // Training it: its step-0 checkpoint is those weights, and it starts where the first run ended
  // (a lower loss than the first run's start).
  const TrainResult ft = testing::train(job, 2, dir.path / "ft");
  CHECK(ft.checkpoint_hashes.front() == state_hash(s0, pool));
  const State ft0 = load_checkpoint(checkpoint_path(dir.path / "ft", 0), job, ft.job_id, pool);
  CHECK(std::memcmp(ft0.tensors[0].data(), trained.tensors[0].data(), trained.tensors[0].bytes().size()) ==
        0);
  CHECK(ft.trajectory_root != first.trajectory_root);

  // The id: another than without init, and another again when one byte of the file changes.
  CHECK(ft.job_id != first.job_id);
  const Dataset& data = load_dataset(job, Split::Train, pool);
  CHECK(job_id(job, data) == ft.job_id);
  std::string bytes = testing::read_text(file);
  bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 1);  // the last weight's low bit
  const auto changed = dir.path / "changed.safetensors";
  testing::write_text(changed, bytes);
  CHECK(job_id(fine_tune(changed), data) != ft.job_id);
  // A file that changes after the job was located is refused rather than trained from.
  testing::write_text(file, bytes);
  CHECK(error_of_initial_state(job).find("the file changed since the job was located") != std::string::npos);
}

TEST_CASE("model.init in the PyTorch form (tribunal export, a delegate's model.safetensors) loads the same") {
  TempDir dir("init-torch");
  const JobSpec base = short_mlp();
  const TrainResult first = testing::train(base, 2, dir.path / "run");
  ThreadPool pool(2);
  const State trained =
      load_checkpoint(checkpoint_path(dir.path / "run", first.steps), base, first.job_id, pool);
  // The model file `tribunal export` writes: "0.weight" [32, 784], "0.bias", "2.weight" [10, 32], "2.bias".
  const auto model = dir.path / "model.safetensors", optimizer = dir.path / "optimizer.safetensors";
  write_pytorch(model, optimizer, base, trained, first.job_id, Digest{});
  const JobSpec job = fine_tune(model);
  const State s0 = initial_state(job);
  const size_t params = model_params(job.model).size();
  REQUIRE(params == 4);
  for (size_t p = 0; p < params; ++p) {
    CAPTURE(p);
    REQUIRE(s0.tensors[p].shape() == trained.tensors[p].shape());  // back in [in, out]
    CHECK(std::memcmp(s0.tensors[p].data(), trained.tensors[p].data(), trained.tensors[p].bytes().size()) ==
          0);
  }
  // A torch-form file with one weight left in the internal layout is refused, naming it.
  const PytorchState form = to_pytorch(base, trained);
  std::vector<NamedTensor> named;
  for (const TorchTensor& t : form.model)
    named.push_back({t.name, t.name == "2.weight" ? &trained.tensors[2] : &t.value});
  const auto mixed = dir.path / "mixed.safetensors";
  write_safetensors(mixed, named, {});
  CHECK(error_of_initial_state(fine_tune(mixed)) ==
        mixed.string() +
            ": weights 'pre' (model.init): tensor \"2.weight\" has shape [32, 10], the model's parameter "
            "has [10, 32] (PyTorch layout, docs/parity.md \"Exported weights\")");
}

TEST_CASE("a node without the weights, or with a wrong file, refuses the job naming what is wrong") {
  TempDir dir("initbad");
  JobSpec job = short_mlp();
  job.model.init = "pretrained-v1";
  DataRegistry without = DataRegistry::debian();
  const std::string expected = job.source +
                               ": weights 'pretrained-v1' (model.init) are not registered at this node (its "
                               "operator registers weights with --weights NAME=PATH)";
  CHECK_THROWS_WITH_AS(locate_data(job, without), expected.c_str(), EngineError);
  DataRegistry missing = DataRegistry::debian();
  missing.add_weights("pretrained-v1", dir.path / "nowhere.safetensors");
  CHECK_THROWS_WITH_AS(locate_data(job, missing),
                       doctest::Contains("nowhere.safetensors: cannot open weights file"), EngineError);

  // Files that do not fit the model: each refused naming the file and the tensor.
  const std::vector<ParamSpec> params = model_params(job.model);
  std::vector<Tensor> good;
  for (size_t p = 0; p < params.size(); ++p) {
    good.emplace_back(params[p].shape);
    init_param(3, static_cast<uint32_t>(p), params[p], good.back());
  }
  const auto error_with = [&](const std::vector<std::pair<std::string, const Tensor*>>& tensors) {
    std::vector<NamedTensor> named;
    for (const auto& [name, t] : tensors) named.push_back({name, t});
    const auto file = dir.path / "w.safetensors";
    write_safetensors(file, named, {});
    DataRegistry r = DataRegistry::debian();
    r.add_weights("pretrained-v1", file);
    JobSpec j = job;
    locate_data(j, r);
    return error_of_initial_state(j);
  };
  const std::string file = (dir.path / "w.safetensors").string();
  const std::string prefix = file + ": weights 'pretrained-v1' (model.init): ";
  // All four parameters (l0.weight [784, 32], l0.bias [32], l1.weight [32, 10], l1.bias [10]): loads.
  REQUIRE(params.size() == 4);
  CHECK(error_with(
            {{"l1.bias", &good[3]}, {"l0.weight", &good[0]}, {"l0.bias", &good[1]}, {"l1.weight", &good[2]}})
            .empty());
  CHECK(error_with({{"l0.weight", &good[0]}, {"l0.bias", &good[1]}, {"l1.weight", &good[2]}}) ==
        prefix + "no tensor \"l1.bias\" (the model's parameter, shape [10])");
  CHECK(error_with({{"l0.weight", &good[0]},
                    {"l0.bias", &good[1]},
                    {"l1.weight", &good[2]},
                    {"l1.bias", &good[3]},
                    {"l2.weight", &good[3]}}) ==
        prefix + "tensor \"l2.weight\" is not a parameter of the model (1 tensors too many)");
  // A PyTorch-layout Linear weight [out, in] is not the internal [in, out].
  Tensor transposed(Shape{32, 784});
  CHECK(error_with({{"l0.weight", &transposed},
                    {"l0.bias", &good[1]},
                    {"l1.weight", &good[2]},
                    {"l1.bias", &good[3]}}) == prefix +
                                                   "tensor \"l0.weight\" has shape [32, 784], the model's "
                                                   "parameter has [784, 32] (engine/model.h layout)");
  Tensor nan = good[2];
  nan[17] = std::numeric_limits<float>::quiet_NaN();
  CHECK(error_with(
            {{"l0.weight", &good[0]}, {"l0.bias", &good[1]}, {"l1.weight", &nan}, {"l1.bias", &good[3]}}) ==
        prefix + "tensor \"l1.weight\" element 17 is nan");
  // Another dtype than F32: the safetensors reader names the file and the tensor.
  std::string bytes = testing::read_text(file);
  const size_t at = bytes.find("\"F32\"");
  REQUIRE(at != std::string::npos);
  bytes.replace(at, 5, "\"F16\"");
  testing::write_text(file, bytes);
  DataRegistry r = DataRegistry::debian();
  r.add_weights("pretrained-v1", file);
  JobSpec j = job;
  locate_data(j, r);
  CHECK(error_of_initial_state(j).find("dtype \"F16\" is not supported (only F32)") != std::string::npos);
}
