#include "cheats/attacks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "engine/checkpoint_writer.h"
#include "engine/error.h"
#include "engine/run_log.h"
#include "verifiers/evidence.h"

namespace tribunal::cheats {

using verifiers::loss_on_rows;

namespace {

std::filesystem::path fresh_dir(const std::filesystem::path& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

int64_t skipped_per_interval(const JobSpec& job, const ShortcutPlan& plan) {
  return std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(plan.skip_fraction * static_cast<double>(job.stride))), 0, job.stride);
}

}  // namespace

bool shortcut_skips(const JobSpec& job, const ShortcutPlan& plan, int64_t t) {
  return t >= job.stride && t % job.stride >= job.stride - skipped_per_interval(job, plan);
}

Fault shortcut_fault(const JobSpec& job, const ShortcutPlan& plan) {
  Fault f;
  for (int64_t t = 0; t < job.steps; ++t)
    if (shortcut_skips(job, plan, t)) {
      f.skip_from = t;
      break;
    }
  if (f.skip_from < 0) return f;
  f.skip_count = 0;
  for (int64_t t = f.skip_from; t < job.steps && shortcut_skips(job, plan, t); ++t) ++f.skip_count;
  f.skip_mode = plan.mode;
  return f;
}

AttackRun train_shortcut(const JobSpec& job, const Dataset& train, const std::filesystem::path& out_dir,
                         const ShortcutPlan& plan, const FastOptions& fast) {
  const auto cpu0 = process_cpu_time();
  ThreadPool pool(1);
  fresh_dir(out_dir);
  Trainer trainer(job, train, pool, nullptr, nullptr, Device::Cpu, RoundingOptions{}, fast);
  CheckpointWriter writer(job, trainer.job_id(), out_dir);
  writer.submit(trainer.state());
  const StateLayout layout = state_layout(job);
  const size_t step_index = layout.names.size() - 2;
  std::vector<LossRecord> losses;
  std::vector<ResourceSample> samples;
  std::vector<float> delta;  // per tensor, flattened: the last real step's change
  std::vector<Tensor> last_change;
  AttackRun run;
  std::chrono::duration<double> last_wall{0};
  for (int64_t t = 0; t < job.steps; ++t) {
    const StepMeter meter(t);
    State& s = trainer.state();
    if (!shortcut_skips(job, plan, t)) {
      const State before = s;
      const float loss = trainer.step();
      last_change.clear();
      for (size_t i = 0; i < s.tensors.size(); ++i) {
        Tensor d(s.tensors[i].shape());
        for (size_t e = 0; e < d.values().size(); ++e)
          d.values()[e] = s.tensors[i].values()[e] - before.tensors[i].values()[e];
        last_change.push_back(std::move(d));
      }
      losses.push_back({t, loss});
      ++run.computed_steps;
    } else {
      for (size_t i = 0; i < s.tensors.size(); ++i) {
        if (i == step_index) continue;
        if (plan.mode == SkipMode::Extrapolate && !last_change.empty())
          for (size_t e = 0; e < s.tensors[i].values().size(); ++e)
            s.tensors[i].values()[e] += last_change[i].values()[e];
      }
      s.tensors[step_index][0] = static_cast<float>(t + 1);
      losses.push_back({t, s.tensors.back()[0]});
      ++run.skipped_steps;
      if (!plan.forge_logs) std::this_thread::sleep_for(last_wall);
    }
    const ResourceSample sample = meter.done(1);
    if (!shortcut_skips(job, plan, t)) last_wall = sample.wall;
    samples.push_back(sample);
    if ((t + 1) % job.stride == 0 || t + 1 == job.steps) writer.submit(trainer.state());
  }
  writer.finish();
  if (plan.forge_logs) {
    // Plausible losses: between consecutive checkpoints, a line from one checkpoint's loss (on 1 % of
    // the rows the forger picks) to the next, plus noise as large as its real losses' step-to-step
    // changes; resource samples of skipped steps copied from real ones.
    std::mt19937_64 rng(plan.seed);
    std::vector<int64_t> rows;
    for (int64_t r = 0; r < train.samples(); r += 100) rows.push_back(r);
    std::map<int64_t, double> at;
    const Digest id = trainer.job_id();
    for (uint64_t c : checkpoint_steps(static_cast<uint64_t>(job.steps), static_cast<uint64_t>(job.stride)))
      at[static_cast<int64_t>(c)] =
          loss_on_rows(job, load_checkpoint(checkpoint_path(out_dir, static_cast<int64_t>(c)), job, id, pool),
                       train, rows, pool);
    double noise = 0;
    int64_t n = 0;
    for (size_t i = 1; i < losses.size(); ++i)
      if (!shortcut_skips(job, plan, losses[i].step) && !shortcut_skips(job, plan, losses[i - 1].step))
        noise += std::abs(losses[i].loss - losses[i - 1].loss), ++n;
    noise = n > 0 ? noise / static_cast<double>(n) : 0.0;
    std::normal_distribution<double> gauss(0.0, noise);
    for (LossRecord& r : losses) {
      const auto hi = at.upper_bound(r.step);
      const auto lo = std::prev(hi);
      const double w = hi == at.end() ? 0.0
                                      : static_cast<double>(r.step - lo->first) /
                                            static_cast<double>(hi->first - lo->first);
      const double line = hi == at.end() ? lo->second : (1 - w) * lo->second + w * hi->second;
      r.loss = static_cast<float>(std::max(0.0, line + gauss(rng)));
    }
    std::vector<ResourceSample> real;
    for (const ResourceSample& x : samples)
      if (!shortcut_skips(job, plan, x.step)) real.push_back(x);
    for (ResourceSample& x : samples)
      if (shortcut_skips(job, plan, x.step) && !real.empty()) {
        const int64_t step = x.step;
        x = real[std::uniform_int_distribution<size_t>(0, real.size() - 1)(rng)];
        x.step = step;
      }
  }
  write_loss_log(loss_log_path(out_dir), losses);
  write_resource_log(resource_log_path(out_dir), samples);
  run.cpu_seconds = (process_cpu_time() - cpu0).count();
  return run;
}

