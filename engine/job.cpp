#include "engine/job.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/model_cache.h"
#include "engine/suggest.h"
#include "engine/toml_reader.h"
#include "onnx/lower.h"
#include "ops/rounding_log.h"
#include "protocol/codec_stream.h"

namespace tribunal {
namespace {

// [numerics]: mode = "repops" | "rounding-log" | "fast"; rounding-log also takes tau, either one number for
// every op kind or a table of op names (ops/registry.h) with an optional `default` for the others, and
// quantum_bits (ops/float64/float64.h rounding_quanta).
NumericsSpec parse_numerics(const toml::table& root, const std::string& source) {
  NumericsSpec spec;
  TableReader numerics(root, "numerics", source, false);
  const std::string mode = numerics.string("mode", "repops");
  if (mode == "repops") {
    numerics.allow_only({"mode"});
    return spec;
  }
  if (mode == "fast") {
    numerics.allow_only({"mode"});
    spec.mode = NumericsMode::Fast;
    return spec;
  }
  if (mode != "rounding-log")
    throw EngineError(
        fmt::format("{}: numerics.mode '{}' is not supported (supported: repops, rounding-log, fast)",
                    numerics.location("mode"), mode));
  numerics.allow_only({"mode", "tau", "quantum_bits", "trainer"});
  spec.mode = NumericsMode::RoundingLog;
  spec.trainer = numerics.string("trainer", "");
  if (spec.trainer.size() > 1024)
    throw EngineError(fmt::format("{}: numerics.trainer is longer than an endpoint (1024 bytes)",
                                  numerics.location("trainer")));
  spec.quantum_bits = static_cast<int>(numerics.integer("quantum_bits", kDefaultRoundingQuantumBits, false,
                                                        kMinRoundingQuantumBits, kMaxRoundingQuantumBits));
  const toml::node* tau = numerics.table()->get("tau");
  if (!tau) return spec;
  if (tau->is_number()) {
    spec.tau.fill(numerics.real("tau", 0.0, 0.0, kMaxRoundingTau));
    return spec;
  }
  if (!tau->is_table())
    throw EngineError(fmt::format("{}: numerics.tau must be a number or a table of op names",
                                  toml_where(source, tau->source())));
  TableReader per_op(tau->as_table(), "numerics.tau", source);
  const auto read = [&](const char* key, double fallback) {
    return per_op.real(key, fallback, 0.0, kMaxRoundingTau);
  };
  if (per_op.table()->get("default")) spec.tau.fill(read("default", 0.0));
  for (auto&& [key, value] : *per_op.table()) {
    if (key.str() == "default") continue;
    size_t k = 0;
    while (k < kOpKindCount && key.str() != op_info(static_cast<OpKind>(k)).name) ++k;
    if (k == kOpKindCount)
      throw EngineError(
          fmt::format("{}: numerics.tau: '{}' is not an op name (ops/registry.h, e.g. matmul, linear)",
                      toml_where(source, value.source()), key.str()));
    const std::string name(key.str());
    spec.tau[k] = read(name.c_str(), 0.0);
  }
  return spec;
}

// A registered name: 1 to 64 characters of [a-z0-9._-] (engine/data_registry.h).
bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 &&
         name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
}

}  // namespace

