// The short jobs and their training set for the verifiers' tests, loaded once per process.
#pragma once

#include <filesystem>
#include <string>

#include "engine/dataset.h"
#include "engine/job.h"
#include "engine/trainer.h"
#include "tests/source_dir.h"

namespace tribunal::testing {

inline JobSpec verifier_job(const std::string& file) {
  return load_job(tribunal::testing::source_dir() / "scenarios/jobs" / file);
}

/// The Fashion-MNIST training set of the short MLP jobs.
inline const Dataset& mlp_train_set() {
  static ThreadPool pool(1);
  static const Dataset data = load_dataset(verifier_job("short_mlp.toml"), Split::Train, pool);
  return data;
}

/// Trains `job` honestly into `dir` (the losses and resource samples with the checkpoints).
inline TrainResult train_into(const JobSpec& job, const std::filesystem::path& dir, FastOptions fast = {}) {
  TrainOptions o;
  o.out_dir = dir;
  o.evaluate = false;
  o.train = &mlp_train_set();
  o.fast = fast;
  return run_training(job, o);
}

}  // namespace tribunal::testing
