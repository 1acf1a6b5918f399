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
name = "fm-local"
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
  const JobSpec job = parse_job(kJob, "job.toml");
  CHECK(job.model.widths == std::vector<int64_t>{784, 64, 10});
  CHECK(job.data_name == "fm-local");
  CHECK(job.data_path.empty());  // only locate_data, from the node's own registry, sets it
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
  CHECK(error_of("[model\n").find("job.toml:1:") == 0);
  CHECK(error_of(replace(kJob, "stride = 10", "stride = 10\nstrid = 3"))
            .find("job.toml:13:9: unknown key 'strid' in [train]") == 0);
  CHECK(error_of(replace(kJob, "[train]", "[trian]")).find("unknown table or key 'trian'") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "steps = 100", "steps = 0")).find("train.steps = 0 is out of range") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "steps = 100", "steps = \"many\"")).find("train.steps must be an integer") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "steps = 100\n", "")).find("missing key train.steps") != std::string::npos);
  CHECK(error_of(replace(kJob, "beta2 = 0.99", "beta2 = 1.0")).find("optimizer.beta2 = 1 is out of range") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "lr = 0.002", "lr = nan")).find("optimizer.lr") != std::string::npos);
  CHECK(error_of(replace(kJob, "kind = \"adamw\"", "kind = \"lion\"")).find("optimizer.kind 'lion'") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "beta1 = 0.8", "momentum = 0.8"))
            .find("unknown key 'momentum' in [optimizer]") != std::string::npos);
  CHECK(error_of(replace(kJob, "[784, 64, 10]", "[784]")).find("at least an input and an output") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "[784, 64, 10]", "[784, -3, 10]")).find("out of range") != std::string::npos);
  CHECK(error_of(replace(kJob, "\"mlp\"", "\"rnn\""))
            .find("model.kind 'rnn' is not supported (supported: mlp, gpt, cnn, onnx)") != std::string::npos);
}

TEST_CASE("the job must fit the data set") {
  const JobSpec job = parse_job(kJob, "job.toml");
  CHECK_NOTHROW(check_job_against_data(job, 60000, 784, 10));
  CHECK_THROWS_WITH_AS(check_job_against_data(job, 60000, 100, 10),
                       "job.toml: model.widths starts with 784 but fashion-mnist samples have 100 features",
                       EngineError);
  CHECK_THROWS_AS(check_job_against_data(job, 60000, 784, 5), EngineError);
  CHECK_THROWS_AS(check_job_against_data(job, 16, 784, 10), EngineError);
}

TEST_CASE("job_id covers every field that shapes the trajectory, and nothing else") {
  const Digest root{};
  const DataShape shape{60000, 784, 10, 0};
  const JobSpec base = parse_job(kJob, "job.toml");
  const Digest id = job_id(base, root, shape);
  // The data set's local name is each node's concern: another name for the same data is the same job.
  CHECK(job_id(parse_job(replace(kJob, "fm-local", "fashion"), "other.toml"), root, shape) == id);
  for (const auto& change :
       std::vector<std::pair<std::string, std::string>>{{"seed = 7", "seed = 8"},
                                                        {"steps = 100", "steps = 101"},
                                                        {"batch_size = 32", "batch_size = 33"},
                                                        {"stride = 10", "stride = 11"},
                                                        {"lr = 0.002", "lr = 0.0020001"},
                                                        {"beta1 = 0.8", "beta1 = 0.81"},
                                                        {"beta2 = 0.99", "beta2 = 0.991"},
                                                        {"eps = 1e-6", "eps = 1e-7"},
                                                        {"weight_decay = 0.1", "weight_decay = 0.0"},
                                                        {"[784, 64, 10]", "[784, 65, 10]"}}) {
    CAPTURE(change.second);
    CHECK(job_id(parse_job(replace(kJob, change.first, change.second), "job.toml"), root, shape) != id);
  }
  Digest other_root{};
  other_root[0] = 1;
  CHECK(job_id(base, other_root, shape) != id);
  // The data set's shape is signed with the job: the referee derives every batch from the sample count.
  for (const DataShape& other : {DataShape{59999, 784, 10, 0}, DataShape{60000, 783, 10, 0},
                                 DataShape{60000, 784, 11, 0}, DataShape{60000, 784, 10, 1}})
    CHECK(job_id(base, root, other) != id);
}

TEST_CASE("a job names its data set, never a path, and a node's registry locates it") {
  // A peer's job cannot point a node at a file (the provider's key, /etc/…): paths are refused.
  CHECK(error_of(replace(kJob, "name = \"fm-local\"", "dir = \"/root\""))
            .find("job.toml:7:7: data.dir: a job names its data set (data.name), never a path") == 0);
  CHECK(error_of(replace(kJob, "name = \"fm-local\"", "path = \"provider.key\""))
            .find("data.path: a job names its data set") != std::string::npos);
  CHECK(error_of(replace(kJob, "fm-local", "../../etc")).find("data.name must be 1 to 64 characters") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "fm-local", "")).find("data.name must be 1 to 64 characters") !=
        std::string::npos);

  JobSpec job = parse_job(kJob, "job.toml");
  DataRegistry registry = DataRegistry::debian();
  CHECK_THROWS_WITH_AS(
      locate_data(job, registry),
      "job.toml: data set 'fm-local' is not registered at this node (its operator registers data sets "
      "with --dataset NAME=PATH)",
      EngineError);
  registry.add(std::string_view("fm-local=/srv/data/fm"));
  locate_data(job, registry);
  CHECK(job.data_path == std::filesystem::path("/srv/data/fm"));
  CHECK(registry.names() == std::vector<std::string>{"fashion-mnist", "fm-local", "fortunes"});
  CHECK_THROWS_WITH_AS(registry.add(std::string_view("no-equals")),
                       "--dataset expects NAME=PATH, got 'no-equals'", EngineError);
  CHECK_THROWS_AS(registry.add(std::string_view("Bad/Name=/x")), EngineError);
  // The defaults: Debian's packages.
  JobSpec defaults = parse_job(replace(kJob, "name = \"fm-local\"\n", ""), "job.toml");
  CHECK(defaults.data_name == "fashion-mnist");
  locate_data(defaults, DataRegistry::debian());
  CHECK(defaults.data_path == std::filesystem::path("/usr/share/datasets/fashion-mnist"));
}
