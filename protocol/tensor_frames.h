// The sender's side of a streamed tensor (docs/protocol.md, "Messages"): a tensor's chunks as
// TensorChunk frames, runs of up to kMaxFrameChunks consecutive chunks each with one range proof of
// the tensor's chunk tree (docs/commitments.md, "Range proofs"). An opening for the referee, a rounding
// log for an auditor and a final state for the client are all cut here; chunk_check.h is the
// receiver's side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "protocol/messages.h"
#include "protocol/tensor_hash.h"

namespace tribunal {

/// Calls `send` with the frames of one tensor (dtype, shape, element bytes as committed), in chunk
/// order: each run of consecutive chunks for which `wanted(chunk)` holds (every chunk when `wanted`
/// is empty; a re-ask names only the missing ones), cut into frames of at most kMaxFrameChunks
/// chunks. Frames carry `round` and `value`. Stops early when `send` returns false. Hashes the tensor
/// once (its chunk tree) before the first frame.
void for_each_tensor_frame(uint32_t round, uint32_t value, DType dtype, std::span<const int64_t> shape,
                           std::span<const std::byte> bytes,
                           const std::function<bool(uint64_t chunk)>& wanted,
                           const std::function<bool(TensorChunk&&)>& send);

}  // namespace tribunal
