#include "verifiers/tolerance.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "verifiers/evidence.h"

namespace tribunal::verifiers {

std::vector<FastOptions> default_calibration_kernels() {
  std::vector<FastOptions> k;
  if (float32_gemm_built(Float32Gemm::OpenBlas))
    k.push_back({Float32Gemm::OpenBlas, 1}), k.push_back({Float32Gemm::OpenBlas, 2});
  for (Float32Gemm g : {Float32Gemm::Naive, Float32Gemm::Blocked, Float32Gemm::Reversed}) k.push_back({g, 0});
  return k;
}

std::string kernel_name(const FastOptions& k) {
  return fmt::format("{}/{}", float32_gemm_name(k.gemm), k.blas_threads);
}

FastOptions parse_kernel(const std::string& name) {
  const size_t slash = name.find('/');
  FastOptions k;
  try {
    k.gemm = parse_float32_gemm(name.substr(0, slash));
    if (slash != std::string::npos) k.blas_threads = std::stoi(name.substr(slash + 1));
  } catch (const std::exception& e) {
    throw EngineError(
        fmt::format("kernel '{}': expected GEMM[/THREADS], e.g. openblas/2 ({})", name, e.what()));
  }
  return k;
}

Calibration calibrate(const JobSpec& job, const Dataset& train, const CalibrationOptions& options) {
  if (job.numerics.mode != NumericsMode::Fast)
    throw EngineError(fmt::format(
        "{}: the tolerance verifier calibrates a fast-mode job ([numerics] mode = \"fast\")", job.source));
  if (options.kernels.size() < 2) throw EngineError("calibration needs at least two kernels");
  const auto cpu0 = process_cpu_time();
  ThreadPool pool(options.threads);
  Calibration c;
  c.job_id = to_hex(job_id(job, train));
  c.stride = job.stride;
  c.margin = options.margin;
  for (const FastOptions& k : options.kernels) c.kernels.push_back(kernel_name(k));
  State reference = initial_state(job);
  for (int64_t i = 0; i < options.intervals && reference.step() < job.steps; ++i) {
    const int64_t steps = std::min(job.stride, job.steps - reference.step());
    std::vector<State> ends;
    for (const FastOptions& k : options.kernels)
      ends.push_back(replay(job, train, pool, reference, steps, k));
    for (size_t a = 0; a < ends.size(); ++a)
      for (size_t b = a + 1; b < ends.size(); ++b) {
        const double d = state_distance(job, ends[a], ends[b]).l2;
        c.distances.push_back(d);
        c.max_distance = std::max(c.max_distance, d);
      }
    reference = std::move(ends.front());
    ++c.intervals;
  }
  c.boundary = options.margin * c.max_distance;
  c.cpu_seconds = (process_cpu_time() - cpu0).count();
  return c;
}

void write_calibration(const std::filesystem::path& path, const Calibration& c) {
  const nlohmann::json j = {
      {"job_id", c.job_id},   {"stride", c.stride},       {"intervals", c.intervals},
      {"kernels", c.kernels}, {"distances", c.distances}, {"max_distance", c.max_distance},
      {"margin", c.margin},   {"boundary", c.boundary},   {"cpu_seconds", c.cpu_seconds}};
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  if (!out) throw EngineError(fmt::format("{}: cannot write the calibration", path.string()));
}

Calibration read_calibration(const std::filesystem::path& path, const Digest& job_id) {
  std::ifstream in(path);
  if (!in) throw EngineError(fmt::format("{}: cannot read the calibration", path.string()));
  Calibration c;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    c.job_id = j.at("job_id").get<std::string>();
    c.stride = j.at("stride").get<int64_t>();
    c.intervals = j.at("intervals").get<int64_t>();
    c.kernels = j.at("kernels").get<std::vector<std::string>>();
    c.distances = j.at("distances").get<std::vector<double>>();
    c.max_distance = j.at("max_distance").get<double>();
    c.margin = j.at("margin").get<double>();
    c.boundary = j.at("boundary").get<double>();
    c.cpu_seconds = j.at("cpu_seconds").get<double>();
  } catch (const nlohmann::json::exception& e) {
    throw EngineError(fmt::format("{}: not a calibration file: {}", path.string(), e.what()));
  }
  if (c.job_id != to_hex(job_id))
    throw EngineError(
        fmt::format("{}: the calibration of job {}, not of {}", path.string(), c.job_id, to_hex(job_id)));
  if (!(c.boundary >= 0) || !std::isfinite(c.boundary))
    throw EngineError(fmt::format("{}: boundary {} is not a finite distance", path.string(), c.boundary));
  return c;
}

