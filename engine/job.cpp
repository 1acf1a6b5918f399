#include "engine/job.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/toml_reader.h"

namespace tribunal {
namespace {

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_f32(std::vector<uint8_t>& out, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(bits >> (8 * i)));
}
void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put_u64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

JobSpec parse_job(std::string_view toml_text, const std::string& source, const std::filesystem::path& base_dir) {
  const toml::table root = parse_toml(toml_text, source);
  for (auto&& [key, value] : root)
    if (key != "model" && key != "data" && key != "train" && key != "optimizer")
      throw EngineError(fmt::format("{}: unknown table or key '{}' (expected [model], [data], [train], [optimizer])",
                                    toml_where(source, value.source()), key.str()));

  JobSpec job;
  job.source = source;
  TableReader model(root, "model", source, true);
  model.allow_only({"kind", "widths"});
  const std::string kind = model.string("kind", "mlp");
  if (kind != "mlp")
    throw EngineError(fmt::format("{}: model.kind '{}' is not supported (supported: mlp)", model.location("kind"), kind));
  job.model.widths = model.integers("widths", job.model.widths);
  if (job.model.widths.size() < 2)
    throw EngineError(fmt::format("{}: model.widths needs at least an input and an output width", model.location("widths")));
  for (int64_t w : job.model.widths)
    if (w < 1 || w > (int64_t{1} << 20))
      throw EngineError(fmt::format("{}: model.widths entry {} is out of range [1, 1048576]", model.location("widths"), w));

  TableReader data(root, "data", source, false);
  data.allow_only({"dataset", "dir"});
  job.dataset = data.string("dataset", job.dataset);
  if (job.dataset != "fashion-mnist")
    throw EngineError(fmt::format("{}: data.dataset '{}' is not supported (supported: fashion-mnist)",
                                  data.location("dataset"), job.dataset));
  std::filesystem::path dir = data.string("dir", job.data_dir.string());
  job.data_dir = dir.is_absolute() ? dir : base_dir / dir;

  TableReader train(root, "train", source, true);
  train.allow_only({"seed", "steps", "batch_size", "stride"});
  job.seed = static_cast<uint64_t>(train.integer("seed", 0, false, 0, INT64_MAX));
  job.steps = train.integer("steps", 0, true, 1, kMaxSteps);
  job.batch_size = train.integer("batch_size", 0, true, 1, int64_t{1} << 20);
  job.stride = train.integer("stride", 0, true, 1, kMaxSteps);

  TableReader opt(root, "optimizer", source, true);
  const std::string okind = opt.string("kind", "adamw");
  if (okind == "adamw") {
    opt.allow_only({"kind", "lr", "beta1", "beta2", "eps", "weight_decay"});
    job.optimizer.kind = OptimizerKind::AdamW;
    job.optimizer.beta1 = opt.number("beta1", job.optimizer.beta1, 0.0, 1.0);
    job.optimizer.beta2 = opt.number("beta2", job.optimizer.beta2, 0.0, 1.0);
    job.optimizer.eps = opt.number("eps", job.optimizer.eps, 1e-30, 1.0, true);
  } else if (okind == "sgd") {
    opt.allow_only({"kind", "lr", "momentum", "weight_decay"});
    job.optimizer.kind = OptimizerKind::Sgd;
    job.optimizer.momentum = opt.number("momentum", job.optimizer.momentum, 0.0, 1.0);
  } else {
    throw EngineError(fmt::format("{}: optimizer.kind '{}' is not supported (supported: adamw, sgd)",
                                  opt.location("kind"), okind));
  }
  job.optimizer.lr = opt.number("lr", job.optimizer.lr, 1e-30, 10.0, true);
  job.optimizer.weight_decay = opt.number("weight_decay", job.optimizer.weight_decay, 0.0, 1.0, true);
  return job;
}

JobSpec load_job(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EngineError(fmt::format("{}: cannot open job file: {}", path.string(), std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw EngineError(fmt::format("{}: cannot read job file", path.string()));
  return parse_job(text.str(), path.string(), path.parent_path());
}

void check_job_against_data(const JobSpec& job, int64_t samples, int64_t features, int64_t classes) {
  const auto& w = job.model.widths;
  if (w.front() != features)
    throw EngineError(fmt::format("{}: model.widths starts with {} but {} samples have {} features", job.source,
                                  w.front(), job.dataset, features));
  if (w.back() != classes)
    throw EngineError(fmt::format("{}: model.widths ends with {} but {} has {} classes", job.source, w.back(),
                                  job.dataset, classes));
  if (job.batch_size > samples)
    throw EngineError(fmt::format("{}: train.batch_size {} exceeds the {} training samples", job.source,
                                  job.batch_size, samples));
}

std::vector<uint8_t> canonical_job_encoding(const JobSpec& job, const Digest& dataset_root) {
  std::vector<uint8_t> out;
  put_u64(out, kRepOpsContractVersion);
  out.push_back(static_cast<uint8_t>(job.model.kind));
  put_u64(out, job.model.widths.size());
  for (int64_t w : job.model.widths) put_u64(out, static_cast<uint64_t>(w));
  put_string(out, job.dataset);
  out.insert(out.end(), dataset_root.begin(), dataset_root.end());
  put_u64(out, job.seed);
  put_u64(out, static_cast<uint64_t>(job.steps));
  put_u64(out, static_cast<uint64_t>(job.batch_size));
  put_u64(out, static_cast<uint64_t>(job.stride));
  const OptimizerSpec& o = job.optimizer;
  out.push_back(static_cast<uint8_t>(o.kind));
  put_f32(out, o.lr);
  if (o.kind == OptimizerKind::Sgd) {
    put_f32(out, o.momentum);
  } else {
    put_f32(out, o.beta1);
    put_f32(out, o.beta2);
    put_f32(out, o.eps);
  }
  put_f32(out, o.weight_decay);
  return out;
}

Digest job_id(const JobSpec& job, const Digest& dataset_root) {
  const std::vector<uint8_t> bytes = canonical_job_encoding(job, dataset_root);
  return Hasher(HashTag::Job).update(std::span<const uint8_t>(bytes)).final();
}

}  // namespace tribunal