JobSpec parse_job(std::string_view toml_text, const std::string& source) {
  const toml::table root = parse_toml(toml_text, source);
  const std::vector<std::string_view> tables = {"model", "data", "train", "optimizer", "dispute", "numerics"};
  for (auto&& [key, value] : root)
    if (std::find(tables.begin(), tables.end(), key.str()) == tables.end()) {
      const std::string guess = closest_name(key.str(), tables);
      throw EngineError(fmt::format(
          "{}: unknown table or key '{}' ({}expected [model], [data], [train], [optimizer], [dispute], "
          "[numerics])",
          toml_where(source, value.source()), key.str(),
          guess.empty() ? std::string() : "did you mean [" + guess + "]? "));
    }

  JobSpec job;
  job.source = source;
  ModelSpec& m = job.model;
  TableReader model(root, "model", source, true);
  const std::string kind = model.string("kind", "mlp");
  if (kind == "mlp") {
    model.allow_only({"kind", "widths", "init", "loss"});
    m.kind = ModelKind::Mlp;
    m.widths = model.integers("widths", m.widths);
    if (m.widths.size() < 2)
      throw EngineError(fmt::format("{}: model.widths needs at least an input and an output width",
                                    model.location("widths")));
    for (int64_t w : m.widths)
      if (w < 1 || w > (int64_t{1} << 20))
        throw EngineError(fmt::format("{}: model.widths entry {} is out of range [1, 1048576]",
                                      model.location("widths"), w));
  } else if (kind == "gpt") {
    model.allow_only({"kind", "vocab", "context", "layers", "heads", "d_model", "dropout", "init", "loss"});
    m.kind = ModelKind::Gpt;
    m.widths.clear();
    m.vocab = model.integer("vocab", 256, false, 2, int64_t{1} << 16);
    m.context = model.integer("context", 0, true, 1, int64_t{1} << 16);
    m.layers = model.integer("layers", 0, true, 1, 1024);
    m.heads = model.integer("heads", 0, true, 1, 1024);
    m.d_model = model.integer("d_model", 0, true, 1, int64_t{1} << 16);
    if (m.d_model % m.heads != 0)
      throw EngineError(fmt::format("{}: model.d_model = {} is not a multiple of model.heads = {}",
                                    model.location("d_model"), m.d_model, m.heads));
    m.dropout = model.number("dropout", 0.0f, 0.0, 1.0);
  } else if (kind == "cnn") {
    model.allow_only({"kind", "channels", "kernel", "init", "loss"});
    m.kind = ModelKind::Cnn;
    m.widths.clear();
    if (!model.table()->get("channels"))
      throw EngineError(fmt::format("{}: missing key model.channels", source));
    m.channels = model.integers("channels", {});
    if (m.channels.empty())
      throw EngineError(
          fmt::format("{}: model.channels needs at least one conv block", model.location("channels")));
    for (int64_t c : m.channels)
      if (c < 1 || c > 4096)
        throw EngineError(fmt::format("{}: model.channels entry {} is out of range [1, 4096]",
                                      model.location("channels"), c));
    m.kernel = model.integer("kernel", 0, true, 1, 31);
    if (m.kernel % 2 == 0)
      throw EngineError(fmt::format("{}: model.kernel = {} must be odd (\"same\" padding kernel/2)",
                                    model.location("kernel"), m.kernel));
  } else if (kind == "onnx") {
    // A user's model: its graph and initial weights come from the registered file (docs/onnx.md).
    model.allow_only({"kind", "file", "input", "output", "context", "loss"});
    m.kind = ModelKind::Onnx;
    // Tokens per window when the model reads token ids (data.dataset = "text"); checked below.
    m.context = model.integer("context", 0, false, 1, int64_t{1} << 16);
    m.widths.clear();
    if (!model.table()->get("file"))
      throw EngineError(
          fmt::format("{}: model.kind = \"onnx\" needs model.file (a registered model file)", source));
    m.file = model.string("file", "");
    if (!valid_name(m.file))
      throw EngineError(
          fmt::format("{}: model.file must name a registered model file: 1 to 64 characters of "
                      "a-z, 0-9, '.', '_', '-'",
                      model.location("file")));
    m.input = model.string("input", "");
    m.output = model.string("output", "");
    for (const auto& [key, value] : std::initializer_list<std::pair<const char*, const std::string*>>{
             {"input", &m.input}, {"output", &m.output}})
      if (value->size() > 256)
        throw EngineError(fmt::format("{}: model.{} is longer than 256 bytes", model.location(key), key));
  } else {
    throw EngineError(fmt::format("{}: model.kind '{}' is not supported (supported: mlp, gpt, cnn, onnx)",
                                  model.location("kind"), kind));
  }

  if (model.table()->get("init")) {
    m.init = model.string("init", "");
    if (!valid_name(m.init))
      throw EngineError(
          fmt::format("{}: model.init must name registered weights: 1 to 64 characters of "
                      "a-z, 0-9, '.', '_', '-'",
                      model.location("init")));
  }

  // The loss (engine/loss.h): mean squared error regresses float targets, which only the tensors data set
  // holds (targets.npy), and only the mlp's and an imported model's [B, K] output predicts.
  const std::string loss = model.string("loss", "cross_entropy");
  if (loss == "mse") {
    m.loss = LossKind::Mse;
  } else if (loss != "cross_entropy") {
    throw EngineError(fmt::format("{}: model.loss '{}' is not supported (supported: cross_entropy, mse)",
                                  model.location("loss"), loss));
  }
  const bool mse = m.loss == LossKind::Mse;
  if (mse && m.kind != ModelKind::Mlp && m.kind != ModelKind::Onnx)
    throw EngineError(fmt::format(
        "{}: model.loss = \"mse\" is supported for model.kind = \"mlp\" or \"onnx\", not \"{}\" ({})",
        model.location("loss"), kind,
        m.kind == ModelKind::Gpt ? "a gpt predicts the next byte: its loss is the cross-entropy"
                                 : "a cnn classifies images: its loss is the cross-entropy"));

  TableReader data(root, "data", source, false);
  for (const char* key : {"dir", "path"})
    if (data.table() && data.table()->get(key))
      throw EngineError(
          fmt::format("{}: data.{}: a job names its data set (data.name), never a path; each node's "
                      "operator registers where a name's files are (--dataset NAME=PATH)",
                      data.location(key), key));
  job.dataset = data.string("dataset", m.kind == ModelKind::Gpt ? "text" : "fashion-mnist");
  if (mse && job.dataset != "tensors")
    throw EngineError(fmt::format(
        "{}: model.loss = \"mse\" regresses float targets, which only data.dataset = \"tensors\" holds "
        "(targets.npy, data.targets); data.dataset = \"{}\" has {}",
        model.location("loss"), job.dataset,
        job.dataset == "text" ? "next-byte ids (use the cross-entropy)"
                              : "class ids (use the cross-entropy)"));
  // 2×2 pooling halves the image once per conv block: every size it pools must be even.
  const auto check_pooling = [&] {
    int64_t h = m.image_height, w = m.image_width;
    for (size_t i = 0; i < m.channels.size(); ++i, h /= 2, w /= 2)
      if (h % 2 != 0 || w % 2 != 0)
        throw EngineError(
            fmt::format("{}: model.channels has {} blocks, but block {} would max-pool a {}x{} image "
                        "(2x2 pooling needs even sizes; {} allows {})",
                        model.location("channels"), m.channels.size(), i, h, w, job.dataset, i));
  };
  if (job.dataset == "fashion-mnist") {
    if (m.kind == ModelKind::Gpt)
      throw EngineError(fmt::format("{}: a gpt model trains on data.dataset = \"text\", not '{}'",
                                    data.location("dataset"), job.dataset));
    data.allow_only({"dataset", "name"});
    job.data_name = data.string("name", "fashion-mnist");
    if (m.kind == ModelKind::Onnx) m.classes = 10;
    if (m.kind == ModelKind::Cnn) {  // 1×28×28 grey images, 10 classes (Xiao et al. 2017)
      m.image_channels = 1;
      m.image_height = 28;
      m.image_width = 28;
      m.classes = 10;
      check_pooling();
    }
  } else if (job.dataset == "tensors") {
    // The user's own arrays (engine/tensor_data.h). The referee holds no data: the class count and a
    // cnn's image shape are stated here (in job_id through the shape and the cnn's fields) and the
    // loader checks the files against them.
    if (m.kind == ModelKind::Gpt)
      throw EngineError(fmt::format("{}: a gpt model trains on data.dataset = \"text\", not '{}'",
                                    data.location("dataset"), job.dataset));
    // An mse job's samples carry K float targets (data.targets), a classifier's one class id
    // (data.classes): each key is refused where the loss does not read it.
    if (mse && data.table()->get("classes"))
      throw EngineError(fmt::format(
          "{}: data.classes counts class ids, but model.loss = \"mse\" regresses float targets: state "
          "data.targets (the targets per sample, targets.npy's second dimension) instead",
          data.location("classes")));
    if (!mse && data.table()->get("targets"))
      throw EngineError(fmt::format(
          "{}: data.targets is read only with model.loss = \"mse\" (float targets); a classifier states "
          "data.classes",
          data.location("targets")));
    if (m.kind == ModelKind::Cnn)
      data.allow_only({"dataset", "name", "classes", "image"});
    else
      data.allow_only({"dataset", "name", mse ? "targets" : "classes"});
    if (!data.table()->get("name"))
      throw EngineError(fmt::format("{}: data.dataset = \"tensors\" needs data.name (a registered data set)",
                                    data.location("dataset")));
    job.data_name = data.string("name", "");
    if (mse)
      job.data_targets = data.integer("targets", 0, true, 1, int64_t{1} << 16);
    else
      job.data_classes = data.integer("classes", 0, true, 2, int64_t{1} << 16);
    if (m.kind == ModelKind::Onnx) m.classes = mse ? job.data_targets : job.data_classes;
    if (m.kind == ModelKind::Cnn) {
      if (!data.table()->get("image"))
        throw EngineError(fmt::format("{}: a cnn on data.dataset = \"tensors\" needs data.image = [C, H, W]",
                                      data.location("dataset")));
      const std::vector<int64_t> image = data.integers("image", {});
      if (image.size() != 3)
        throw EngineError(fmt::format("{}: data.image must be [C, H, W] (3 entries), got {}",
                                      data.location("image"), image.size()));
      for (int64_t v : image)
        if (v < 1 || v > 4096)
          throw EngineError(
              fmt::format("{}: data.image entry {} is out of range [1, 4096]", data.location("image"), v));
      m.image_channels = image[0];
      m.image_height = image[1];
      m.image_width = image[2];
      m.classes = job.data_classes;
      check_pooling();
    }
  } else if (job.dataset == "text") {
    if (m.kind != ModelKind::Gpt && m.kind != ModelKind::Onnx)
      throw EngineError(fmt::format("{}: data.dataset = \"text\" needs model.kind = \"gpt\" or \"onnx\"",
                                    data.location("dataset")));
    if (m.kind == ModelKind::Onnx) {  // token ids in, next-token logits [B, T, 256] out
      if (m.context == 0)
        throw EngineError(
            fmt::format("{}: an onnx model on data.dataset = \"text\" needs model.context (the "
                        "tokens of one window, the model input's second dimension)",
                        model.location("kind")));
      m.classes = 256;  // byte-level text (engine/text_data.h)
    }
    data.allow_only({"dataset", "name", "validation"});
    job.data_name = data.string("name", "fortunes");
    job.validation = data.real("validation", job.validation, 0.0, 1.0);
    if (job.validation >= 1.0)
      throw EngineError(fmt::format("{}: data.validation = {} must be below 1 (some windows must train)",
                                    data.location("validation"), job.validation));
  } else {
    throw EngineError(
        fmt::format("{}: data.dataset '{}' is not supported (supported: fashion-mnist, text, tensors)",
                    data.location("dataset"), job.dataset));
  }
  if (m.kind == ModelKind::Onnx && m.context != 0 && job.dataset != "text")
    throw EngineError(
        fmt::format("{}: model.context is read only for data.dataset = \"text\" (token ids), "
                    "not '{}'",
                    model.location("context"), job.dataset));
  if (!valid_name(job.data_name))
    throw EngineError(fmt::format("{}: data.name must be 1 to 64 characters of a-z, 0-9, '.', '_', '-'",
                                  data.location("name")));

  TableReader train(root, "train", source, true);
  train.allow_only({"seed", "steps", "batch_size", "stride", "shards"});
  job.seed = static_cast<uint64_t>(train.integer("seed", 0, false, 0, INT64_MAX));
  job.steps = train.integer("steps", 0, true, 1, kMaxSteps);
  job.batch_size = train.integer("batch_size", 0, true, 1, int64_t{1} << 20);
  job.stride = train.integer("stride", 0, true, 1, kMaxSteps);
  job.shards = train.integer("shards", 1, false, 1, job.batch_size);
  if (job.batch_size % job.shards != 0)
    throw EngineError(
        fmt::format("{}: train.shards {} does not divide train.batch_size {} (every shard takes "
                    "batch_size / shards rows)",
                    train.location("shards"), job.shards, job.batch_size));

  TableReader opt(root, "optimizer", source, true);
  OptimizerSpec& o = job.optimizer;
  const std::string okind = opt.string("kind", "adamw");
  const std::string schedule = opt.string("schedule", "constant");
  const bool cosine = schedule == "cosine";
  if (schedule != "constant" && !cosine)
    throw EngineError(
        fmt::format("{}: optimizer.schedule '{}' is not supported (supported: constant, cosine)",
                    opt.location("schedule"), schedule));
  // Keys every optimizer kind reads, plus the cosine schedule's own.
  const auto allow = [&](std::initializer_list<std::string_view> own) {
    std::vector<std::string_view> keys(own);
    for (std::string_view k : {"kind", "lr", "weight_decay", "schedule", "clip_norm", "decay"})
      keys.push_back(k);
    if (cosine)
      for (std::string_view k : {"warmup_steps", "min_lr"}) keys.push_back(k);
    for (auto&& [key, value] : *opt.table())
      if (std::find(keys.begin(), keys.end(), key.str()) == keys.end()) {
        const bool cosine_only = key.str() == "warmup_steps" || key.str() == "min_lr";
        throw EngineError(fmt::format(
            "{}: unknown key '{}' in [optimizer]{}", toml_where(source, value.source()), key.str(),
            cosine_only ? " (only with schedule = \"cosine\")" : did_you_mean(key.str(), keys)));
      }
  };
  if (okind == "adamw") {
    allow({"beta1", "beta2", "eps"});
    o.kind = OptimizerKind::AdamW;
    o.beta1 = opt.number("beta1", o.beta1, 0.0, 1.0);
    o.beta2 = opt.number("beta2", o.beta2, 0.0, 1.0);
    o.eps = opt.number("eps", o.eps, 1e-30, 1.0, true);
  } else if (okind == "sgd") {
    allow({"momentum"});
    o.kind = OptimizerKind::Sgd;
    o.momentum = opt.number("momentum", o.momentum, 0.0, 1.0);
  } else {
    throw EngineError(fmt::format("{}: optimizer.kind '{}' is not supported (supported: adamw, sgd)",
                                  opt.location("kind"), okind));
  }
  o.lr = opt.number("lr", o.lr, 1e-30, 10.0, true);
  o.weight_decay = opt.number("weight_decay", o.weight_decay, 0.0, 1.0, true);
  if (cosine) {
    o.schedule = LrSchedule::Cosine;
    o.warmup_steps = opt.integer("warmup_steps", 0, false, 0, job.steps);
    o.min_lr = opt.number("min_lr", 0.0f, 0.0, 10.0, true);
    if (o.min_lr > o.lr)
      throw EngineError(fmt::format("{}: optimizer.min_lr = {} exceeds optimizer.lr = {}",
                                    opt.location("min_lr"), o.min_lr, o.lr));
  }
  o.clip_norm = opt.number("clip_norm", 0.0f, 0.0, 1e6, true);
  const std::string decay = opt.string("decay", "all");
  if (decay == "all") {
    o.decay = DecayScope::All;
  } else if (decay == "matrices") {
    o.decay = DecayScope::Matrices;
  } else {
    throw EngineError(fmt::format("{}: optimizer.decay '{}' is not supported (supported: all, matrices)",
                                  opt.location("decay"), decay));
  }

  // The dispute's time terms (docs/protocol.md, "Clocks"), in seconds and bytes per second.
  TableReader dispute(root, "dispute", source, false);
  dispute.allow_only({"base_seconds", "step_seconds", "min_bytes_per_second"});
  DisputeTerms& t = job.dispute;
  const auto millis = [](double seconds) {
    return std::chrono::milliseconds(std::llround(seconds * 1000.0));
  };
  t.base = millis(dispute.real("base_seconds", 1e-3 * static_cast<double>(t.base.count()), 0.05, 3600.0));
  t.step = millis(dispute.real("step_seconds", 1e-3 * static_cast<double>(t.step.count()), 0.001, 3600.0));
  t.min_bytes_per_second = static_cast<uint64_t>(dispute.integer(
      "min_bytes_per_second", static_cast<int64_t>(t.min_bytes_per_second), false, 1024, int64_t{1} << 40));
  job.numerics = parse_numerics(root, source);
  return job;
}