ToleranceReport check_tolerance(const JobSpec& job, const std::filesystem::path& run_dir,
                                const Calibration& calibration, const ToleranceOptions& options,
                                const Dataset* train_in) {
  const auto cpu0 = process_cpu_time();
  ThreadPool pool(options.threads);
  std::optional<Dataset> loaded;
  const Dataset& train = training_set(job, train_in, loaded, pool);
  const Digest id = job_id(job, train);
  if (calibration.job_id != to_hex(id))
    throw EngineError(
        fmt::format("the calibration is of job {}, the run's job is {}", calibration.job_id, to_hex(id)));
  const RunEvidence run = read_run(run_dir, id);
  ToleranceReport r;
  r.boundary = calibration.boundary;
  r.evidence_bytes = run.stored_bytes;
  const std::vector<uint64_t> steps =
      checkpoint_steps(static_cast<uint64_t>(job.steps), static_cast<uint64_t>(job.stride));
  r.intervals = static_cast<int64_t>(steps.size()) - 1;
  std::vector<std::string> absent;
  for (uint64_t s : steps)
    if (!run.checkpoints.contains(static_cast<int64_t>(s))) absent.push_back(std::to_string(s));
  if (!absent.empty()) {
    r.detail = fmt::format("checkpoint(s) of step {} missing", fmt::join(absent, ", "));
    r.cpu_seconds = (process_cpu_time() - cpu0).count();
    return r;
  }
  // Optimistic sampling: round(fraction × intervals) of them, at least one, drawn with the seed.
  const auto n = static_cast<size_t>(r.intervals);
  const size_t opened = std::clamp<size_t>(
      static_cast<size_t>(std::llround(options.sample_fraction * static_cast<double>(n))), 1, n);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(options.seed);
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(opened);
  std::sort(order.begin(), order.end());
  r.passed = true;
  std::vector<int64_t> sent;
  for (size_t i : order) {
    OpenedInterval o;
    o.from = static_cast<int64_t>(steps[i]);
    o.to = static_cast<int64_t>(steps[i + 1]);
    const State start = load_step(run, o.from, job, id, pool), claimed = load_step(run, o.to, job, id, pool);
    for (int64_t s : {o.from, o.to})
      if (std::find(sent.begin(), sent.end(), s) == sent.end())
        sent.push_back(s), r.sent_bytes += file_bytes(run.checkpoints.at(s));
    const State again = replay(job, train, pool, start, o.to - o.from, options.kernel);
    o.distance = state_distance(job, again, claimed).l2;
    o.passed = o.distance <= calibration.boundary;
    r.passed = r.passed && o.passed;
    r.opened.push_back(o);
  }
  double worst = 0;
  for (const OpenedInterval& o : r.opened)
    worst = std::isnan(o.distance) ? INFINITY : std::max(worst, o.distance);
  r.detail = fmt::format("{} of {} intervals opened; largest distance {:.6g}, boundary {:.6g}",
                         r.opened.size(), r.intervals, worst, r.boundary);
  r.cpu_seconds = (process_cpu_time() - cpu0).count();
  return r;
}

}  // namespace tribunal::verifiers
