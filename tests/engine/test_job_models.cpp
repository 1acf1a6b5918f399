// Job files of the gpt and cnn models, text data, schedules, clipping and decay scopes: every field
// read, every bad input rejected with file:line:col, the job_id extension, and the learning-rate
// schedule's portable cosine.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/job.h"
#include "engine/schedule.h"
#include "tests/engine/job_text.h"

using namespace tribunal;

namespace {

const char* kGpt = R"([model]
kind = "gpt"
vocab = 256
context = 64
layers = 3
heads = 4
d_model = 96
dropout = 0.1
[data]
dataset = "text"
name = "corpus"
validation = 0.2
[train]
seed = 3
steps = 100
batch_size = 8
stride = 10
[optimizer]
kind = "adamw"
lr = 0.003
weight_decay = 0.1
schedule = "cosine"
warmup_steps = 10
min_lr = 0.0003
clip_norm = 1.0
decay = "matrices"
)";

const char* kCnn = R"([model]
kind = "cnn"
channels = [16, 32]
kernel = 5
[data]
dataset = "fashion-mnist"
[train]
steps = 10
batch_size = 64
stride = 5
[optimizer]
kind = "sgd"
lr = 0.01
)";

const char* kMlp = R"([model]
kind = "mlp"
widths = [784, 64, 10]
[train]
seed = 7
steps = 100
batch_size = 32
stride = 10
[optimizer]
kind = "adamw"
lr = 0.002
weight_decay = 0.1
)";

using jobtest::error_of;
using jobtest::replace;

// The encoding of a job without the extension (model kinds, schedules, clipping, decay scopes),
// written out again from docs/commitments.md: plain MLP jobs must keep it byte for byte.
const DataShape kShape{60000, 784, 10, 0};
std::vector<uint8_t> mlp_only_encoding(const JobSpec& job, const Digest& root) {
  std::vector<uint8_t> out;
  const auto u64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  const auto f32 = [&](float f) {
    const auto bits = std::bit_cast<uint32_t>(f);
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  };
  u64(kRepOpsContractVersion);
  out.push_back(1);  // ModelKind::Mlp
  u64(job.model.widths.size());
  for (int64_t w : job.model.widths) u64(static_cast<uint64_t>(w));
  u64(job.dataset.size());
  out.insert(out.end(), job.dataset.begin(), job.dataset.end());
  out.insert(out.end(), root.begin(), root.end());
  for (int64_t v : {kShape.samples, kShape.features, kShape.classes, kShape.label_width})
    u64(static_cast<uint64_t>(v));
  u64(job.seed);
  u64(static_cast<uint64_t>(job.steps));
  u64(static_cast<uint64_t>(job.batch_size));
  u64(static_cast<uint64_t>(job.stride));
  out.push_back(static_cast<uint8_t>(job.optimizer.kind));
  f32(job.optimizer.lr);
  if (job.optimizer.kind == OptimizerKind::Sgd) {
    f32(job.optimizer.momentum);
  } else {
    f32(job.optimizer.beta1);
    f32(job.optimizer.beta2);
    f32(job.optimizer.eps);
  }
  f32(job.optimizer.weight_decay);
  return out;
}

}  // namespace

TEST_CASE("a gpt job is parsed field by field") {
  const JobSpec job = parse_job(kGpt, "job.toml");
  const ModelSpec& m = job.model;
  CHECK(m.kind == ModelKind::Gpt);
  CHECK(m.widths.empty());
  CHECK(m.vocab == 256);
  CHECK(m.context == 64);
  CHECK(m.layers == 3);
  CHECK(m.heads == 4);
  CHECK(m.d_model == 96);
  CHECK(m.dropout == 0.1f);
  CHECK(job.dataset == "text");
  CHECK(job.data_name == "corpus");
  CHECK(job.validation == 0.2);
  const OptimizerSpec& o = job.optimizer;
  CHECK(o.schedule == LrSchedule::Cosine);
  CHECK(o.warmup_steps == 10);
  CHECK(o.min_lr == 0.0003f);
  CHECK(o.clip_norm == 1.0f);
  CHECK(o.decay == DecayScope::Matrices);

  // Defaults: vocab 256, no dropout, the text data set "fortunes" with 10% held out.
  const std::string minimal =
      "[model]\nkind = \"gpt\"\ncontext = 8\nlayers = 1\nheads = 1\nd_model = 4\n"
      "[train]\nsteps = 1\nbatch_size = 1\nstride = 1\n[optimizer]\n";
  const JobSpec d = parse_job(minimal, "job.toml");
  CHECK(d.model.vocab == 256);
  CHECK(d.model.dropout == 0.0f);
  CHECK(d.dataset == "text");
  CHECK(d.data_name == "fortunes");
  CHECK(d.validation == 0.1);
  CHECK(d.optimizer.schedule == LrSchedule::Constant);
  CHECK(d.optimizer.clip_norm == 0.0f);
  CHECK(d.optimizer.decay == DecayScope::All);
}

