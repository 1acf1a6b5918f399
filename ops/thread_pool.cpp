#include "ops/thread_pool.h"

#include <algorithm>
#include <string>

#include "ops/simd.h"
#include "ops/tensor.h"

namespace tribunal {
namespace {

// How long a thread spins before it sleeps (iterations of a pause instruction, ~50-100 µs).
constexpr int kSpinIterations = 20000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

// Spins until pred() or the spin budget runs out; returns pred().
template <class Pred>
bool spin_until(Pred pred) {
  for (int i = 0; i < kSpinIterations; ++i) {
    if (pred()) return true;
    cpu_relax();
  }
  return pred();
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads < 1) throw OpError("thread count must be at least 1, got " + std::to_string(threads));
  active_simd_path();  // throws for a bad TRIBUNAL_SIMD: see the header
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

void ThreadPool::run_part(int index) {
  const int64_t b = job_n_ * index / job_parts_, e = job_n_ * (index + 1) / job_parts_;
  if (b >= e) return;
  try {
    (*job_)(b, e);
  } catch (...) {
    std::lock_guard lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto ready = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(ready)) {
      std::unique_lock lock(mu_);
      cv_start_.wait(lock, ready);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    if (index < job_parts_) run_part(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mu_);  // pairs with the caller's predicate check: no lost wakeup
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  const int parts =
      static_cast<int>(std::min<int64_t>(size(), std::max<int64_t>(1, n / std::max<int64_t>(grain, 1))));
  if (parts <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_parts_ = parts;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  {
    std::lock_guard lock(mu_);  // sleeping workers re-check generation_ under this lock
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_start_.notify_all();
  run_part(0);
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock lock(mu_);
    cv_done_.wait(lock, done);
  }
  std::lock_guard lock(mu_);
  std::exception_ptr error = error_;
  error_ = nullptr;
  if (error) std::rethrow_exception(error);
}

}  // namespace tribunal
