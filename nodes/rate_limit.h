// Per-source rate limiting of a node's plain HTTP requests (docs/running.md, "Monitoring"): a token
// bucket per peer address, so that one source cannot make a node spend its time on pages and scrapes.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace tribunal::nodes {

/// The bucket each source gets: `burst` requests at once, then one more per `refill`.
struct RateLimit {
  size_t burst = 30;                      ///< requests a source may make at once (bucket size)
  std::chrono::milliseconds refill{200};  ///< one request's token comes back after this (5/s)
  size_t max_sources = 65536;             ///< sources tracked; beyond, the rest share one bucket
};

/// Token buckets by source address. Thread-safe. A source's bucket is forgotten once full again, so
/// what is held is bounded by the sources active within burst × refill (and by max_sources).
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  /// Throws std::invalid_argument when `limit.burst` is 0 or `limit.refill` is not positive.
  explicit RateLimiter(RateLimit limit);

  /// Takes one token of `source` (an address, without port) at `now`: nullopt when granted, else how
  /// long until its next token (≥ 1 ms), for the refusal's Retry-After.
  std::optional<std::chrono::milliseconds> take(const std::string& source,
                                                Clock::time_point now = Clock::now());

  /// Sources whose bucket is not full now (tracked).
  size_t tracked();

 private:
  struct Bucket {
    double tokens;              // in [0, burst]
    Clock::time_point updated;  // when `tokens` was computed
  };
  void refill(Bucket& b, Clock::time_point now) const;
  void forget_full(Clock::time_point now);

  RateLimit limit_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
  Clock::time_point last_sweep_{};
};

/// "address:port", "[v6]:port" or an address alone → the address: the source a request is counted by.
std::string source_address(const std::string& remote);

}  // namespace tribunal::nodes
