#include "verifiers/audit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "engine/error.h"
#include "verifiers/evidence.h"

namespace tribunal::verifiers {
namespace {

CheckResult loss_count(const JobSpec& job, const RunEvidence& run, int64_t samples) {
  CheckResult c{"loss_count", false, "", {}};
  const int64_t per_epoch = (samples + job.batch_size - 1) / job.batch_size;
  std::set<int64_t> seen;
  int64_t duplicates = 0, out_of_range = 0, unordered = 0;
  for (size_t i = 0; i < run.losses.size(); ++i) {
    const int64_t t = run.losses[i].step;
    if (t < 0 || t >= job.steps) ++out_of_range;
    if (!seen.insert(t).second) ++duplicates;
    if (i > 0 && t <= run.losses[i - 1].step) ++unordered;
  }
  int64_t missing = 0;
  for (int64_t t = 0; t < job.steps; ++t) missing += !seen.contains(t);
  c.passed = static_cast<int64_t>(run.losses.size()) == job.steps && missing == 0 && duplicates == 0 &&
             out_of_range == 0 && unordered == 0;
  c.figures = {{"logged", static_cast<double>(run.losses.size())},
               {"expected", static_cast<double>(job.steps)},
               {"iterations_per_epoch", static_cast<double>(per_epoch)},
               {"epochs", static_cast<double>(job.steps) / static_cast<double>(per_epoch)},
               {"missing", static_cast<double>(missing)},
               {"duplicates", static_cast<double>(duplicates)},
               {"out_of_range", static_cast<double>(out_of_range)}};
  c.detail =
      fmt::format("{} losses logged, N = E x I = {} expected ({} missing, {} duplicated, {} out of range)",
                  run.losses.size(), job.steps, missing, duplicates, out_of_range);
  return c;
}

CheckResult resource_utilisation(const JobSpec& job, const RunEvidence& run, double alpha) {
  CheckResult c{"resource_utilisation", false, "", {}};
  const auto n = static_cast<double>(run.resources.size());
  double mean = 0;
  for (const ResourceSample& s : run.resources) mean += s.utilisation;
  mean = n > 0 ? mean / n : 0;
  double above = 0;
  for (const ResourceSample& s : run.resources) above += s.utilisation > mean;
  const double fraction = n > 0 ? above / n : 0;
  c.passed = n > 0 && static_cast<int64_t>(n) == job.steps && fraction >= alpha;
  c.figures = {
      {"samples", n}, {"mean_utilisation", mean}, {"fraction_above_mean", fraction}, {"alpha", alpha}};
  c.detail = fmt::format(
      "{} samples (one per step: {}), mean utilisation {:.3f}, {:.3f} of them above it (needs >= {})",
      run.resources.size(), job.steps, mean, fraction, alpha);
  return c;
}

// The auditor's random training rows for checkpoint c: pev_percent % of them, at least one.
std::vector<int64_t> pev_rows(int64_t samples, double percent, uint64_t seed, int64_t c) {
  const auto n = std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(static_cast<double>(samples) * percent / 100.0)));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(c));
  std::vector<int64_t> rows;
  rows.reserve(static_cast<size_t>(n));
  // Floyd's algorithm: n distinct rows of `samples`.
  std::set<int64_t> chosen;
  for (int64_t j = samples - n; j < samples; ++j) {
    const int64_t r = std::uniform_int_distribution<int64_t>(0, j)(rng);
    rows.push_back(chosen.insert(r).second ? r : (chosen.insert(j), j));
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace

bool AuditReport::passed() const {
  return std::all_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.passed; });
}

