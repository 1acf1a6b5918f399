#include "dispute/provider_session.h"

#include <algorithm>

#include <fmt/format.h>

namespace tribunal {
namespace {

// Which claim of the opening is ours (throws if none).
int own_party(const KeyPair& key, const DisputeOpen& d, const Digest& job_id) {
  int party = -1;
  for (size_t p = 0; p < d.claims.size(); ++p) {
    const Envelope c = open_envelope(d.claims[p]);
    if (c.kind != MessageKind::Claim || std::get<Claim>(c.body).job_id != job_id)
      throw ProtocolError("dispute opening: a claim is not a Claim for this job");
    if (c.sender == key.public_key) party = static_cast<int>(p);
  }
  if (party < 0) throw ProtocolError("dispute opening: none of its claims is ours");
  return party;
}

}  // namespace

ProviderDisputeSession::ProviderDisputeSession(const KeyPair& key, const Envelope& open, const JobSpec& job,
                                               const Dataset& train, std::filesystem::path store,
                                               ThreadPool& pool, std::vector<PublicKey> referees,
                                               StepPolicyPtr policy)
    : key_(key),
      dispute_id_(open.context),
      party_(open.kind == MessageKind::DisputeOpen
                 ? own_party(key, std::get<DisputeOpen>(open.body), job_id(job, train))
                 : throw ProtocolError("expected a DisputeOpen message")),
      referees_(std::move(referees)),
      responder_(job, train, std::move(store), pool, std::move(policy)) {
  if (tribunal::dispute_id(std::get<DisputeOpen>(open.body)) != dispute_id_)
    throw ProtocolError("dispute opening: it is not addressed to its dispute id");
}

uint64_t ProviderDisputeSession::answer_sequence(uint64_t query_sequence, uint64_t k) {
  if (query_sequence >= (uint64_t{1} << (64 - kAnswerSequenceBits)))
    throw ProtocolError("query sequence number " + std::to_string(query_sequence) +
                        " is too large to answer");
  if (k >= (uint64_t{1} << kAnswerSequenceBits)) throw ProtocolError("an answer of more than 2^20 envelopes");
  return (query_sequence << kAnswerSequenceBits) | k;
}

std::vector<std::vector<uint8_t>> ProviderDisputeSession::on_envelope(const Envelope& env) {
  // Only a referee the operator trusts may make the provider compute or reveal anything.
  if (std::find(referees_.begin(), referees_.end(), env.sender) == referees_.end())
    throw ProtocolError("query signed by a key that is not a trusted referee");
  if (env.context != dispute_id_) throw ProtocolError("query for another dispute");
  if (env.kind != MessageKind::Query) throw ProtocolError("expected a Query");
  // Checked before anything is computed: an answer must be able to carry its sequence numbers.
  answer_sequence(env.sequence, 0);
  // The first query fixes the referee's key; every later one must come from the same referee.
  if (referee_known_ && env.sender != referee_) throw ProtocolError("query signed by another referee");
  if (env.sequence <= last_sequence_) throw ProtocolError("stale sequence number (replay)");
  referee_ = env.sender;
  referee_known_ = true;
  last_sequence_ = env.sequence;
  const std::vector<Body> bodies = responder_.answer(std::get<Query>(env.body));
  if (!bodies.empty())
    answer_sequence(env.sequence, bodies.size() - 1);  // the count bound, before signing any
  std::vector<std::vector<uint8_t>> out;
  out.reserve(bodies.size());
  for (size_t k = 0; k < bodies.size(); ++k)
    out.push_back(seal(key_, dispute_id_, answer_sequence(env.sequence, k), bodies[k]));
  return out;
}

}  // namespace tribunal
