// What the delegate shows while it waits (docs/running.md, "Progress"): each provider's training
// progress from the provider's /metrics, and each dispute's level and round from the referee's
// /disputes.json. Both are read only at the URLs the delegate was configured with (--provider,
// --referee), never at an address a peer sent; what they answer is untrusted and checked before it is
// shown.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "net/tls.h"
#include "protocol/hash.h"

namespace tribunal::nodes {

/// A provider's training as its /metrics says it (the gauges tribunal_provider_training_step,
/// tribunal_provider_training_job_steps and tribunal_provider_training_steps_per_second).
struct TrainingProgress {
  int64_t step = 0;             ///< steps done
  int64_t steps = 0;            ///< the job's steps (T)
  double steps_per_second = 0;  ///< since its training started; 0 while unknown
};

/// The three gauges read from a Prometheus text exposition; nullopt when one is missing, not a finite
/// number, negative, beyond 2^53, or the step is beyond the steps, or none trains (steps 0).
std::optional<TrainingProgress> parse_training_progress(const std::string& metrics_text);

/// "step 120/937, 3.1 steps/s, ETA 4:10" (rate and ETA left out while the rate is 0).
std::string training_progress_text(const TrainingProgress& p);

/// An undecided dispute's game as the referee's /disputes.json says it (referee/report.h
/// DisputeProgress, dispute_list_json).
struct DisputeLevel {
  std::string phase;  ///< e.g. "steps"; [a-z_], at most 32 characters
  int level = 0;      ///< 1, 2 or 3
  uint64_t round = 0;
  std::optional<std::pair<uint64_t, uint64_t>> range;  ///< [lo, hi) in a descent, lo < hi ≤ leaves
  uint64_t leaves = 0;
};

/// The `progress` of dispute `id` in a /disputes.json body; nullopt when the dispute is not listed, not
/// open, has no progress, or the body or its entry is malformed.
std::optional<DisputeLevel> parse_dispute_level(const std::string& disputes_json, const Digest& id);

/// "level 2 (steps), round 5, range [8, 16) of 101" (the range only in a descent).
std::string dispute_level_text(const DisputeLevel& d);

/// Reads and checks what a configured node answers, at most every call (the caller paces it).
class ProgressPoll {
 public:
  /// `timeout`: each GET's, all included. `tls`: the CAs for wss:// URLs (null: the system's).
  explicit ProgressPoll(std::chrono::milliseconds timeout, std::shared_ptr<TlsContext> tls = nullptr)
      : timeout_(timeout), tls_(std::move(tls)) {}

  /// The training progress at provider URL `provider` (ws:// or wss://; GET /metrics there), when it
  /// trains a job of `steps` steps; nullopt when it cannot be read or is about another job. Never throws.
  std::optional<TrainingProgress> training(const std::string& provider, int64_t steps,
                                           std::string* why = nullptr) const;

  /// The level of dispute `id` at referee URL `referee` (GET /disputes.json there); nullopt when it
  /// cannot be read (why says what failed: e.g. a referee without a store answers 404). Never throws.
  std::optional<DisputeLevel> dispute(const std::string& referee, const Digest& id,
                                      std::string* why = nullptr) const;

 private:
  /// The body of GET `path` at `url` if it answered 200 within `limit` bytes; nullopt (and why) if not.
  std::optional<std::string> get(const std::string& url, const char* path, size_t limit,
                                 std::string* why) const;

  std::chrono::milliseconds timeout_;
  std::shared_ptr<TlsContext> tls_;
};

}  // namespace tribunal::nodes
