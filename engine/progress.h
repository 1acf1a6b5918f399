// A training run's progress as people read it: steps per second, time elapsed, time left, and when to
// say so again. `tribunal train` draws it as a bar on a terminal or logs it as lines, and the provider
// logs it while it trains a submitted job (docs/running.md, "Progress").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace tribunal {

/// Counts steps against wall time from the first step it sees (the data set's loading and a resumed
/// run's earlier steps are not in the rate).
class ProgressMeter {
 public:
  using Clock = std::chrono::steady_clock;

  /// `interval`: how often report_due says yes (0: every step).
  explicit ProgressMeter(std::chrono::milliseconds interval = std::chrono::seconds(10))
      : interval_(interval) {}

  /// Records that the state reached `step` of `total` at `now`.
  void update(int64_t step, int64_t total, Clock::time_point now = Clock::now());
  /// Whether a progress line is due after the last update: the first step, then once per interval,
  /// and the last step (step == total). Marks it said when yes.
  bool report_due();

  int64_t step() const { return step_; }
  int64_t total() const { return total_; }
  /// Steps per second since the first update; 0 before a second step is seen.
  double steps_per_second() const;
  /// Wall time since the first update.
  std::chrono::duration<double> elapsed() const { return now_ - first_time_; }
  /// Time left at the current rate; empty while the rate is unknown.
  std::optional<std::chrono::duration<double>> eta() const;

  /// "step 913/937 (97.4 %), 12.3 steps/s, elapsed 1:14, ETA 0:02" (rate and ETA left out while
  /// unknown).
  std::string line() const;

 private:
  std::chrono::milliseconds interval_;
  bool started_ = false, said_any_ = false, said_last_ = false;
  int64_t first_step_ = 0, step_ = 0, total_ = 0;
  Clock::time_point first_time_{}, now_{}, said_{};
};

/// "2410 steps/s", "12.3 steps/s", "0.25 steps/s": three significant digits, no exponent.
std::string format_rate(double steps_per_second);

/// A duration as "S.s s" under a minute, "M:SS" under an hour, else "H:MM:SS".
std::string format_duration(std::chrono::duration<double> d);

}  // namespace tribunal
