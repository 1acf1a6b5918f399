#include "nodes/rate_limit.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tribunal::nodes {

namespace {
// Beyond max_sources, every untracked source is counted in this one bucket: a flood of addresses
// shares one budget instead of growing the map.
const std::string kOverflow = "(other sources)";
}  // namespace

RateLimiter::RateLimiter(RateLimit limit) : limit_(limit) {
  if (limit_.burst == 0) throw std::invalid_argument("rate limit: the burst must be at least 1 request");
  if (limit_.refill <= std::chrono::milliseconds::zero())
    throw std::invalid_argument("rate limit: the refill interval must be positive");
}

void RateLimiter::refill(Bucket& b, Clock::time_point now) const {
  if (now <= b.updated) return;
  const double gained =
      std::chrono::duration<double>(now - b.updated) / std::chrono::duration<double>(limit_.refill);
  b.tokens = std::min(static_cast<double>(limit_.burst), b.tokens + gained);
  b.updated = now;
}

// Drops the buckets that have filled up again (a source that came back would get a full one anyway).
void RateLimiter::forget_full(Clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    refill(it->second, now);
    it = it->second.tokens >= static_cast<double>(limit_.burst) ? buckets_.erase(it) : std::next(it);
  }
  last_sweep_ = now;
}

std::optional<std::chrono::milliseconds> RateLimiter::take(const std::string& source, Clock::time_point now) {
  std::lock_guard lock(mu_);
  // A sweep at most once per full refill of a bucket keeps the cost amortized O(log n) per request.
  if (now - last_sweep_ >= limit_.refill * static_cast<long>(limit_.burst)) forget_full(now);
  auto it = buckets_.find(source);
  if (it == buckets_.end()) {
    if (buckets_.size() >= limit_.max_sources && now - last_sweep_ >= limit_.refill) forget_full(now);
    const std::string& key = buckets_.size() >= limit_.max_sources ? kOverflow : source;
    it = buckets_.try_emplace(key, Bucket{static_cast<double>(limit_.burst), now}).first;
  }
  Bucket& b = it->second;
  refill(b, now);
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::nullopt;
  }
  const double missing = 1 - b.tokens;
  const auto wait = std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(missing * static_cast<double>(limit_.refill.count()))));
  return std::max(wait, std::chrono::milliseconds(1));
}

size_t RateLimiter::tracked() {
  std::lock_guard lock(mu_);
  return buckets_.size();
}

std::string source_address(const std::string& remote) {
  if (!remote.empty() && remote.front() == '[') {
    const size_t close = remote.find(']');
    return close == std::string::npos ? remote : remote.substr(1, close - 1);
  }
  const size_t colon = remote.rfind(':');
  // One colon: IPv4 "address:port"; several: an IPv6 address without brackets (no port).
  if (colon == std::string::npos || remote.find(':') != colon) return remote;
  return remote.substr(0, colon);
}

}  // namespace tribunal::nodes
