// A dispute's time terms: what each question may take (docs/protocol.md, "Clocks").
//
// They are part of the job (its [dispute] table, engine/job.h), so both providers sign them in the
// job_id of their claims, the referee reads them from the opening, and `tribunal verify` from the
// verdict: no party can be held to terms it did not agree to.
#pragma once

#include <chrono>
#include <cstdint>

namespace tribunal {

/// How long a question may take a party that meets its budgets: base + steps × step +
/// bytes ÷ min_bytes_per_second (allowance()).
struct DisputeTerms {
  std::chrono::milliseconds base{10'000};   ///< every question: the link's latency, loading, signing
  std::chrono::milliseconds step{30'000};   ///< each training step a question makes the party recompute
  uint64_t min_bytes_per_second = 262'144;  ///< the slowest link an answer must stream over (256 KiB/s)
  bool operator==(const DisputeTerms&) const = default;
};

/// The time a question adds to the asked party's clock: `steps` training steps to recompute and an
/// answer of about `bytes` bytes on the wire. Rounded up to the millisecond.
inline std::chrono::milliseconds allowance(const DisputeTerms& terms, uint64_t steps, uint64_t bytes) {
  const uint64_t transfer_ms = (bytes * 1000 + terms.min_bytes_per_second - 1) / terms.min_bytes_per_second;
  return terms.base + terms.step * static_cast<int64_t>(steps) + std::chrono::milliseconds(transfer_ms);
}

}  // namespace tribunal
