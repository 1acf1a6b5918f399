#include "nodes/training_ranks.h"

#include <cstdint>
#include <cstring>

#include "engine/dataset.h"

#include <fmt/format.h>

namespace tribunal::nodes {

void TrainingRanks::send(const std::string& text) {
  uint64_t length = text.size();
  world_.broadcast(std::as_writable_bytes(std::span(&length, 1)));
  std::string copy = text;
  if (length > 0) world_.broadcast(std::as_writable_bytes(std::span(copy.data(), copy.size())));
}

std::string TrainingRanks::receive() {
  uint64_t length = 0;
  world_.broadcast(std::as_writable_bytes(std::span(&length, 1)));
  std::string text(length, '\0');
  if (length > 0) world_.broadcast(std::as_writable_bytes(std::span(text.data(), text.size())));
  return text;
}

TrainResult TrainingRanks::lead(const std::string& job_toml, const JobSpec& job, TrainOptions options) {
  std::lock_guard lock(mu_);
  send(job_toml);
  options.world = &world_;
  return run_training(job, options);
}

void TrainingRanks::follow(const ProviderConfig& config, const Logger& log) {
  for (std::string text = receive(); !text.empty(); text = receive()) {
    try {
      JobSpec job;
      try {
        job = parse_job(text, "submitted job");
        locate_data(job, config.datasets);
      } catch (const std::exception& e) {
        world_.fail(e.what());  // rank 0 is in run_training's first collective: it learns it there
      }
      TrainOptions o;
      o.threads = config.threads;
      o.evaluate = false;
      o.policy = config.policy;  // every rank runs the same program: a cheater's ranks share its policy
      o.world = &world_;
      run_training(job, o);  // no out_dir: rank 0 alone writes the checkpoints
    } catch (const RankFailure& e) {
      // Every rank threw it from the same collective: they are in step for the next job.
      log->error(fmt::format("provider rank {} of {}: the job failed on every rank: {}", world_.rank(),
                             world_.size(), e.what()));
    }
  }
}

void TrainingRanks::stop() {
  std::lock_guard lock(mu_);
  send("");
}

}  // namespace tribunal::nodes
