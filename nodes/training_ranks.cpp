#include "nodes/training_ranks.h"

#include <cstdint>
#include <cstring>

#include "engine/dataset.h"

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

void TrainingRanks::follow(const ProviderConfig& config) {
  for (std::string text = receive(); !text.empty(); text = receive()) {
    JobSpec job = parse_job(text, "submitted job");
    locate_data(job, config.datasets);
    TrainOptions o;
    o.threads = config.threads;
    o.evaluate = false;
    o.fault = config.fault;  // every rank runs the same program: a cheater's ranks share its fault
    o.world = &world_;
    run_training(job, o);  // no out_dir: rank 0 alone writes the checkpoints
  }
}

void TrainingRanks::stop() {
  std::lock_guard lock(mu_);
  send("");
}

}  // namespace tribunal::nodes
