// bench_load's view of the referee process from /proc: resident memory, its high-water mark and CPU
// time, read once (sample_proc) or polled in the background for the peak (PeakRss).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace tribunal::load_bench {

/// One reading of /proc/PID/status and /proc/PID/stat.
struct ProcSample {
  uint64_t rss_kib = 0;    ///< VmRSS, KiB
  uint64_t hwm_kib = 0;    ///< VmHWM (peak resident set since start), KiB
  double cpu_seconds = 0;  ///< user + system CPU time, seconds
  /// minflt (proc(5)): page faults served without I/O, first touches of fresh pages among them,
  /// which cost ≈ 12 µs each on the VMs of docs/performance.md
  uint64_t minor_faults = 0;
};

/// Reads process `pid`'s figures; zeros for what cannot be read (e.g. the process has gone).
ProcSample sample_proc(pid_t pid);

/// Seconds the threads of process `pid` (those alive now) have spent runnable but waiting for a CPU,
/// from /proc/PID/task/*/schedstat (its second field, ns); 0 when it cannot be read. On a loaded
/// machine this is the time other processes (or the process's own other threads) held its CPU.
double runqueue_wait_seconds(pid_t pid);

/// The peak VmRSS of process `pid`, sampled every 20 ms on a thread of its own until stop().
class PeakRss {
 public:
  explicit PeakRss(pid_t pid);
  ~PeakRss();  ///< stops
  PeakRss(const PeakRss&) = delete;
  PeakRss& operator=(const PeakRss&) = delete;

  /// Starts a new peak from `kib` (a phase's first reading).
  void reset(uint64_t kib) { peak_ = kib; }
  /// The largest VmRSS seen since the last reset, KiB.
  uint64_t peak() const { return peak_; }
  /// Ends the sampling (idempotent).
  void stop();

 private:
  std::atomic<bool> sampling_{true};
  std::atomic<uint64_t> peak_{0};
  std::thread thread_;
};

}  // namespace tribunal::load_bench