void locate_data(JobSpec& job, const DataRegistry& registry) {
  job.data_path = registry.path(job.data_name, job.source);
  locate_model_files(job, registry);
}

void locate_model_files(JobSpec& job, const DataRegistry& registry) {
  if (!job.model.init.empty() && !job.init_hash) {
    job.init_path = registry.weights_path(job.model.init, job.source);
    job.init_hash = init_weights_hash(job.init_path);
  }
  if (job.model.kind == ModelKind::Onnx && !job.model.onnx) {
    job.model_path = registry.model_path(job.model.file, job.source);
    try {
      // One read: the bytes hashed into job_id are the bytes imported (engine/model_cache.h).
      const ModelFile file = load_model_file(job.model_path, job.model.file, OnnxLimits{});
      job.model_hash = file.hash;
      job.model.onnx = file.model;
    } catch (const OnnxError& e) {
      throw EngineError(fmt::format("{} (model.file '{}'): {}", job.source, job.model.file, e.what()));
    }
  }
}

Digest init_weights_hash(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw EngineError(fmt::format("{}: cannot open weights file: {}", path.string(), std::strerror(errno)));
  Hasher h(HashTag::File);
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<size_t>(in.gcount());
    h.update(std::span(reinterpret_cast<const uint8_t*>(buffer.data()), n));
  }
  if (in.bad()) throw EngineError(fmt::format("{}: cannot read weights file", path.string()));
  return h.final();
}

