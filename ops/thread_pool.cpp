#include "ops/thread_pool.h"

#include <algorithm>
#include <string>

#include "ops/tensor.h"

namespace tribunal {

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) throw OpError("thread count must be at least 1, got " + std::to_string(threads));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_start_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int64_t, int64_t)>* job;
    int64_t n;
    int parts;
    {
      std::unique_lock lock(mu_);
      cv_start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (index < parts) {
      int64_t b = n * index / parts, e = n * (index + 1) / parts;
      if (b < e) {
        try {
          (*job)(b, e);
        } catch (...) {
          std::lock_guard lock(mu_);
          if (!error_) error_ = std::current_exception();
        }
      }
    }
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int parts = static_cast<int>(std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  cv_start_.notify_all();
  std::exception_ptr mine;
  try {
    fn(0, n / parts);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  std::exception_ptr error = mine ? mine : error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

}  // namespace tribunal
