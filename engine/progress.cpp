#include "engine/progress.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace tribunal {

void ProgressMeter::update(int64_t step, int64_t total, Clock::time_point now) {
  if (!started_) {
    started_ = true;
    first_step_ = step;
    first_time_ = now;
  }
  step_ = step;
  total_ = total;
  now_ = now;
}

bool ProgressMeter::report_due() {
  if (!started_) return false;
  const bool last = step_ >= total_ && !said_last_;
  if (!said_any_ || last || now_ - said_ >= interval_) {
    said_any_ = true;
    said_ = now_;
    said_last_ = said_last_ || step_ >= total_;
    return true;
  }
  return false;
}

double ProgressMeter::steps_per_second() const {
  const double seconds = elapsed().count();
  return seconds > 0 && step_ > first_step_ ? static_cast<double>(step_ - first_step_) / seconds : 0.0;
}

std::optional<std::chrono::duration<double>> ProgressMeter::eta() const {
  const double rate = steps_per_second();
  if (rate <= 0) return std::nullopt;
  return std::chrono::duration<double>(static_cast<double>(std::max<int64_t>(total_ - step_, 0)) / rate);
}

std::string ProgressMeter::line() const {
  const double percent =
      total_ > 0 ? 100.0 * static_cast<double>(step_) / static_cast<double>(total_) : 100.0;
  std::string out = fmt::format("step {}/{} ({:.1f} %)", step_, total_, percent);
  const double rate = steps_per_second();
  if (rate > 0) out += ", " + format_rate(rate);
  out += ", elapsed " + format_duration(elapsed());
  if (const auto left = eta()) out += ", ETA " + format_duration(*left);
  return out;
}

std::string format_rate(double steps_per_second) {
  return steps_per_second >= 100 ? fmt::format("{:.0f} steps/s", steps_per_second)
                                 : fmt::format("{:.3g} steps/s", steps_per_second);
}

std::string format_duration(std::chrono::duration<double> d) {
  const double s = std::max(0.0, d.count());
  if (s < 60) return fmt::format("{:.1f} s", s);
  const auto whole = static_cast<int64_t>(std::llround(s));
  if (whole < 3600) return fmt::format("{}:{:02}", whole / 60, whole % 60);
  return fmt::format("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60);
}

}  // namespace tribunal