TEST_CASE("a cnn job is parsed, with the image shape and classes of its data set") {
  const JobSpec job = parse_job(kCnn, "job.toml");
  CHECK(job.model.kind == ModelKind::Cnn);
  CHECK(job.model.channels == std::vector<int64_t>{16, 32});
  CHECK(job.model.kernel == 5);
  CHECK(job.model.image_channels == 1);
  CHECK(job.model.image_height == 28);
  CHECK(job.model.image_width == 28);
  CHECK(job.model.classes == 10);
  CHECK(job.dataset == "fashion-mnist");
  CHECK(job.data_name == "fashion-mnist");
  CHECK(job.optimizer.kind == OptimizerKind::Sgd);
}

TEST_CASE("bad gpt and cnn job files are rejected with the place and the reason") {
  const auto has = [](const std::string& error, const std::string& part) {
    CAPTURE(error);
    CHECK(error.find(part) != std::string::npos);
  };
  has(error_of(replace(kGpt, "d_model = 96", "d_model = 97")),
      "job.toml:7:11: model.d_model = 97 is not a multiple of model.heads = 4");
  has(error_of(replace(kGpt, "dropout = 0.1", "dropout = 1.0")),
      "job.toml:8:11: model.dropout = 1 is out of range [0, 1)");
  has(error_of(replace(kGpt, "layers = 3\n", "")), "job.toml: missing key model.layers");
  has(error_of(replace(kGpt, "layers = 3", "layers = 3\nwidths = [1, 2]")),
      "job.toml:6:10: unknown key 'widths' in [model]");
  has(error_of(replace(kGpt, "layers = 3", "layers = 3\nkernel = 3")), "unknown key 'kernel' in [model]");
  has(error_of(replace(kGpt, "context = 64", "context = 0")), "model.context = 0 is out of range");
  has(error_of(replace(kGpt, "dataset = \"text\"", "dataset = \"fashion-mnist\"")),
      "job.toml:10:11: a gpt model trains on data.dataset = \"text\"");
  has(error_of(replace(kGpt, "validation = 0.2", "validation = 1.0")),
      "job.toml:12:14: data.validation = 1 must be below 1");
  has(error_of(replace(kGpt, "validation = 0.2", "validation = -0.1")),
      "data.validation = -0.1 is out of range [0, 1]");
  has(error_of(replace(kGpt, "name = \"corpus\"", "path = \"corpus\"")),
      "job.toml:11:8: data.path: a job names its data set");
  has(error_of(replace(kGpt, "dataset = \"text\"", "dataset = \"wikitext\"")),
      "data.dataset 'wikitext' is not supported");
  has(error_of(replace(kCnn, "kernel = 5", "kernel = 4")), "job.toml:4:10: model.kernel = 4 must be odd");
  has(error_of(replace(kCnn, "[16, 32]", "[]")), "model.channels needs at least one conv block");
  has(error_of(replace(kCnn, "[16, 32]", "[16, 0]")), "model.channels entry 0 is out of range");
  has(error_of(replace(kCnn, "[16, 32]", "[8, 16, 32]")),
      "job.toml:3:12: model.channels has 3 blocks, but block 2 would max-pool a 7x7 image");
  has(error_of(replace(kCnn, "kernel = 5\n", "")), "missing key model.kernel");
  has(error_of(replace(kCnn, "kernel = 5", "kernel = 5\ncontext = 3")), "unknown key 'context' in [model]");
  has(error_of(replace(kCnn, "dataset = \"fashion-mnist\"", "dataset = \"text\"")),
      "data.dataset = \"text\" needs model.kind = \"gpt\"");
  // The optimizer's new keys.
  has(error_of(replace(kGpt, "schedule = \"cosine\"", "schedule = \"linear\"")),
      "job.toml:22:12: optimizer.schedule 'linear' is not supported (supported: constant, cosine)");
  has(error_of(replace(kGpt, "schedule = \"cosine\"", "schedule = \"constant\"")),
      "job.toml:24:10: unknown key 'min_lr' in [optimizer] (only with schedule = \"cosine\")");
  has(error_of(replace(kGpt, "warmup_steps = 10", "warmup_steps = 101")),
      "optimizer.warmup_steps = 101 is out of range [0, 100]");
  has(error_of(replace(kGpt, "min_lr = 0.0003", "min_lr = 0.01")),
      "optimizer.min_lr = 0.01 exceeds optimizer.lr = 0.003");
  has(error_of(replace(kGpt, "clip_norm = 1.0", "clip_norm = -1.0")),
      "optimizer.clip_norm = -1 is out of range");
  has(error_of(replace(kGpt, "decay = \"matrices\"", "decay = \"weights\"")),
      "job.toml:26:9: optimizer.decay 'weights' is not supported (supported: all, matrices)");
  has(error_of(replace(kMlp, "weight_decay = 0.1", "weight_decay = 0.1\nmomentum = 0.9")),
      "unknown key 'momentum' in [optimizer]");
}

