// `tribunal train`: trains a job, writes checkpoints, prints a summary (or one JSON line).
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/error.h"
#include "engine/trainer.h"

namespace tribunal::cli {
namespace {

// A one-line progress bar on stderr, redrawn at most ~20 times a second.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled) {}
  void update(int64_t step, int64_t total, float loss) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (step != total && now - last_ < std::chrono::milliseconds(50)) return;
    last_ = now;
    const int width = 40, filled = static_cast<int>(width * step / std::max<int64_t>(total, 1));
    std::fprintf(stderr, "\r[%s%s] step %lld/%lld  loss %.4f", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(), static_cast<long long>(step),
                 static_cast<long long>(total), static_cast<double>(loss));
    if (step == total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace

int train_main(Args& args) {
  std::filesystem::path job_path, out_dir;
  TrainOptions options;
  DataRegistry datasets = DataRegistry::debian();
  bool json = false;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--steps") options.stop_at = args.integer(a, 0, kMaxSteps);
    else if (a == "--threads") options.threads = static_cast<int>(args.integer(a, 1, 256));
    else if (a == "--out") out_dir = args.value(a);
    else if (a == "--resume") options.resume = true;
    else if (a == "--json") json = true;
    else if (a == "--dataset") {
      try {
        datasets.add(std::string_view(args.value(a)));
      } catch (const EngineError& e) {
        throw UsageError(e.what());
      }
    }
    else if (!a.empty() && a[0] == '-') throw UsageError("train: unknown option '" + std::string(a) + "'");
    else if (job_path.empty()) job_path = std::string(a);
    else throw UsageError("train: more than one job file given");
  }
  if (job_path.empty()) throw UsageError("train: no job file given");
  options.out_dir = out_dir.empty() ? std::filesystem::path("runs") / job_path.stem() : out_dir;

  const JobSpec job = load_job(job_path, datasets);
  ProgressBar bar(isatty(STDERR_FILENO));
  options.on_step = [&](int64_t step, int64_t total, float loss) { bar.update(step, total, loss); };
  const TrainResult r = run_training(job, options);
  const int64_t steps_run = r.steps - r.resumed_from;

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
        {"checkpoints", r.checkpoint_hashes.size()},
        {"out_dir", options.out_dir.string()},
    };
    std::printf("%s\n", out.dump().c_str());
  } else {
    fmt::print("job_id           {}\n", to_hex(r.job_id));
    fmt::print("dataset_root     {}\n", to_hex(r.dataset_root));
    fmt::print("steps            {} (stride {}, {} checkpoints in {})\n", r.steps, r.stride, r.checkpoint_hashes.size(),
               options.out_dir.string());
    fmt::print("loss             {:.4f} -> {:.4f}\n", r.loss_first, r.loss_last);
    if (job.model.kind == ModelKind::Gpt) {
      if (r.validation_loss >= 0)
        fmt::print("validation loss  {:.4f} nats/byte (unigram entropy of the training bytes {:.4f})\n",
                   r.validation_loss, r.unigram_entropy);
      else
        fmt::print("validation loss  (no held-out windows; unigram entropy {:.4f})\n", r.unigram_entropy);
    } else {
      fmt::print("test accuracy    {:.4f}\n", r.test_accuracy);
    }
    fmt::print("final_state_hash {}\n", to_hex(r.final_state_hash));
    fmt::print("trajectory_root  {}\n", to_hex(r.trajectory_root));
    fmt::print("time             {:.2f} s training ({:.4f} s/step) on {} thread(s), {:.2f} s loading data, {:.2f} s "
               "evaluating\n",
               r.seconds, steps_run > 0 ? r.seconds / static_cast<double>(steps_run) : 0.0, r.threads, r.load_seconds,
               r.eval_seconds);
  }
  return 0;
}

}  // namespace tribunal::cli
