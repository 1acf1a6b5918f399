// Checkpoint commitment overhead: the default job trained with commitments (state hashes at every
// stride step + safetensors checkpoint files) vs without, in one run. Prints one JSON object.
//
//   bench_commit [JOB.toml] [--threads K] [--repeats R]
//
// The issue's target: ratio = with / without ≤ 1.05 at the job's default stride.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "engine/trainer.h"

using namespace tribunal;

int main(int argc, char** argv) {
  std::filesystem::path job_path =
      std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/fashion_mlp.toml";
  int threads = 1, repeats = 3;
  CLI::App app(
      "Checkpoint commitment overhead: a job trained with and without commitments; prints one JSON object.",
      "bench_commit");
  app.add_option("job", job_path, "the job file")
      ->type_name("JOB.toml")
      ->default_str("scenarios/jobs/fashion_mlp.toml");
  app.add_option("--threads", threads, "training threads [1, 256]")
      ->type_name("K")
      ->capture_default_str()
      ->check(CLI::Range(1, 256).description(""));
  app.add_option("--repeats", repeats, "runs of each side, the best counts [1, 1000]")
      ->type_name("R")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000).description(""));
  bench::parse_command_line(app, argc, argv);
  const JobSpec job = load_job(job_path);
  const auto out = std::filesystem::temp_directory_path() / "tribunal-bench-commit";

  double best_with = 1e30, best_without = 1e30;
  size_t checkpoints = 0;
  for (int r = 0; r < repeats; ++r) {
    // Alternate the order so neither side always runs on a warmer machine.
    for (int side = 0; side < 2; ++side) {
      const bool with = (side + r) % 2 == 0;
      std::filesystem::remove_all(out);
      TrainOptions o;
      o.threads = threads;
      o.evaluate = false;
      o.commit = with;
      if (with) o.out_dir = out;
      const TrainResult res = run_training(job, o);
      if (with) {
        best_with = std::min(best_with, res.seconds);
        checkpoints = res.checkpoint_hashes.size();
      } else {
        best_without = std::min(best_without, res.seconds);
      }
    }
  }
  std::filesystem::remove_all(out);
  const nlohmann::json j = {{"bench", "commit_overhead"},
                            {"job", job_path.filename().string()},
                            {"steps", job.steps},
                            {"stride", job.stride},
                            {"checkpoints", checkpoints},
                            {"threads", threads},
                            {"repeats", repeats},
                            {"seconds_with_commitments", best_with},
                            {"seconds_without_commitments", best_without},
                            {"ratio", best_with / best_without},
                            {"target_ratio_max", 1.05}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
