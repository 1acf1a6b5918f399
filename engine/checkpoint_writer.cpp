#include "engine/checkpoint_writer.h"

#include <cstring>

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

namespace {

/// to = from, tensor by tensor, into to's storage where it is large enough (Tensor::reshape_storage).
void copy_state(const State& from, State& to, ThreadPool* pool) {
  constexpr int64_t kGrain = int64_t{1} << 18;  // floats: 1 MiB a thread at least
  to.tensors.resize(from.tensors.size());
  for (size_t i = 0; i < from.tensors.size(); ++i) {
    const Tensor& src = from.tensors[i];
    Tensor& dst = to.tensors[i];
    dst.reshape_storage(src.shape());
    const float* s = src.data();
    float* d = dst.data();
    const auto copy = [s, d](int64_t b, int64_t e) {
      std::memcpy(d + b, s + b, static_cast<size_t>(e - b) * sizeof(float));
    };
    if (pool)
      pool->parallel_for(src.numel(), copy, kGrain);
    else
      copy(0, src.numel());
  }
}

}  // namespace

void CheckpointWriter::submit(const State& state, ThreadPool* pool) {
  State copy;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return queue_.size() < max_pending_ || error_; });
    if (error_) std::rethrow_exception(error_);
    if (spare_) {
      copy = std::move(*spare_);
      spare_.reset();
    }
  }
  // Outside the lock, so the worker goes on hashing and writing; training goes on mutating its state.
  copy_state(state, copy, pool);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(copy));
  }
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
      spare_ = std::move(state);  // one spare: a state's worth of memory held between checkpoints
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
