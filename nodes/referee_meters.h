// The referee node's series in its MetricsRegistry (docs/running.md, "Monitoring"), and what one
// dispute cost the referee.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nodes/metrics.h"
#include "referee/referee_dispute.h"

namespace tribunal::nodes {

/// What one dispute cost the referee.
struct DisputeStats {
  uint64_t bytes_in = 0;   ///< envelopes received from the providers
  uint64_t bytes_out = 0;  ///< envelopes sent to the providers and the client
  double cpu_seconds = 0;  ///< CPU time of the referee's dispute handling (thread CPU clock)
  double seconds = 0;      ///< wall time from opening to verdict
  uint64_t refused =
      0;  ///< provider frames refused: undecodable, badly signed, stale, or refused by the game
  uint64_t reconnects = 0;  ///< provider connections re-established after the first one
};

/// A verdict's outcome as tribunal_referee_verdicts_total labels it: "one_claim_stands" (exactly one
/// claim stands: the verdict agrees with one claim), "no_claim_stands", "both_claims_stand" or
/// "undecided" (is_undecided(reason): no one convicted).
const char* verdict_outcome(const Verdict& v);

/// Bucket bounds of tribunal_referee_handling_seconds (seconds): 0.5 ms to 10 s, finer than
/// latency_buckets() around the tens of milliseconds a loaded referee takes.
std::vector<double> handling_buckets();

/// The tribunal_referee_* series, registered in the registry given to the constructor (which must
/// outlive it). Counters and histograms are thread-safe (nodes/metrics.h).
struct RefereeMeters {
  explicit RefereeMeters(MetricsRegistry& m);

  /// Adds a decided dispute: its verdict's reason, rounds, and `stats` to the sums. Called once per
  /// decided dispute, before anyone gets its verdict (so a scrape after a client has its verdict
  /// counts it).
  void decided(const RefereeDispute& dispute, const DisputeStats& stats);

  Counter& opened;     ///< new openings admitted
  Counter& refused;    ///< openings refused
  Counter& suspended;  ///< disputes suspended by a store failure
  std::map<VerdictReason, Counter*> decided_by;
  /// tribunal_referee_verdicts_total by verdict_outcome() (op-dispute-mon's games by agreement).
  std::map<std::string, Counter*> by_outcome;
  Histogram& rounds;
  Histogram& cpu;
  Histogram& duration;
  Counter& bytes_in;
  Counter& bytes_out;
  Counter& frames_refused;
  Counter& reconnects;
  Histogram& answer_latency;  ///< question sent → first message of its accepted answer (seconds)
  /// The referee's own latency: a provider frame's arrival → the write of a question it caused
  /// (seconds; one observation per question; handling_buckets()).
  Histogram& handling_latency;
  Histogram& commit_latency;  ///< one durable store commit (seconds)
};

}  // namespace tribunal::nodes