TEST_CASE("gpt and cnn jobs are checked against their data sets") {
  const JobSpec gpt = parse_job(kGpt, "job.toml");
  CHECK_NOTHROW(check_job_against_data(gpt, 1000, 64, 256));
  CHECK_THROWS_WITH_AS(check_job_against_data(gpt, 1000, 32, 256),
                       "job.toml: model.context is 64 but the text windows hold 32 tokens", EngineError);
  CHECK_THROWS_WITH_AS(check_job_against_data(gpt, 1000, 64, 128),
                       "job.toml: model.vocab is 256 but text has 128 symbols", EngineError);
  CHECK_THROWS_AS(check_job_against_data(gpt, 7, 64, 256), EngineError);  // batch 8 > 7 windows
  const JobSpec cnn = parse_job(kCnn, "job.toml");
  CHECK_NOTHROW(check_job_against_data(cnn, 60000, 784, 10));
  CHECK_THROWS_WITH_AS(
      check_job_against_data(cnn, 60000, 100, 10),
      "job.toml: the cnn reads 1x28x28 images (784 values) but fashion-mnist samples have 100 features",
      EngineError);
  CHECK_THROWS_AS(check_job_against_data(cnn, 60000, 784, 5), EngineError);
}

TEST_CASE("an MLP job without the new options encodes exactly as before them") {
  Digest root{};
  root[3] = 7;
  for (const char* text : {kMlp}) {
    const JobSpec job = parse_job(text, "job.toml");
    CHECK(canonical_job_encoding(job, root, kShape) == mlp_only_encoding(job, root));
    // Spelling out the defaults changes nothing.
    const JobSpec spelled = parse_job(replace(text, "weight_decay = 0.1",
                                              "weight_decay = 0.1\nschedule = \"constant\"\n"
                                              "clip_norm = 0\ndecay = \"all\""),
                                      "job.toml");
    CHECK(job_id(spelled, root, kShape) == job_id(job, root, kShape));
  }
  JobSpec sgd = parse_job(replace(kMlp, "kind = \"adamw\"", "kind = \"sgd\""), "job.toml");
  CHECK(canonical_job_encoding(sgd, root, kShape) == mlp_only_encoding(sgd, root));
  // Any new option appends the extension.
  for (const auto& change :
       std::vector<std::string>{"schedule = \"cosine\"", "clip_norm = 0.5", "decay = \"matrices\""}) {
    CAPTURE(change);
    const JobSpec other =
        parse_job(replace(kMlp, "weight_decay = 0.1", "weight_decay = 0.1\n" + change), "job.toml");
    CHECK(canonical_job_encoding(other, root, kShape).size() > mlp_only_encoding(other, root).size());
    CHECK(job_id(other, root, kShape) != job_id(parse_job(kMlp, "job.toml"), root, kShape));
  }
}

