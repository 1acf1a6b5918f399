#include "nodes/cpu_budget.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tribunal::nodes {
namespace {

double seconds(std::chrono::nanoseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

CpuBudget::CpuBudget(CpuBudgetOptions options) : options_(options) {
  if (!(options_.refill_per_second > 0.0) || !std::isfinite(options_.refill_per_second))
    throw std::invalid_argument(
        "CPU budget: the refill rate must be a positive number of CPU-seconds per second");
  if (options_.burst.count() < 0) throw std::invalid_argument("CPU budget: the burst must not be negative");
}

void CpuBudget::refill(Bucket& b, Clock::time_point now) const {
  if (now > b.updated) b.seconds += seconds(now - b.updated) * options_.refill_per_second;
  b.seconds = std::min(b.seconds, seconds(options_.burst));
  b.updated = std::max(b.updated, now);
}

std::optional<std::chrono::milliseconds> CpuBudget::wait(const std::string& source, Clock::time_point now) {
  if (options_.burst.count() == 0) return std::nullopt;
  std::lock_guard lock(mu_);
  const auto it = buckets_.find(source);
  if (it == buckets_.end()) return std::nullopt;  // a full bucket
  refill(it->second, now);
  if (it->second.seconds > 0.0) return std::nullopt;
  const double until = -it->second.seconds / options_.refill_per_second;
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::milliseconds(static_cast<int64_t>(std::ceil(until * 1000.0)) + 1));
}

void CpuBudget::charge(const std::string& source, std::chrono::nanoseconds used, Clock::time_point now) {
  if (options_.burst.count() == 0) return;
  std::lock_guard lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(source, Bucket{seconds(options_.burst), now});
  refill(it->second, now);
  it->second.seconds -= seconds(used);
  // Forget the sources whose bucket is full again (they are as if never seen), once a second.
  if (now - last_sweep_ < std::chrono::seconds(1)) return;
  last_sweep_ = now;
  for (auto b = buckets_.begin(); b != buckets_.end();) {
    refill(b->second, now);
    b = b->second.seconds >= seconds(options_.burst) ? buckets_.erase(b) : std::next(b);
  }
}

size_t CpuBudget::tracked() {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

}  // namespace tribunal::nodes