AuditReport run_audit(const JobSpec& job, const std::filesystem::path& run_dir, const AuditOptions& options,
                      const Dataset* train_in) {
  const auto cpu0 = process_cpu_time();
  ThreadPool pool(options.threads);
  std::optional<Dataset> loaded;
  const Dataset& train = training_set(job, train_in, loaded, pool);
  const Digest id = job_id(job, train);
  const RunEvidence run = read_run(run_dir, id);
  AuditReport report;
  report.evidence_bytes = run.stored_bytes;
  report.read_bytes = file_bytes(loss_log_path(run_dir)) + file_bytes(resource_log_path(run_dir));
  report.checks.push_back(loss_count(job, run, train.samples()));
  report.checks.push_back(resource_utilisation(job, run, options.alpha));

  const std::vector<uint64_t> steps =
      checkpoint_steps(static_cast<uint64_t>(job.steps), static_cast<uint64_t>(job.stride));
  std::map<int64_t, State> states;  // the checkpoints opened, by step
  std::string missing;
  const auto state_at = [&](int64_t step) -> const State* {
    if (auto it = states.find(step); it != states.end()) return &it->second;
    try {
      State s = load_step(run, step, job, id, pool);
      report.read_bytes += file_bytes(run.checkpoints.at(step));
      return &states.emplace(step, std::move(s)).first->second;
    } catch (const EngineError& e) {
      if (missing.empty()) missing = e.what();
      return nullptr;
    }
  };

  // PEV: every checkpoint's sampled loss against the logged losses around it.
  {
    CheckResult c{"pev", true, "", {}};
    std::map<int64_t, float> logged;
    for (const LossRecord& r : run.losses) logged.emplace(r.step, r.loss);
    double worst = 0;
    int64_t worst_step = -1, checked = 0, rows_total = 0;
    for (uint64_t c64 : steps) {
      const auto cp = static_cast<int64_t>(c64);
      const State* s = state_at(cp);
      if (!s) {
        c.passed = false;
        continue;
      }
      const int64_t lo = std::max<int64_t>(0, cp - options.pev_window / 2);
      const int64_t hi =
          std::min<int64_t>(job.steps, std::max<int64_t>(lo + 1, cp + (options.pev_window + 1) / 2));
      double sum = 0;
      int64_t count = 0;
      for (int64_t t = lo; t < hi; ++t)
        if (auto it = logged.find(t); it != logged.end()) sum += it->second, ++count;
      const std::vector<int64_t> rows = pev_rows(train.samples(), options.pev_percent, options.seed, cp);
      rows_total += static_cast<int64_t>(rows.size());
      const double recomputed = loss_on_rows(job, *s, train, rows, pool);
      const double mean = count > 0 ? sum / static_cast<double>(count) : NAN;
      const double rel = count > 0 ? std::abs(recomputed - mean) / std::max(std::abs(mean), 1e-6) : INFINITY;
      ++checked;
      if (!(rel <= options.pev_tolerance)) c.passed = false;
      if (!(rel <= worst) || worst_step < 0) worst = rel, worst_step = cp;
    }
    c.figures = {
        {"checkpoints", static_cast<double>(checked)},
        {"rows_per_checkpoint", checked ? static_cast<double>(rows_total) / static_cast<double>(checked) : 0},
        {"worst_relative_difference", worst},
        {"worst_step", static_cast<double>(worst_step)},
        {"tolerance", options.pev_tolerance}};
    c.detail = fmt::format(
        "{} of {} checkpoints' losses recomputed on {} % of the data; worst |recomputed - logged| / "
        "logged {:.4f} at step {} (tolerance {}){}",
        checked, steps.size(), options.pev_percent, worst, worst_step, options.pev_tolerance,
        missing.empty() ? "" : "; " + missing);
    report.checks.push_back(std::move(c));
  }

  // VMO: per epoch, the top-k intervals by weight change, replayed.
  {
    CheckResult c{"vmo", true, "", {}};
    const int64_t per_epoch = (train.samples() + job.batch_size - 1) / job.batch_size;
    std::map<int64_t, std::vector<std::pair<double, size_t>>> by_epoch;  // epoch → (change, interval index)
    for (size_t i = 0; i + 1 < steps.size(); ++i) {
      const State *a = state_at(static_cast<int64_t>(steps[i])),
                  *b = state_at(static_cast<int64_t>(steps[i + 1]));
      if (!a || !b) {
        c.passed = false;
        continue;
      }
      by_epoch[static_cast<int64_t>(steps[i]) / per_epoch].push_back({weight_change(job, *a, *b), i});
    }
    double worst = 0;
    int64_t replayed = 0, replayed_steps = 0, worst_step = -1;
    for (auto& [epoch, intervals] : by_epoch) {
      std::sort(intervals.begin(), intervals.end(),
                [](const auto& x, const auto& y) { return x.first > y.first; });
      for (size_t j = 0; j < intervals.size() && static_cast<int64_t>(j) < options.top_k; ++j) {
        const size_t i = intervals[j].second;
        const auto from = static_cast<int64_t>(steps[i]), to = static_cast<int64_t>(steps[i + 1]);
        const State again = replay(job, train, pool, *state_at(from), to - from, options.fast);
        const double d = state_distance(job, again, *state_at(to)).l2;
        ++replayed;
        replayed_steps += to - from;
        if (!(d <= options.vmo_delta)) c.passed = false;
        if (!(d <= worst) || worst_step < 0) worst = d, worst_step = from;
      }
    }
    c.figures = {{"intervals_replayed", static_cast<double>(replayed)},
                 {"steps_replayed", static_cast<double>(replayed_steps)},
                 {"worst_distance", worst},
                 {"worst_interval_start", static_cast<double>(worst_step)},
                 {"delta", options.vmo_delta}};
    c.detail = fmt::format(
        "{} interval(s) of largest weight change replayed ({} steps of {}); worst L2 distance {:.6g} "
        "from the checkpoint, interval from step {} (delta {}){}",
        replayed, replayed_steps, job.steps, worst, worst_step, options.vmo_delta,
        missing.empty() ? "" : "; " + missing);
    report.checks.push_back(std::move(c));
  }
  report.cpu_seconds = (process_cpu_time() - cpu0).count();
  return report;
}

}  // namespace tribunal::verifiers
