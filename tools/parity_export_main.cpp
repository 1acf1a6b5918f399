// parity_export JOB.toml OUT.safetensors [--steps N] [--model NAME=PATH]... [--dataset NAME=PATH]...:
// writes the parity export of
// a gpt, cnn, mlp or onnx job (tools/parity_export.h) — its initial weights and the batches of its first
// N steps (default: all of the job's steps), and for an onnx job the dropout masks — for
// tools/torch_parity.py. An onnx job's model file is registered with --model and a data set the shipped
// registry lacks (a tensors one) with --dataset, as on a node (`tribunal --model`, `--dataset`). Built with
// the benchmarks (bench/CMakeLists.txt).
#include <cstdio>
#include <exception>
#include <string>

#include "engine/data_registry.h"
#include "engine/trainer.h"
#include "tools/parity_export.h"

int main(int argc, char** argv) {
  using namespace tribunal;
  const auto usage = [] {
    std::fprintf(stderr,
                 "usage: parity_export JOB.toml OUT.safetensors [--steps N] [--model NAME=PATH]... "
                 "[--dataset NAME=PATH]...\n");
    return 2;
  };
  if (argc < 3) return usage();
  try {
    DataRegistry registry = DataRegistry::debian();
    int64_t steps = -1;
    for (int i = 3; i < argc; i += 2) {
      const std::string opt = argv[i];
      if (i + 1 >= argc) return usage();
      if (opt == "--steps")
        steps = std::stoll(argv[i + 1]);
      else if (opt == "--model")
        registry.add_model(std::string_view(argv[i + 1]));
      else if (opt == "--dataset")
        registry.add(std::string_view(argv[i + 1]));
      else
        return usage();
    }
    const JobSpec job = load_job(argv[1], registry);
    if (steps < 0) steps = job.steps;
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
