#include "verifiers/evidence.h"

#include <cmath>
#include <system_error>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal::verifiers {

uint64_t file_bytes(const std::filesystem::path& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

RunEvidence read_run(const std::filesystem::path& dir, const Digest& job_id) {
  RunEvidence run;
  run.dir = dir;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw EngineError(fmt::format("{}: not a run directory", dir.string()));
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || entry.path().extension() != ".safetensors") continue;
    const CheckpointHeader h = read_checkpoint_header(entry.path());
    // A checkpoint of another job means the directory is not (only) this job's run: refused, naming
    // both jobs, rather than audited on whatever part of it happens to match.
    if (h.job_id != job_id)
      throw EngineError(fmt::format("audit: {} holds checkpoints of job {} ({}), not of job {}", dir.string(),
                                    to_hex(h.job_id), entry.path().filename().string(), to_hex(job_id)));
    run.checkpoints[h.step] = entry.path();
    run.stored_bytes += file_bytes(entry.path());
  }
  if (ec) throw EngineError(fmt::format("{}: cannot list the run: {}", dir.string(), ec.message()));
  run.losses = read_loss_log(loss_log_path(dir));
  run.resources = read_resource_log(resource_log_path(dir));
  run.stored_bytes += file_bytes(loss_log_path(dir)) + file_bytes(resource_log_path(dir));
  return run;
}

State load_step(const RunEvidence& run, int64_t step, const JobSpec& job, const Digest& job_id,
                ThreadPool& pool) {
  const auto it = run.checkpoints.find(step);
  if (it == run.checkpoints.end())
    throw EngineError(fmt::format("{}: no checkpoint of step {}", run.dir.string(), step));
  return load_checkpoint(it->second, job, job_id, pool);
}

State replay(const JobSpec& job, const Dataset& train, ThreadPool& pool, const State& start, int64_t steps,
             const FastOptions& fast) {
  Trainer trainer(job, train, pool, nullptr, nullptr, Device::Cpu, RoundingOptions{}, fast);
  trainer.set_state(start);
  for (int64_t i = 0; i < steps; ++i) trainer.step();
  return trainer.state();
}

StateDistance state_distance(const JobSpec& job, const State& a, const State& b) {
  const StateLayout layout = state_layout(job);
  StateDistance d;
  double sum = 0, params = 0;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    if (layout.names[i] == "step") continue;
    const std::span<const float> x = a.tensors[i].values(), y = b.tensors.at(i).values();
    for (size_t e = 0; e < x.size(); ++e) {
      const double diff = static_cast<double>(x[e]) - static_cast<double>(y[e]);
      if (std::isnan(diff)) return {NAN, NAN, NAN};
      sum += diff * diff;
      if (i < layout.num_params) params += diff * diff;
      d.max_abs = std::max(d.max_abs, std::abs(diff));
    }
  }
  d.l2 = std::sqrt(sum);
  d.params_l2 = std::sqrt(params);
  return d;
}

double weight_change(const JobSpec& job, const State& a, const State& b) {
  return state_distance(job, a, b).params_l2;
}

double loss_on_rows(const JobSpec& job, const State& state, const Dataset& train,
                    std::span<const int64_t> rows, ThreadPool& pool) {
  const int64_t features = train.inputs.shape()[1];
  const int64_t per_row = std::max<int64_t>(train.label_width(), 1);
  const auto n = static_cast<int64_t>(rows.size());
  Dataset subset;
  subset.inputs = Tensor(Shape{n, features});
  subset.labels = train.label_width() > 0 ? Tensor(Shape{n, per_row}) : Tensor(Shape{n});
  subset.rows = train.rows;
  subset.cols = train.cols;
  subset.classes = train.classes;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t src = rows[static_cast<size_t>(r)];
    std::copy_n(train.inputs.data() + src * features, features, subset.inputs.data() + r * features);
    std::copy_n(train.labels.data() + src * per_row, per_row, subset.labels.data() + r * per_row);
  }
  return evaluate_loss(job, state, subset, pool);
}

const Dataset& training_set(const JobSpec& job, const Dataset* given, std::optional<Dataset>& loaded,
                            ThreadPool& pool) {
  if (given) return *given;
  loaded = load_dataset(job, Split::Train, pool);
  return *loaded;
}

}  // namespace tribunal::verifiers
