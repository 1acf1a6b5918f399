#include "nodes/referee_meters.h"

namespace tribunal::nodes {

RefereeMeters::RefereeMeters(MetricsRegistry& m)
    : opened(m.counter("tribunal_referee_disputes_opened_total", "Disputes admitted (new openings).")),
      refused(m.counter("tribunal_referee_disputes_refused_total",
                        "Openings refused: invalid, over the cost limits or the admission caps.")),
      suspended(m.counter("tribunal_referee_disputes_suspended_total",
                          "Disputes suspended by a store failure (kept in the store, resumable).")),
      rounds(m.histogram("tribunal_referee_dispute_rounds", "Question rounds of each decided dispute.",
                         {4, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128})),
      cpu(m.histogram("tribunal_referee_dispute_cpu_seconds",
                      "CPU time the referee spent on each decided dispute (its worker threads).",
                      {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
      duration(m.histogram("tribunal_referee_dispute_seconds",
                           "Wall time from opening to verdict of each decided dispute.", latency_buckets())),
      bytes_in(m.counter("tribunal_referee_received_bytes_total",
                         "Envelope bytes received from providers and clients by decided disputes.")),
      bytes_out(m.counter("tribunal_referee_sent_bytes_total",
                          "Envelope bytes sent to providers and clients by decided disputes.")),
      frames_refused(
          m.counter("tribunal_referee_frames_refused_total",
                    "Provider frames refused (undecodable, badly signed, stale, refused by the game) by "
                    "decided disputes.")),
      reconnects(m.counter("tribunal_referee_provider_reconnects_total",
                           "Provider connections re-established during disputes.")),
      answer_latency(
          m.histogram("tribunal_referee_answer_latency_seconds",
                      "From a question sent to a provider to the arrival of the first message of its "
                      "accepted answer.",
                      latency_buckets())),
      handling_latency(m.histogram(
          "tribunal_referee_handling_seconds",
          "The referee's own latency: from the arrival of a provider's frame to the write of a question it "
          "caused (its queues, checks, store commit and write; one observation per question).",
          handling_buckets())),
      commit_latency(m.histogram("tribunal_referee_store_commit_seconds",
                                 "Duration of each durable store commit (one dispute input, written ahead).",
                                 latency_buckets())) {
  for (const VerdictReason r :
       {VerdictReason::WrongOutput, VerdictReason::InconsistentInput, VerdictReason::BadProof,
        VerdictReason::Timeout, VerdictReason::Equivocation, VerdictReason::WrongInitialState,
        VerdictReason::WrongPostState, VerdictReason::RefereeFault, VerdictReason::BadRoundingLog,
        VerdictReason::BothValid})
    decided_by[r] = &m.counter("tribunal_referee_disputes_decided_total",
                               "Disputes decided, by the verdict's reason.", {{"reason", reason_name(r)}});
  for (const char* outcome : {"one_claim_stands", "no_claim_stands", "both_claims_stand", "undecided"})
    by_outcome[outcome] = &m.counter(
        "tribunal_referee_verdicts_total",
        "Disputes decided, by outcome: one claim stands (the verdict agrees with exactly one claim, the "
        "honest one), none stands, both stand, or undecided (no one convicted).",
        {{"outcome", outcome}});
}

std::vector<double> handling_buckets() {
  return {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 10};
}

const char* verdict_outcome(const Verdict& v) {
  if (is_undecided(v.reason)) return "undecided";
  if (v.winners.size() == 1) return "one_claim_stands";
  return v.winners.empty() ? "no_claim_stands" : "both_claims_stand";
}

void RefereeMeters::decided(const RefereeDispute& dispute, const DisputeStats& stats) {
  const Verdict& v = dispute.verdict();
  if (auto it = decided_by.find(v.reason); it != decided_by.end()) it->second->inc();
  by_outcome.at(verdict_outcome(v))->inc();
  rounds.observe(static_cast<double>(dispute.game().rounds()));
  cpu.observe(stats.cpu_seconds);
  duration.observe(stats.seconds);
  bytes_in.inc(static_cast<double>(stats.bytes_in));
  bytes_out.inc(static_cast<double>(stats.bytes_out));
  frames_refused.inc(static_cast<double>(stats.refused));
  reconnects.inc(static_cast<double>(stats.reconnects));
}

}  // namespace tribunal::nodes