TEST_CASE("job_id covers every gpt and cnn field, and not the data set's local name") {
  const Digest root{};
  const DataShape text{1000, 64, 256, 64};
  const Digest id = job_id(parse_job(kGpt, "job.toml"), root, text);
  CHECK(job_id(parse_job(replace(kGpt, "name = \"corpus\"", "name = \"books\""), "job.toml"), root, text) ==
        id);
  for (const auto& change : std::vector<std::pair<std::string, std::string>>{
           {"context = 64", "context = 65"},
           {"layers = 3", "layers = 2"},
           {"heads = 4", "heads = 2"},
           {"d_model = 96", "d_model = 64"},
           {"dropout = 0.1", "dropout = 0.2"},
           {"vocab = 256", "vocab = 255"},
           {"validation = 0.2", "validation = 0.3"},
           {"warmup_steps = 10", "warmup_steps = 11"},
           {"min_lr = 0.0003", "min_lr = 0.0004"},
           {"clip_norm = 1.0", "clip_norm = 2.0"},
           {"decay = \"matrices\"", "decay = \"all\""},
           {"schedule = \"cosine\"\nwarmup_steps = 10\nmin_lr = 0.0003", "schedule = \"constant\""},
           {"lr = 0.003", "lr = 0.002"}}) {
    CAPTURE(change.second);
    CHECK(job_id(parse_job(replace(kGpt, change.first, change.second), "job.toml"), root, text) != id);
  }
  const Digest cnn_id = job_id(parse_job(kCnn, "job.toml"), root, kShape);
  CHECK(job_id(parse_job(replace(kCnn, "[16, 32]", "[16, 33]"), "job.toml"), root, kShape) != cnn_id);
  CHECK(job_id(parse_job(replace(kCnn, "[16, 32]", "[16]"), "job.toml"), root, kShape) != cnn_id);
  CHECK(job_id(parse_job(replace(kCnn, "kernel = 5", "kernel = 3"), "job.toml"), root, kShape) != cnn_id);
  CHECK(job_id(parse_job(
                   replace(kCnn, "dataset = \"fashion-mnist\"", "dataset = \"fashion-mnist\"\nname = \"fm\""),
                   "job.toml"),
               root, kShape) == cnn_id);
}

TEST_CASE("portable_cospi agrees with cos(πx) and is exact at the ends") {
  CHECK(portable_cospi(0.0) == 1.0);
  CHECK(portable_cospi(1.0) == -1.0);
  CHECK(std::abs(portable_cospi(0.5)) < 1e-16);
  CHECK(portable_cospi(-3.0) == 1.0);  // clamped
  CHECK(portable_cospi(7.0) == -1.0);
  double worst = 0;
  for (int i = 0; i <= 100000; ++i) {
    const double x = i / 100000.0;
    worst = std::max(worst, std::abs(portable_cospi(x) - std::cos(3.14159265358979323846 * x)));
  }
  CHECK(worst < 1e-15);
  // Golden bits: the polynomial is part of the contract (the referee rebuilds the rates).
  CHECK(std::bit_cast<uint64_t>(portable_cospi(0.3)) == std::bit_cast<uint64_t>(0.5877852522924731));
}

TEST_CASE("learning_rate: constant, linear warmup, cosine to min_lr") {
  JobSpec job = parse_job(kGpt, "job.toml");  // lr 0.003, warmup 10, min 0.0003, 100 steps
  CHECK(learning_rate(job, 0) == static_cast<float>(0.003f * 1.0 / 10.0));
  CHECK(learning_rate(job, 4) == static_cast<float>(static_cast<double>(0.003f) * 5.0 / 10.0));
  CHECK(learning_rate(job, 9) == 0.003f);
  CHECK(learning_rate(job, 10) == 0.003f);     // cos(0) = 1
  const double lr = 0.003f, min_lr = 0.0003f;  // progress (55 − 10)/90 = 1/2 exactly
  CHECK(learning_rate(job, 55) ==
        static_cast<float>(min_lr + 0.5 * (lr - min_lr) * (1.0 + portable_cospi(0.5))));
  CHECK(learning_rate(job, 55) == doctest::Approx(0.00165).epsilon(1e-6));
  float previous = 1;
  for (int64_t t = 10; t < 100; ++t) {
    const float lr = learning_rate(job, t);
    CHECK(lr <= previous);
    CHECK(lr >= 0.0003f);
    previous = lr;
  }
  CHECK(learning_rate(job, 99) > 0.0003f);
  CHECK(learning_rate(job, 100) == 0.0003f);  // past the job's steps: min_lr
  CHECK(learning_rate(job, 1000) == 0.0003f);
  job.optimizer.warmup_steps = 0;
  CHECK(learning_rate(job, 0) == 0.003f);
  job.optimizer.schedule = LrSchedule::Constant;
  for (int64_t t : {0, 5, 99, 500}) CHECK(learning_rate(job, t) == 0.003f);
}
