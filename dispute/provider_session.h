// A provider's side of one dispute over signed envelopes: it learns the dispute from the client's
// DisputeOpen (forwarded by the referee), checks that its own signed claim is in it, and answers the
// queries of a referee it trusts from its checkpoints with a DisputeResponder. Transport-agnostic.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "dispute/responder.h"
#include "protocol/wire.h"

namespace tribunal {

class ProviderDisputeSession {
 public:
  /// `open` is the DisputeOpen envelope; `referees` the referee keys the provider's operator trusts.
  /// Throws ProtocolError if the envelope is not addressed to dispute_id(opening), none of its claims
  /// is signed by `key`, or its claims are for another job than job_id(job, train). `train` and
  /// `pool` must outlive this.
  ProviderDisputeSession(const KeyPair& key, const Envelope& open, const JobSpec& job, const Dataset& train,
                         std::filesystem::path store, ThreadPool& pool, std::vector<PublicKey> referees,
                         StepPolicyPtr policy = {});

  /// A query from the referee → the answer envelopes. Queries not signed by a trusted referee key
  /// (or by another one than the first query's), for another dispute, not queries, or with a stale
  /// sequence number are refused with ProtocolError (nothing is computed or answered). A query
  /// re-sent with a higher sequence number (a resumed referee) is simply answered again. Sequence
  /// numbers are checked per connection (new_connection()); the responder's caches outlive them.
  ///
  /// Answer sequence numbers are derived from the query's, without storage, so that they are
  /// restart-safe: the k-th envelope answering a query of sequence q has sequence
  /// `answer_sequence(q, k)` = q · 2^20 + k. A restarted provider (a new session) answering a
  /// re-sent query thus continues above everything it signed before for earlier queries. Throws
  /// ProtocolError when q ≥ 2^44 or an answer has ≥ 2^20 envelopes.
  std::vector<std::vector<uint8_t>> on_envelope(const Envelope& env);

  /// Bits of an answer's sequence number that count the envelopes of one answer.
  static constexpr int kAnswerSequenceBits = 20;
  /// The sequence number of the k-th envelope answering the query with sequence `query_sequence`.
  static uint64_t answer_sequence(uint64_t query_sequence, uint64_t k);

  /// The session now answers on a new connection (a provider keeps one session per dispute across
  /// connections, for its caches): a referee that reconnects, or restarted without its store, starts
  /// its sequence numbers over there, so sequence numbers are checked per connection, as with a
  /// session per connection. The referee's key stays pinned.
  void new_connection() { last_sequence_ = 0; }

  const Digest& dispute_id() const { return dispute_id_; }
  int party() const { return party_; }

 private:
  KeyPair key_;
  Digest dispute_id_{};
  int party_ = 0;
  std::vector<PublicKey> referees_;
  PublicKey referee_{};
  bool referee_known_ = false;
  uint64_t last_sequence_ = 0;
  DisputeResponder responder_;
};

}  // namespace tribunal
