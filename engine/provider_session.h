// A provider's side of one dispute over signed envelopes: it learns the dispute from the client's
// DisputeOpen (forwarded by the referee), checks that its own signed claim is in it, and answers
// the referee's queries from its checkpoints with a DisputeResponder. Transport-agnostic.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "engine/dispute.h"
#include "protocol/wire.h"

namespace tribunal {

class ProviderDisputeSession {
 public:
  /// `open` is the DisputeOpen envelope. Throws ProtocolError if none of its claims is signed by
  /// `key` or its claims are for another job than `job_id`. `train` and `pool` must outlive this.
  ProviderDisputeSession(const KeyPair& key, const Envelope& open, const JobSpec& job, const Digest& job_id,
                         const Dataset& train, std::filesystem::path store, ThreadPool& pool, Fault fault = {});

  /// A query from the referee → the answer envelopes. Envelopes for another dispute, not queries, or
  /// with a stale sequence number are refused with ProtocolError (nothing is answered).
  std::vector<std::vector<uint8_t>> on_envelope(const Envelope& env);

  const Digest& dispute_id() const { return dispute_id_; }
  int party() const { return party_; }

 private:
  KeyPair key_;
  Digest dispute_id_{};
  int party_ = 0;
  PublicKey referee_{};
  bool referee_known_ = false;
  uint64_t last_sequence_ = 0;
  uint64_t sequence_ = 0;
  DisputeResponder responder_;
};

}  // namespace tribunal
