// `tribunal audit RUN_DIR --job JOB`: the cheap audits of a provider's run (verifiers/audit.h), or
// with --tolerance the tolerance verifier (verifiers/tolerance.h); docs/verifiers.md.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/error.h"
#include "verifiers/audit.h"
#include "verifiers/tolerance.h"

namespace tribunal::cli {
namespace {

struct AuditSettings {
  std::filesystem::path run_dir, job_path, calibration_path;
  DataRegistry datasets = DataRegistry::debian();
  bool json = false, tolerance = false;
  int threads = 1;
  verifiers::AuditOptions audit;
  verifiers::CalibrationOptions calibration;
  verifiers::ToleranceOptions check;
  std::string kernel = "openblas/1";
};

nlohmann::json figures_json(const std::vector<std::pair<std::string, double>>& figures) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, value] : figures) out[name] = value;
  return out;
}

int run_lab_apex(AuditSettings& s, const JobSpec& job) {
  s.audit.threads = s.threads;
  s.audit.fast = verifiers::parse_kernel(s.kernel);
  const verifiers::AuditReport r = verifiers::run_audit(job, s.run_dir, s.audit);
  if (s.json) {
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& c : r.checks)
      checks.push_back({{"name", c.name},
                        {"passed", c.passed},
                        {"detail", c.detail},
                        {"figures", figures_json(c.figures)}});
    const nlohmann::json out = {{"run_dir", s.run_dir.string()},
                                {"passed", r.passed()},
                                {"checks", checks},
                                {"cpu_seconds", r.cpu_seconds},
                                {"evidence_bytes", r.evidence_bytes},
                                {"read_bytes", r.read_bytes}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    for (const auto& c : r.checks)
      fmt::print("{:<21} {}  {}\n", c.name, c.passed ? "pass" : "FAIL", c.detail);
    fmt::print("audit                 {} ({:.2f} s CPU, {} B of evidence stored, {} B read)\n",
               r.passed() ? "passed" : "FAILED", r.cpu_seconds, r.evidence_bytes, r.read_bytes);
  }
  return r.passed() ? 0 : 1;
}

int run_tolerance(AuditSettings& s, const JobSpec& job) {
  ThreadPool pool(s.threads);
  const Dataset train = load_dataset(job, Split::Train, pool);
  const Digest id = job_id(job, train);
  std::filesystem::path path = s.calibration_path;
  if (path.empty()) path = std::filesystem::path("runs") / (s.job_path.stem().string() + ".calibration.json");
  verifiers::Calibration c;
  bool calibrated = false;
  if (std::filesystem::exists(path)) {
    c = verifiers::read_calibration(path, id);
  } else {
    s.calibration.threads = s.threads;
    c = verifiers::calibrate(job, train, s.calibration);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    verifiers::write_calibration(path, c);
    calibrated = true;
  }
  s.check.threads = s.threads;
  s.check.kernel = verifiers::parse_kernel(s.kernel);
  const verifiers::ToleranceReport r = verifiers::check_tolerance(job, s.run_dir, c, s.check, &train);
  if (s.json) {
    nlohmann::json opened = nlohmann::json::array();
    for (const auto& o : r.opened)
      opened.push_back({{"from", o.from}, {"to", o.to}, {"distance", o.distance}, {"passed", o.passed}});
    const nlohmann::json out = {{"run_dir", s.run_dir.string()},
                                {"passed", r.passed},
                                {"detail", r.detail},
                                {"calibration",
                                 {{"file", path.string()},
                                  {"calibrated_now", calibrated},
                                  {"kernels", c.kernels},
                                  {"intervals", c.intervals},
                                  {"max_distance", c.max_distance},
                                  {"margin", c.margin},
                                  {"boundary", c.boundary},
                                  {"cpu_seconds", c.cpu_seconds}}},
                                {"intervals", r.intervals},
                                {"opened", opened},
                                {"verifier_kernel", s.kernel},
                                {"cpu_seconds", r.cpu_seconds},
                                {"evidence_bytes", r.evidence_bytes},
                                {"sent_bytes", r.sent_bytes}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    fmt::print(
        "calibration  {} {} ({} kernels: {}; {} intervals; largest honest distance {:.6g}; margin {}; "
        "{:.2f} s CPU)\n",
        calibrated ? "written to" : "read from", path.string(), c.kernels.size(), fmt::join(c.kernels, " "),
        c.intervals, c.max_distance, c.margin, c.cpu_seconds);
    fmt::print("boundary     {:.6g} (L2 over the state but its step counter)\n", c.boundary);
    for (const auto& o : r.opened)
      fmt::print("interval     [{}, {}]  distance {:.6g}  {}\n", o.from, o.to, o.distance,
                 o.passed ? "pass" : "FAIL");
    fmt::print("tolerance    {}: {} ({:.2f} s CPU, {} B stored, {} B sent)\n", r.passed ? "passed" : "FAILED",
               r.detail, r.cpu_seconds, r.evidence_bytes, r.sent_bytes);
  }
  return r.passed ? 0 : 1;
}

int run_audit_command(AuditSettings& s) {
  if (s.run_dir.empty()) throw UsageError("no run directory given");
  if (s.job_path.empty()) throw UsageError("--job is required");
  const JobSpec job = load_job(s.job_path, s.datasets);
  s.check.seed = s.audit.seed;
  if (s.tolerance) return run_tolerance(s, job);
  return run_lab_apex(s, job);
}

}  // namespace

