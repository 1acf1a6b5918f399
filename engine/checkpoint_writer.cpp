#include "engine/checkpoint_writer.h"

namespace tribunal {

CheckpointWriter::CheckpointWriter(const JobSpec& job, const Digest& job_id, std::filesystem::path out_dir,
                                   size_t max_pending)
    : job_(job), job_id_(job_id), out_dir_(std::move(out_dir)), max_pending_(max_pending), worker_([this] {
        run();
      }) {}

CheckpointWriter::~CheckpointWriter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void CheckpointWriter::submit(const State& state) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.size() < max_pending_ || error_; });
  if (error_) std::rethrow_exception(error_);
  queue_.push_back(state);  // the copy: training goes on mutating its own state
  cv_.notify_all();
}

std::map<int64_t, Digest> CheckpointWriter::finish() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || error_; });
  if (error_) std::rethrow_exception(error_);
  return hashes_;
}

void CheckpointWriter::run() {
  ThreadPool pool(1);
  for (;;) {
    State state;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      state = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    cv_.notify_all();
    try {
      const Digest h = state_hash(state, pool);
      if (!out_dir_.empty())
        save_checkpoint(checkpoint_path(out_dir_, state.step()), job_, state, job_id_, h);
      std::lock_guard lock(mu_);
      hashes_[state.step()] = h;
    } catch (...) {
      std::lock_guard lock(mu_);
      if (!error_) error_ = std::current_exception();
      queue_.clear();
    }
    {
      std::lock_guard lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

}  // namespace tribunal
