// What a training run records besides its checkpoints, for cheap audits of its work (Lab Apex,
// "Ensuring Verifiable and Secure Outsourced Training of Deep Neural Networks", 2023; docs/verifiers.md):
// the loss of every step and a CPU-utilisation sample per step. `tribunal train` (and the provider,
// through run_training) writes both into its run directory:
//   losses.csv     "step,loss"                         one line per step t: the loss of step t (the
//                                                       loss state t+1 records), float32 printed exactly
//   resources.csv  "step,wall_seconds,cpu_seconds,utilisation"
//                  one line per step: the step's wall time, the process's CPU time over it (every
//                  thread), and min(1, cpu / (wall × training threads)) (the checkpoint writer's
//                  thread can add CPU time to a step)
// Nothing here is committed or checked by a dispute: a provider may write any numbers (that is what
// the audits' cheaters do).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <vector>

namespace tribunal {

/// The loss of one step.
struct LossRecord {
  int64_t step = 0;
  float loss = 0;
};

/// A resource sample taken over one step.
struct ResourceSample {
  int64_t step = 0;
  std::chrono::duration<double> wall{0};  ///< wall time of the step
  std::chrono::duration<double> cpu{0};   ///< the process's CPU time over the step, all threads
  double utilisation = 0;                 ///< min(1, cpu / (wall × training threads))
};

/// DIR/losses.csv and DIR/resources.csv.
std::filesystem::path loss_log_path(const std::filesystem::path& dir);
std::filesystem::path resource_log_path(const std::filesystem::path& dir);

/// Writes the records (atomically: temp file + rename). Throws EngineError naming the path.
void write_loss_log(const std::filesystem::path& path, const std::vector<LossRecord>& records);
void write_resource_log(const std::filesystem::path& path, const std::vector<ResourceSample>& samples);

/// Appends to DIR/losses.csv and DIR/resources.csv as training goes, one line per step, each line
/// flushed: the logs can be followed while a run trains, and what a stopped or crashed run did is on
/// disk. Construction writes both headers and `earlier` (a resumed run's records before its first
/// step). The lines are the ones write_loss_log and write_resource_log write; a run ends by
/// rewriting both files with those (atomically) after this writer is gone. Throws EngineError naming
/// the file when it cannot be written.
class RunLogAppender {
 public:
  RunLogAppender(const std::filesystem::path& dir, const std::vector<LossRecord>& earlier_losses,
                 const std::vector<ResourceSample>& earlier_samples);
  ~RunLogAppender();
  RunLogAppender(const RunLogAppender&) = delete;
  RunLogAppender& operator=(const RunLogAppender&) = delete;

  /// One step's records.
  void append(const LossRecord& loss, const ResourceSample& sample);

 private:
  std::filesystem::path loss_path_, resource_path_;
  std::FILE* losses_ = nullptr;
  std::FILE* resources_ = nullptr;
};

/// Reads a file written as above. A missing file gives an empty list (a run without logs); a line
/// that does not parse throws EngineError("<path>:<line>: …"). Steps are returned as written (an
/// audit checks their count, order and duplicates).
std::vector<LossRecord> read_loss_log(const std::filesystem::path& path);
std::vector<ResourceSample> read_resource_log(const std::filesystem::path& path);

/// The CPU time this process has used so far, all threads (CLOCK_PROCESS_CPUTIME_ID).
std::chrono::duration<double> process_cpu_time();

/// Measures one step: made when the step starts, `done` when it ends gives its ResourceSample.
class StepMeter {
 public:
  explicit StepMeter(int64_t step)
      : step_(step), wall0_(std::chrono::steady_clock::now()), cpu0_(process_cpu_time()) {}
  /// The sample, utilisation over `threads` training threads.
  ResourceSample done(int threads) const;

 private:
  int64_t step_;
  std::chrono::steady_clock::time_point wall0_;
  std::chrono::duration<double> cpu0_;
};

}  // namespace tribunal