size_t output_bias_index(const JobSpec& job) {
  const StateLayout layout = state_layout(job);
  const Shape last_weight = layout.shapes.at(layout.num_params - 1);
  for (size_t p = layout.num_params; p-- > 0;) {
    const Shape& s = layout.shapes[p];
    if (s.rank() == 1 && p > 0 && layout.shapes[p - 1].rank() == 2 && layout.shapes[p - 1][1] == s[0] &&
        layout.names[p].find("bias") != std::string::npos)
      return p;
  }
  throw EngineError(fmt::format("{}: the model has no output bias ({} parameters, last {})", job.source,
                                layout.num_params, last_weight.str()));
}

AttackRun train_hide_in_noise(const JobSpec& job, const Dataset& train, const std::filesystem::path& out_dir,
                              const NoisePlan& plan, const FastOptions& fast) {
  const auto cpu0 = process_cpu_time();
  ThreadPool pool(1);
  fresh_dir(out_dir);
  Trainer trainer(job, train, pool, nullptr, nullptr, Device::Cpu, RoundingOptions{}, fast);
  const size_t bias = output_bias_index(job);
  if (plan.target_class < 0 || plan.target_class >= trainer.state().tensors[bias].shape()[0])
    throw EngineError(fmt::format("target class {} is not an output of the model", plan.target_class));
  CheckpointWriter writer(job, trainer.job_id(), out_dir);
  writer.submit(trainer.state());
  std::vector<LossRecord> losses;
  std::vector<ResourceSample> samples;
  AttackRun run;
  run.budget = plan.budget;
  for (int64_t t = 0; t < job.steps; ++t) {
    const StepMeter meter(t);
    losses.push_back({t, trainer.step()});
    samples.push_back(meter.done(1));
    ++run.computed_steps;
    if ((t + 1) % job.stride == 0 || t + 1 == job.steps) {
      float& b = trainer.state().tensors[bias][plan.target_class];
      const float before = b;
      b = static_cast<float>(static_cast<double>(b) + plan.budget);
      run.shift += static_cast<double>(b) - static_cast<double>(before);
      writer.submit(trainer.state());
    }
  }
  writer.finish();
  write_loss_log(loss_log_path(out_dir), losses);
  write_resource_log(resource_log_path(out_dir), samples);
  run.cpu_seconds = (process_cpu_time() - cpu0).count();
  return run;
}

double prediction_rate(const JobSpec& job, const State& state, const Dataset& data, int64_t cls,
                       int64_t max_rows, ThreadPool& pool) {
  const DataShape shape = data_shape_of(data);
  const int64_t rows = std::min(max_rows, shape.samples);
  const StepGraph g = build_eval_graph(job, shape, rows);
  Executor executor(pool);
  const std::vector<const Tensor*> params = eval_state_inputs(job, state);
  Tensor x(Shape{rows, shape.features},
           std::span<const float>(data.inputs.data(), static_cast<size_t>(rows * shape.features)));
  const Tensor* inputs[] = {&x};
  executor.run(g, params, inputs);
  const Tensor& logits = executor.value(g.loss);
  const int64_t classes = logits.shape()[1], n = logits.shape()[0];
  int64_t hits = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t arg = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (logits[r * classes + c] > logits[r * classes + arg]) arg = c;
    hits += arg == cls;
  }
  return n > 0 ? static_cast<double>(hits) / static_cast<double>(n) : 0.0;
}

}  // namespace tribunal::cheats
