// Job spec parsing: every field read, every bad input rejected with file:line, job_id canonical.
#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "engine/job.h"
#include "tests/engine/job_text.h"

using namespace tribunal;

namespace {

const char* kJob = R"(
[model]
kind = "mlp"
widths = [784, 64, 10]
[data]
dataset = "fashion-mnist"
dir = "data/fm"
[train]
seed = 7
steps = 100
batch_size = 32
stride = 10
[optimizer]
kind = "adamw"
lr = 0.002
beta1 = 0.8
beta2 = 0.99
eps = 1e-6
weight_decay = 0.1
)";

using jobtest::error_of;
using jobtest::replace;

}  // namespace

TEST_CASE("a job file is parsed field by field") {
  const JobSpec job = parse_job(kJob, "job.toml", "/base");
  CHECK(job.model.widths == std::vector<int64_t>{784, 64, 10});
  CHECK(job.data_dir == std::filesystem::path("/base/data/fm"));
  CHECK(job.seed == 7);
  CHECK(job.steps == 100);
  CHECK(job.batch_size == 32);
  CHECK(job.stride == 10);
  CHECK(job.optimizer.kind == OptimizerKind::AdamW);
  CHECK(job.optimizer.lr == 0.002f);
  CHECK(job.optimizer.beta1 == 0.8f);
  CHECK(job.optimizer.beta2 == 0.99f);
  CHECK(job.optimizer.eps == 1e-6f);
  CHECK(job.optimizer.weight_decay == 0.1f);
}

TEST_CASE("bad job files are rejected with the place and the reason") {
  CHECK(error_of("[model\n") .find("job.toml:1:") == 0);
  CHECK(error_of(replace(kJob, "stride = 10", "stride = 10\nstrid = 3")).find("job.toml:13:9: unknown key 'strid' in [train]") == 0);
  CHECK(error_of(replace(kJob, "[train]", "[trian]")).find("unknown table or key 'trian'") != std::string::npos);
  CHECK(error_of(replace(kJob, "steps = 100", "steps = 0")).find("train.steps = 0 is out of range") != std::string::npos);
  CHECK(error_of(replace(kJob, "steps = 100", "steps = \"many\"")).find("train.steps must be an integer") != std::string::npos);
  CHECK(error_of(replace(kJob, "steps = 100\n", "")).find("missing key train.steps") != std::string::npos);
  CHECK(error_of(replace(kJob, "beta2 = 0.99", "beta2 = 1.0")).find("optimizer.beta2 = 1 is out of range") != std::string::npos);
  CHECK(error_of(replace(kJob, "lr = 0.002", "lr = nan")).find("optimizer.lr") != std::string::npos);
  CHECK(error_of(replace(kJob, "kind = \"adamw\"", "kind = \"lion\"")).find("optimizer.kind 'lion'") != std::string::npos);
  CHECK(error_of(replace(kJob, "beta1 = 0.8", "momentum = 0.8")).find("unknown key 'momentum' in [optimizer]") != std::string::npos);
  CHECK(error_of(replace(kJob, "[784, 64, 10]", "[784]")).find("at least an input and an output") != std::string::npos);
  CHECK(error_of(replace(kJob, "[784, 64, 10]", "[784, -3, 10]")).find("out of range") != std::string::npos);
  CHECK(error_of(replace(kJob, "\"mlp\"", "\"rnn\"")).find("model.kind 'rnn' is not supported (supported: mlp, gpt, cnn)") != std::string::npos);
}

TEST_CASE("the job must fit the data set") {
  const JobSpec job = parse_job(kJob, "job.toml", "/base");
  CHECK_NOTHROW(check_job_against_data(job, 60000, 784, 10));
  CHECK_THROWS_WITH_AS(check_job_against_data(job, 60000, 100, 10),
                       "job.toml: model.widths starts with 784 but fashion-mnist samples have 100 features", EngineError);
  CHECK_THROWS_AS(check_job_against_data(job, 60000, 784, 5), EngineError);
  CHECK_THROWS_AS(check_job_against_data(job, 16, 784, 10), EngineError);
}

TEST_CASE("job_id covers every field that shapes the trajectory, and nothing else") {
  const Digest root{};
  const JobSpec base = parse_job(kJob, "job.toml", "/base");
  const Digest id = job_id(base, root);
  // The data directory is a local concern: moving the data does not change the job.
  CHECK(job_id(parse_job(replace(kJob, "data/fm", "/elsewhere"), "other.toml", "/x"), root) == id);
  for (const auto& change : std::vector<std::pair<std::string, std::string>>{
           {"seed = 7", "seed = 8"}, {"steps = 100", "steps = 101"}, {"batch_size = 32", "batch_size = 33"},
           {"stride = 10", "stride = 11"}, {"lr = 0.002", "lr = 0.0020001"}, {"beta1 = 0.8", "beta1 = 0.81"},
           {"beta2 = 0.99", "beta2 = 0.991"}, {"eps = 1e-6", "eps = 1e-7"}, {"weight_decay = 0.1", "weight_decay = 0.0"},
           {"[784, 64, 10]", "[784, 65, 10]"}}) {
    CAPTURE(change.second);
    CHECK(job_id(parse_job(replace(kJob, change.first, change.second), "job.toml", "/base"), root) != id);
  }
  Digest other_root{};
  other_root[0] = 1;
  CHECK(job_id(base, other_root) != id);
}
