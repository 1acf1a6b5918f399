// `tribunal train`: trains a job, writes checkpoints, prints a summary (or one JSON line).
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/error.h"
#include "engine/progress.h"
#include "engine/trainer.h"

namespace tribunal::cli {
namespace {

// Progress on stderr (docs/running.md, "Progress"): on a terminal a bar redrawn at most ~20 times a
// second with the rate, elapsed time and ETA; otherwise (a file, a pipe, a journal) one line at the
// first step, every `interval` and at the last step, so a redirected run shows it is alive.
class Progress {
 public:
  Progress(bool enabled, bool terminal, std::chrono::milliseconds interval)
      : enabled_(enabled), terminal_(terminal), meter_(interval) {}
  void update(int64_t step, int64_t total, float loss) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    meter_.update(step, total, now);
    if (!terminal_) {
      if (meter_.report_due())
        fmt::print(stderr, "train: {}, loss {:.4f}\n", meter_.line(), static_cast<double>(loss));
      std::fflush(stderr);
      return;
    }
    if (step != total && now - drawn_ < std::chrono::milliseconds(50)) return;
    drawn_ = now;
    const int width = 30, filled = static_cast<int>(width * step / std::max<int64_t>(total, 1));
    const double rate = meter_.steps_per_second();
    const auto eta = meter_.eta();
    // \x1b[K clears what a longer earlier line left at the end.
    fmt::print(stderr, "\r[{}{}] step {}/{}  loss {:.4f}  {}elapsed {}{}\x1b[K",
               std::string(static_cast<size_t>(filled), '#'),
               std::string(static_cast<size_t>(width - filled), ' '), step, total, static_cast<double>(loss),
               rate > 0 ? format_rate(rate) + "  " : "", format_duration(meter_.elapsed()),
               eta ? "  ETA " + format_duration(*eta) : "");
    if (step == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool enabled_, terminal_;
  ProgressMeter meter_;
  std::chrono::steady_clock::time_point drawn_{};
};

// What the command line sets.
struct TrainSettings {
  std::filesystem::path job_path, out_dir;
  TrainOptions options;
  DataRegistry datasets = DataRegistry::debian();
  bool json = false;
  bool no_eval = false;
  std::chrono::milliseconds progress_interval = std::chrono::seconds(10);
};

int train_on(TrainSettings& s, World& world);

int run_train(TrainSettings& s) {
  if (s.job_path.empty()) throw UsageError("no job file given");
  const std::unique_ptr<World> world = launched_world_or_solo();
  if (world->size() == 1) return train_on(s, *world);
  try {
    // One lockstep region (engine/world.h): any rank's failure ends every rank with its error.
    return lockstep(*world, [&] { return train_on(s, *world); });
  } catch (const RankFailure& e) {
    // Every rank knows, and none waits in a collective: each says so and exits 1, MPI finalized.
    if (e.rank() == world->rank())
      std::fprintf(stderr, "tribunal: error: %s\n", e.what());
    else
      std::fprintf(stderr, "tribunal: error: rank %d of %d stopped: %s\n", world->rank(), world->size(),
                   e.what());
    std::fflush(stderr);
    return 1;
  }
}

// Trains as rank world.rank(): rank 0 alone prints the progress bar and the result.
int train_on(TrainSettings& s, World& world) {
  TrainOptions& options = s.options;
  options.evaluate = !s.no_eval;
  options.out_dir = s.out_dir.empty() ? std::filesystem::path("runs") / s.job_path.stem() : s.out_dir;
  const std::filesystem::path& job_path = s.job_path;
  const bool json = s.json;
  const JobSpec job = load_job(job_path, s.datasets);
  if (!options.rounding.replay_dir.empty() && job.numerics.mode != NumericsMode::RoundingLog)
    throw UsageError("--replay-logs replays a rounding-log job's logs, but " + job_path.string() +
                     " is a RepOps job (no [numerics] mode = \"rounding-log\")");
  options.world = &world;
  const bool lead = world.rank() == 0;
  Progress progress(lead, isatty(STDERR_FILENO), s.progress_interval);
  options.on_step = [&](int64_t step, int64_t total, float loss) { progress.update(step, total, loss); };
  const TrainResult r = run_training(job, options);
  const int64_t steps_run = r.steps - r.resumed_from;
  if (!lead) return 0;

  if (json) {
    nlohmann::json out = {
        {"job_id", to_hex(r.job_id)},
        {"steps", r.steps},
        {"resumed_from", r.resumed_from},
        {"stride", r.stride},
        {"final_state_hash", to_hex(r.final_state_hash)},
        {"trajectory_root", to_hex(r.trajectory_root)},
        {"dataset_root", to_hex(r.dataset_root)},
        {"loss_first", r.loss_first},
        {"loss_last", r.loss_last},
        {"test_accuracy", r.test_accuracy},
        {"validation_loss", r.validation_loss},
        {"unigram_entropy", r.unigram_entropy},
        {"seconds_per_step", steps_run > 0 ? r.seconds / static_cast<double>(steps_run) : 0.0},
        {"eval_seconds", r.eval_seconds},
        {"seconds", r.seconds},
        {"load_seconds", r.load_seconds},
        {"threads", r.threads},
        {"device", device_name(r.device)},
        {"ranks", r.ranks},
        {"exchange_bytes_per_step", r.exchange_bytes_per_step},
        {"exchange_seconds", r.exchange_seconds},
        {"checkpoints", r.checkpoint_hashes.size()},
        {"out_dir", options.out_dir.string()},
        {"numerics", numerics_mode_name(job.numerics.mode)},
    };
    if (job.numerics.mode == NumericsMode::Fast) {
      out["float32_gemm"] = float32_gemm_name(options.fast.gemm);
      out["blas_threads"] = options.fast.blas_threads;
    }
    if (job.numerics.mode == NumericsMode::RoundingLog) {
      out["float64_gemm"] = float64_gemm_name(options.rounding.gemm);
      out["replayed_logs"] = options.rounding.replay_dir.string();
      out["rounded_values"] = r.rounded_values;
      out["logged_decisions"] = r.logged_decisions;
      out["rounding_log_packed_bytes"] = r.rounding_log_packed_bytes;
      out["rounding_log_file_bytes"] = r.rounding_log_file_bytes;
    }
    std::printf("%s\n", out.dump().c_str());
  } else {
    fmt::print("job_id           {}\n", to_hex(r.job_id));
    fmt::print("dataset_root     {}\n", to_hex(r.dataset_root));
    fmt::print("steps            {} (stride {}, {} checkpoints in {})\n", r.steps, r.stride,
               r.checkpoint_hashes.size(), options.out_dir.string());
    fmt::print("loss             {:.4f} -> {:.4f}\n", r.loss_first, r.loss_last);
    if (job.model.loss == LossKind::Mse) {
      if (r.validation_loss >= 0)
        fmt::print("validation loss  {:.6f} (mean squared error on the test split)\n", r.validation_loss);
      else
        fmt::print("validation loss  (no test split)\n");
    } else if (label_width(job) > 0) {
      if (r.validation_loss >= 0)
        fmt::print("validation loss  {:.4f} nats/byte (unigram entropy of the training bytes {:.4f})\n",
                   r.validation_loss, r.unigram_entropy);
      else
        fmt::print("validation loss  (no held-out windows; unigram entropy {:.4f})\n", r.unigram_entropy);
    } else {
      fmt::print("test accuracy    {:.4f}\n", r.test_accuracy);
    }
    if (job.numerics.mode == NumericsMode::RoundingLog)
      fmt::print(
          "rounding log     {} of {} values logged ({:.4f} %), {} B packed, {} B in files; float64 GEMM "
          "{}{}\n",
          r.logged_decisions, r.rounded_values,
          r.rounded_values
              ? 100.0 * static_cast<double>(r.logged_decisions) / static_cast<double>(r.rounded_values)
              : 0.0,
          r.rounding_log_packed_bytes, r.rounding_log_file_bytes, float64_gemm_name(options.rounding.gemm),
          options.rounding.replay_dir.empty()
              ? ""
              : ", replaying the logs of " + options.rounding.replay_dir.string());
    if (job.numerics.mode == NumericsMode::Fast)
      fmt::print(
          "numerics         fast: float32 GEMM {} (OpenBLAS threads {}); not reproducible across GEMMs\n",
          float32_gemm_name(options.fast.gemm),
          options.fast.blas_threads > 0 ? std::to_string(options.fast.blas_threads) : std::string("default"));
    fmt::print("final_state_hash {}\n", to_hex(r.final_state_hash));
    fmt::print("trajectory_root  {}\n", to_hex(r.trajectory_root));
    fmt::print(
        "time             {:.2f} s training ({:.4f} s/step) on {} × {} rank(s) × {} thread(s), {:.2f} s "
        "loading data, {:.2f} s evaluating\n",
        r.seconds, steps_run > 0 ? r.seconds / static_cast<double>(steps_run) : 0.0, device_name(r.device),
        r.ranks, r.threads, r.load_seconds, r.eval_seconds);
  }
  return 0;
}

}  // namespace

Command add_train(CLI::App& root) {
  auto s = std::make_shared<TrainSettings>();
  CLI::App* app = root.add_subcommand(
      "train",
      "train a job with RepOps, write stride checkpoints to DIR, evaluate on the test set (a job names its "
      "data set; --dataset registers where a name's files are); under mpirun -np K, data parallel over K "
      "ranks "
      "(K must divide the job's train.shards; the trajectory does not depend on K)");
  app->add_option("job", s->job_path, "the job file (TOML, scenarios/jobs/)")->type_name("JOB.toml");
  add_integer(*app, "--steps", s->options.stop_at, 0, kMaxSteps,
              "stop when the state reaches this step (default: the job's train.steps)")
      ->default_str("");
  add_integer(*app, "--threads", s->options.threads, 1, 256,
              "training threads (the trajectory does not depend on it)", "K");
  add_device(*app, s->options.device);
  app->add_option("--out", s->out_dir, "checkpoint directory")
      ->type_name("DIR")
      ->default_str("runs/<job file stem>");
  app->add_flag("--resume", s->options.resume, "continue from the last checkpoint in DIR (verified first)");
  app->add_flag("--json", s->json, "print one JSON object instead of the summary");
  add_duration<std::chrono::seconds>(
      *app, "--progress-seconds", s->progress_interval, 0, 86400,
      "when stderr is not a terminal: a progress line at the first step, every this many seconds (0: every "
      "step) and at the last",
      "SECONDS");
  app->add_flag(
      "--no-eval", s->no_eval,
      "skip the evaluation on the test set or held-out text (the trajectory does not depend on it)");
  app->add_option_function<std::string>(
         "--float64-gemm",
         [s](const std::string& name) { s->options.rounding.gemm = parse_float64_gemm(name); },
         "rounding-log jobs: the float64 GEMM, openblas (its core type and threads from OPENBLAS_CORETYPE "
         "and "
         "OPENBLAS_NUM_THREADS) or naive (a plain loop)")
      ->check(
          CLI::IsMember({float64_gemm_name(Float64Gemm::OpenBlas), float64_gemm_name(Float64Gemm::Naive)}))
      ->type_name("NAME")
      ->default_str(float64_gemm_name(default_float64_gemm()));
  app->add_option_function<std::string>(
         "--float32-gemm", [s](const std::string& name) { s->options.fast.gemm = parse_float32_gemm(name); },
         "fast-mode jobs: the float32 GEMM of Linear and Matmul, openblas (SGEMM), naive, blocked (split-K) "
         "or "
         "reversed (k descending)")
      ->check(CLI::IsMember({"openblas", "naive", "blocked", "reversed"}))
      ->type_name("NAME")
      ->default_str("openblas");
  add_integer(*app, "--blas-threads", s->options.fast.blas_threads, 0, 256,
              "fast-mode jobs: OpenBLAS threads (0: as OPENBLAS_NUM_THREADS says)", "K");
  app->add_option(
         "--replay-logs", s->options.rounding.replay_dir,
         "rounding-log jobs: round by the logs another run wrote in DIR (its --out) instead of logging; "
         "the trajectory is then that run's, whatever this machine's float64 kernels")
      ->type_name("DIR");
  add_simd(*app);
  add_datasets(*app, s->datasets);
  return {app, [s] { return run_train(*s); }};
}

}  // namespace tribunal::cli