JobSpec load_job(const std::filesystem::path& path, const DataRegistry& registry) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw EngineError(fmt::format("{}: cannot open job file: {}", path.string(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw EngineError(fmt::format("{}: cannot read job file", path.string()));
  JobSpec job = parse_job(text.str(), path.string());
  locate_data(job, registry);
  return job;
}

void check_job_against_data(const JobSpec& job, int64_t samples, int64_t features, int64_t classes) {
  const ModelSpec& m = job.model;
  switch (m.kind) {
    case ModelKind::Mlp: {
      const auto& w = m.widths;
      if (w.front() != features)
        throw EngineError(fmt::format("{}: model.widths starts with {} but {} samples have {} features",
                                      job.source, w.front(), job.dataset, features));
      if (w.back() != classes)
        throw EngineError(fmt::format("{}: model.widths ends with {} but {} has {} {}", job.source, w.back(),
                                      job.dataset, classes,
                                      m.loss == LossKind::Mse ? "targets per sample" : "classes"));
      break;
    }
    case ModelKind::Cnn: {
      const int64_t pixels = m.image_channels * m.image_height * m.image_width;
      if (pixels != features)
        throw EngineError(fmt::format(
            "{}: the cnn reads {}x{}x{} images ({} values) but {} samples have {} features", job.source,
            m.image_channels, m.image_height, m.image_width, pixels, job.dataset, features));
      if (m.classes != classes)
        throw EngineError(fmt::format("{}: the cnn predicts {} classes but {} has {}", job.source, m.classes,
                                      job.dataset, classes));
      break;
    }
    case ModelKind::Onnx:
      // The graph's own shapes are checked when the step graph is built (the output must be [B, classes]).
      if (job.dataset == "text" && m.context != features)
        throw EngineError(fmt::format("{}: model.context is {} but the {} windows hold {} tokens", job.source,
                                      m.context, job.dataset, features));
      if (m.classes != classes)
        throw EngineError(fmt::format("{}: the job states {} {} but {} has {}", job.source, m.classes,
                                      m.loss == LossKind::Mse ? "targets per sample" : "classes", job.dataset,
                                      classes));
      break;
    case ModelKind::Gpt:
      if (m.context != features)
        throw EngineError(fmt::format("{}: model.context is {} but the {} windows hold {} tokens", job.source,
                                      m.context, job.dataset, features));
      if (m.vocab != classes)
        throw EngineError(fmt::format("{}: model.vocab is {} but {} has {} symbols", job.source, m.vocab,
                                      job.dataset, classes));
      break;
  }
  if (job.batch_size > samples)
    throw EngineError(fmt::format("{}: train.batch_size {} exceeds the {} training samples", job.source,
                                  job.batch_size, samples));
}

int64_t label_width(const JobSpec& job) {
  if (job.model.loss == LossKind::Mse) return job.data_targets;
  return job.dataset == "text" ? job.model.context : 0;
}

namespace {

// The fields of the job that existed before sharding (see canonical_job_encoding in job.h).
void write_model_fields(codec::ByteWriter& out, const JobSpec& job, const Digest& dataset_root,
                        const DataShape& shape) {
  out.u64(kRepOpsContractVersion);
  out.u8(static_cast<uint8_t>(job.model.kind));
  out.u64(job.model.widths.size());
  for (int64_t w : job.model.widths) out.u64(static_cast<uint64_t>(w));
  out.u64(job.dataset.size());
  out.raw(std::span(reinterpret_cast<const uint8_t*>(job.dataset.data()), job.dataset.size()));
  out.raw(dataset_root);
  for (int64_t v : {shape.samples, shape.features, shape.classes, shape.label_width})
    out.u64(static_cast<uint64_t>(v));
  out.u64(job.seed);
  out.u64(static_cast<uint64_t>(job.steps));
  out.u64(static_cast<uint64_t>(job.batch_size));
  out.u64(static_cast<uint64_t>(job.stride));
  const OptimizerSpec& o = job.optimizer;
  out.u8(static_cast<uint8_t>(o.kind));
  out.u32(std::bit_cast<uint32_t>(o.lr));
  if (o.kind == OptimizerKind::Sgd) {
    out.u32(std::bit_cast<uint32_t>(o.momentum));
  } else {
    out.u32(std::bit_cast<uint32_t>(o.beta1));
    out.u32(std::bit_cast<uint32_t>(o.beta2));
    out.u32(std::bit_cast<uint32_t>(o.eps));
  }
  out.u32(std::bit_cast<uint32_t>(o.weight_decay));

  // The extension (see job.h): absent for the jobs that existed before it, so their ids stand.
  const ModelSpec& m = job.model;
  const bool extended = m.kind != ModelKind::Mlp || job.dataset != "fashion-mnist" ||
                        o.schedule != LrSchedule::Constant || o.clip_norm != 0.0f ||
                        o.decay != DecayScope::All;
  if (!extended) return;
  out.u8(1);
  if (m.kind == ModelKind::Gpt) {
    for (int64_t v : {m.vocab, m.context, m.layers, m.heads, m.d_model}) out.u64(static_cast<uint64_t>(v));
    out.u32(std::bit_cast<uint32_t>(m.dropout));
  } else if (m.kind == ModelKind::Cnn) {
    out.u64(m.channels.size());
    for (int64_t c : m.channels) out.u64(static_cast<uint64_t>(c));
    for (int64_t v : {m.kernel, m.image_channels, m.image_height, m.image_width, m.classes})
      out.u64(static_cast<uint64_t>(v));
  } else if (m.kind == ModelKind::Onnx) {
    if (!job.model_hash)
      throw EngineError(
          fmt::format("{}: the model file '{}' (model.file) has not been located in this node's registry",
                      job.source, m.file));
    out.raw(*job.model_hash);
    for (const std::string* s : {&m.input, &m.output}) {
      out.u64(s->size());
      out.raw(std::span(reinterpret_cast<const uint8_t*>(s->data()), s->size()));
    }
  }
  if (job.dataset == "text") {
    out.u64(std::bit_cast<uint64_t>(job.validation));
  }
  out.u8(static_cast<uint8_t>(o.schedule));
  out.u64(static_cast<uint64_t>(o.warmup_steps));
  out.u32(std::bit_cast<uint32_t>(o.min_lr));
  out.u32(std::bit_cast<uint32_t>(o.clip_norm));
  out.u8(static_cast<uint8_t>(o.decay));
}

// Everything of the job that shapes the trajectory: the base fields with their extension, then the
// shard count only when it is not 1, so the ids (and golden roots) of unsharded jobs stand.
void write_training_fields(codec::ByteWriter& out, const JobSpec& job, const Digest& dataset_root,
                           const DataShape& shape) {
  write_model_fields(out, job, dataset_root, shape);
  if (job.shards != 1) {
    out.u8(3);
    out.u64(static_cast<uint64_t>(job.shards));
  }
}

}  // namespace

std::vector<uint8_t> canonical_job_encoding(const JobSpec& job, const Digest& dataset_root,
                                            const DataShape& shape) {
  codec::ByteWriter out;
  write_training_fields(out, job, dataset_root, shape);
  // The dispute terms, only when they are not the defaults, so the ids of jobs without them stand.
  if (job.dispute != DisputeTerms{}) {
    out.u8(2);
    out.u64(static_cast<uint64_t>(job.dispute.base.count()));
    out.u64(static_cast<uint64_t>(job.dispute.step.count()));
    out.u64(job.dispute.min_bytes_per_second);
  }
  // The numerics mode, only when it is not RepOps, so the ids of RepOps jobs stand.
  if (job.numerics.mode != NumericsMode::RepOps) {
    out.u8(4);
    out.u8(static_cast<uint8_t>(job.numerics.mode));
    for (size_t k = 0; k < kTauKindsInIdV1; ++k) out.u64(std::bit_cast<uint64_t>(job.numerics.tau[k]));
    if (job.numerics.mode == NumericsMode::RoundingLog)
      out.u64(static_cast<uint64_t>(job.numerics.quantum_bits));
    // The τ of the op kinds appended since, only when one is not its default: a job file written
    // before those kinds existed keeps its id.
    bool appended_default = true;
    for (size_t k = kTauKindsInIdV1; k < kOpKindCount; ++k)
      appended_default =
          appended_default && job.numerics.tau[k] == default_rounding_tau(static_cast<OpKind>(k));
    if (!appended_default) {
      out.u8(6);
      out.u64(kOpKindCount - kTauKindsInIdV1);
      for (size_t k = kTauKindsInIdV1; k < kOpKindCount; ++k)
        out.u64(std::bit_cast<uint64_t>(job.numerics.tau[k]));
    }
    // The trainer of a job with roles, only when named, so the ids of independent-trainer jobs stand.
    if (!job.numerics.trainer.empty()) {
      out.u8(8);
      out.u64(job.numerics.trainer.size());
      out.raw(std::span(reinterpret_cast<const uint8_t*>(job.numerics.trainer.data()),
                        job.numerics.trainer.size()));
    }
  }
  // The initial weights' file hash, only for a job with model.init, so the ids of other jobs stand.
  if (!job.model.init.empty()) {
    if (!job.init_hash)
      throw EngineError(
          fmt::format("{}: the weights '{}' (model.init) have not been located in this "
                      "node's registry",
                      job.source, job.model.init));
    out.u8(5);
    out.raw(*job.init_hash);
  }
  // The loss, only when it is not the cross-entropy, so the ids of every earlier job stand.
  if (job.model.loss != LossKind::CrossEntropy) {
    out.u8(7);
    out.u8(static_cast<uint8_t>(job.model.loss));
  }
  return out.take();
}

Digest job_id(const JobSpec& job, const Digest& dataset_root, const DataShape& shape) {
  const std::vector<uint8_t> bytes = canonical_job_encoding(job, dataset_root, shape);
  return Hasher(HashTag::Job).update(std::span<const uint8_t>(bytes)).final();
}

}  // namespace tribunal
