// parity_export JOB.toml OUT.safetensors [--steps N]: writes the parity export of a gpt, cnn or mlp job
// (tools/parity_export.h) — its initial weights and the batches of its first N steps (default: all of
// the job's steps) — for tools/torch_parity.py. Built with the benchmarks (bench/CMakeLists.txt).
#include <cstdio>
#include <exception>
#include <string>

#include "engine/trainer.h"
#include "tools/parity_export.h"

int main(int argc, char** argv) {
  using namespace tribunal;
  if (argc != 3 && !(argc == 5 && std::string(argv[3]) == "--steps")) {
    std::fprintf(stderr, "usage: parity_export JOB.toml OUT.safetensors [--steps N]\n");
    return 2;
  }
  try {
    const JobSpec job = load_job(argv[1]);
    const int64_t steps = argc == 5 ? std::stoll(argv[4]) : job.steps;
    ThreadPool pool(1);
    const Dataset train = load_dataset(job, Split::Train, pool);
    Trainer trainer(job, train, pool);
    parity::write_parity_export(argv[2], trainer, train, steps);
    std::printf("%s: %lld steps of job %s\n", argv[2], static_cast<long long>(steps),
                to_hex(trainer.job_id()).c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parity_export: error: %s\n", e.what());
    return 1;
  }
}
