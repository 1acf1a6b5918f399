// A CPU-time budget per source for the referee's handling of openings (docs/protocol.md, "Threat
// model"): a token bucket of CPU time per client network or trusted client key, so that strangers'
// openings cannot take the workers that admitted disputes run on.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace tribunal::nodes {

/// The bucket each source gets.
struct CpuBudgetOptions {
  /// CPU time a source's openings may spend at once (the bucket's size); 0 turns the budget off.
  std::chrono::milliseconds burst{5000};
  /// CPU time given back per second of wall time (a fraction of one core, > 0).
  double refill_per_second = 0.25;
};

/// Token buckets of CPU time by source. Thread-safe. An opening is handled while its source's
/// balance is positive; what it then costs (measured afterwards, on the thread CPU clock) is
/// charged, so the balance may go into debt by one opening's cost, which bounds what one source can
/// take: `burst` plus `refill_per_second` of a core, plus one opening (itself bounded by the cost
/// limits). A source whose bucket is full again is forgotten, so what is held is bounded by the
/// sources that spent within the last (burst + one opening) ÷ refill seconds.
class CpuBudget {
 public:
  using Clock = std::chrono::steady_clock;

  /// Throws std::invalid_argument when `options.refill_per_second` is not positive or burst < 0.
  explicit CpuBudget(CpuBudgetOptions options);

  /// nullopt when `source` may spend now; else how long until its balance is positive again (≥ 1 ms).
  std::optional<std::chrono::milliseconds> wait(const std::string& source,
                                                Clock::time_point now = Clock::now());

  /// Charges `used` CPU time to `source`.
  void charge(const std::string& source, std::chrono::nanoseconds used, Clock::time_point now = Clock::now());

  const CpuBudgetOptions& options() const { return options_; }

  /// Sources tracked now (those whose bucket is not full).
  size_t tracked();

 private:
  struct Bucket {
    double seconds;             // in (−∞, burst]
    Clock::time_point updated;  // when `seconds` was computed
  };
  void refill(Bucket& b, Clock::time_point now) const;

  CpuBudgetOptions options_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
  Clock::time_point last_sweep_{};
};

}  // namespace tribunal::nodes