Command add_audit(CLI::App& root) {
  auto s = std::make_shared<AuditSettings>();
  CLI::App* app = root.add_subcommand(
      "audit",
      "check a provider's run directory without an exact dispute (docs/verifiers.md): the Lab Apex audits "
      "(loss count, resource utilisation, probabilistic epoch validation, top-k interval replay), or with "
      "--tolerance the tolerance verifier (calibrated boundary, sampled intervals) of a fast-mode job; "
      "exit 1 when a check fails");
  app->add_option("run_dir", s->run_dir, "the provider's run directory (tribunal train --out)")
      ->type_name("RUN_DIR");
  app->add_option("--job", s->job_path, "the job file the run trained")->type_name("JOB.toml");
  app->add_flag("--json", s->json, "print one JSON object");
  add_integer(*app, "--threads", s->threads, 1, 256, "threads for the recomputations", "K");
  add_integer(*app, "--seed", s->audit.seed, 0, INT64_MAX,
              "the verifier's sampling seed (PEV rows; opened intervals)");
  app->add_option("--alpha", s->audit.alpha, "resource check: fraction of samples above the mean needed")
      ->check(CLI::Range(0.0, 1.0))
      ->default_str(fmt::format("{}", s->audit.alpha));
  app->add_option("--pev-percent", s->audit.pev_percent,
                  "PEV: % of the training samples recomputed per checkpoint")
      ->check(CLI::Range(0.001, 100.0))
      ->default_str(fmt::format("{}", s->audit.pev_percent));
  app->add_option("--pev-tolerance", s->audit.pev_tolerance,
                  "PEV: allowed relative difference from the logged loss")
      ->check(CLI::Range(0.0, 100.0))
      ->default_str(fmt::format("{}", s->audit.pev_tolerance));
  add_integer(*app, "--pev-window", s->audit.pev_window, 1, 1000000,
              "PEV: logged losses averaged around a checkpoint");
  add_integer(*app, "--top-k", s->audit.top_k, 0, 1000000,
              "VMO: intervals of largest weight change replayed per epoch");
  app->add_option("--vmo-delta", s->audit.vmo_delta, "VMO: allowed L2 distance of a replay (0: bitwise)")
      ->check(CLI::Range(0.0, 1e30))
      ->default_str("0");
  app->add_flag("--tolerance", s->tolerance, "run the tolerance verifier instead (fast-mode jobs)");
  app->add_option(
         "--calibration", s->calibration_path,
         "tolerance: the calibration file, read when it exists, else calibrated now and written there")
      ->type_name("FILE")
      ->default_str("runs/<job file stem>.calibration.json");
  app->add_option("--sample-fraction", s->check.sample_fraction,
                  "tolerance: fraction of the intervals opened")
      ->check(CLI::Range(0.0, 1.0))
      ->default_str(fmt::format("{}", s->check.sample_fraction));
  app->add_option("--kernel", s->kernel,
                  "the verifier's own float32 GEMM/threads for replays of fast-mode jobs")
      ->type_name("GEMM/K")
      ->default_str(s->kernel);
  add_integer(*app, "--calibration-intervals", s->calibration.intervals, 1, 1000000,
              "tolerance: intervals calibrated on");
  app->add_option("--margin", s->calibration.margin,
                  "tolerance: boundary = margin x the largest honest distance")
      ->check(CLI::Range(1.0, 1e6))
      ->default_str(fmt::format("{}", s->calibration.margin));
  add_repeatable(
      *app, "--calibration-kernel", "GEMM/K",
      [s](const std::string& v) {
        if (s->calibration.kernels == verifiers::default_calibration_kernels())
          s->calibration.kernels.clear();
        s->calibration.kernels.push_back(verifiers::parse_kernel(v));
      },
      "tolerance: a kernel calibration replays (repeat; default openblas/1 openblas/2 naive/0 blocked/0 "
      "reversed/0)");
  add_datasets(*app, s->datasets);
  return {app, [s] { return run_audit_command(*s); }};
}

}  // namespace tribunal::cli
