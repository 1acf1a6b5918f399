// How a provider node's answers leave it: scenario scripts (scenarios/behaviour.h) turn honest nodes
// into liars, slow or silent peers and faulty links by rewriting them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "protocol/wire.h"

namespace tribunal::nodes {

/// What a provider sends in reply to one query of the referee. The honest node sends its answer
/// envelopes at once; scenario scripts (scenarios/behaviour.h) turn nodes into liars, slow or
/// silent peers and faulty links by rewriting this.
struct ProviderReply {
  std::vector<std::vector<uint8_t>> frames;  ///< sent in order (any bytes: may be malformed)
  std::chrono::milliseconds delay{0};        ///< wait this long after the query arrived, then send
  uint64_t bytes_per_second = 0;  ///< pace the frames at this rate (0: as fast as the link takes them)
  bool disconnect = false;        ///< close the connection after sending
};

/// The query being answered, for a reply filter.
struct QueryContext {
  const Envelope& open;                         ///< the dispute's DisputeOpen (as the referee forwarded it)
  const Envelope& query;                        ///< the referee's Query envelope
  std::chrono::steady_clock::duration compute;  ///< how long the node took to compute its answer
};

/// Rewrites the reply to one query; `answers` are the node's own signed answer envelopes.
using ReplyFilter =
    std::function<ProviderReply(const QueryContext&, std::vector<std::vector<uint8_t>> answers)>;

/// Rewrites one chunk of a delivered final state before the node signs it (docs/protocol.md,
/// "Delivery"): tests and scenarios make a provider serve other bytes than it committed to. The honest
/// node has none.
using DeliveryFilter = std::function<void(TensorChunk& chunk)>;

}  // namespace tribunal::nodes
