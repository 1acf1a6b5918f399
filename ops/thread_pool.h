// A fixed-size thread pool that splits independent work by a static partition.
// RepOps rule (docs/numerics.md): threads only ever split *independent* output elements, so the partition
// changes speed, never bits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tribunal {

/// Runs `fn(begin, end)` over a static partition of [0, n) on `threads` threads (the caller is one).
/// Not reentrant: a task must not call parallel_for on the same pool.
///
/// Workers spin briefly before sleeping: a training step issues many short parallel_for calls in a
/// row, and waking a sleeping thread costs tens of microseconds on a VM — as much as a small matmul.
class ThreadPool {
 public:
  /// threads ≥ 1; throws OpError otherwise, and while the environment variable TRIBUNAL_SIMD names
  /// a SIMD path this build or CPU lacks (ops/simd.h: a run makes its pool first, so a bad setting
  /// fails before it loads data, not at its first kernel).
  explicit ThreadPool(int threads = 1);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  /// Splits [0, n) into P = min(size(), n / grain) contiguous ranges [n*i/P, n*(i+1)/P) and runs them
  /// concurrently; returns when all are done. `grain` is the smallest range worth a thread: with
  /// n < 2*grain everything runs on the caller. An exception thrown by `fn` on any thread is rethrown
  /// here (the first one, after every range has finished).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

 private:
  void worker_loop(int index);
  void run_part(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_start_, cv_done_;
  // The current job; written by the caller before generation_ is bumped (release), read after.
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;  // guarded by mu_
};

}  // namespace tribunal
