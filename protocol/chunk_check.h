// The checks of one streamed TensorChunk against the tensor leaf it must open (docs/commitments.md,
// "Tensor leaves"; docs/protocol.md, "The game" and "Delivery"). The referee's OpenInputs round
// (input_opening.h) and the client's delivery of a final state (state_delivery.h) both run them, so a
// chunk is proven one way wherever it travels: its header (shape, chunk count, chunk root) hashes to
// the committed leaf, and its bytes are its share of the tensor with a range proof under the chunk
// root (one frame carries a run of up to kMaxFrameChunks consecutive chunks).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/hash.h"
#include "protocol/messages.h"
#include "protocol/tensor_hash.h"

namespace tribunal {

/// The most elements an opened tensor may have (2^40: 4 TiB of float32; the job sets the actual size).
inline constexpr uint64_t kMaxOpenedElements = uint64_t{1} << 40;

/// One tensor a receiver waits for: its shape as the job fixes it ([] for a scalar) and the tensor
/// leaf (tensor_hash.h) committed to it. `dtype` Trits: a node's rounding log (shape [count],
/// ⌈count / 5⌉ bytes), opened by one party only (docs/protocol.md, "Rounding-log jobs").
struct ExpectedTensor {
  std::vector<int64_t> shape;
  Digest hash{};
  DType dtype = DType::F32;
  /// The chunks wanted, [first_chunk, end_chunk) clamped to the tensor's chunks: by default all; the
  /// inputs one output chunk depends on at level 4 (docs/protocol.md, "The game"). An InputOpening keeps
  /// only these.
  uint64_t first_chunk = 0;
  uint64_t end_chunk = UINT64_MAX;
};

/// Byte length of a tensor of `dtype` and `shape`; nullopt if a dimension is negative or the tensor
/// has more than kMaxOpenedElements elements.
std::optional<uint64_t> opened_byte_length(DType dtype, std::span<const int64_t> shape);

/// Chunks of a tensor of `bytes` bytes (kTensorChunkBytes each): at least one, an empty tensor has one
/// empty chunk.
uint64_t tensor_chunk_count(uint64_t bytes);

/// Checks the header of frame `c` against `want`: the shape, the chunk count, that (shape, byte
/// length, chunk root) hash to want.hash — skipped when `known_chunk_root` is the chunk root of an
/// earlier frame that passed — and that the run [c.chunk, c.chunk + c.count) is 1 to kMaxFrameChunks
/// chunks of the tensor. Returns the tensor's byte length, or nullopt with the reason in `why`.
std::optional<uint64_t> check_chunk_header(const ExpectedTensor& want, const TensorChunk& c,
                                           const Digest* known_chunk_root, std::string& why);

/// The bytes of chunks [first, first + count) of a tensor of `total` bytes: their offset and length.
struct ChunkRun {
  uint64_t offset = 0;
  uint64_t length = 0;
};
ChunkRun chunk_run(uint64_t total, uint64_t first, uint64_t count);

/// True if c.bytes are the chunks [c.chunk, c.chunk + c.count) of a tensor of `total` bytes (their
/// length) with a range proof (merkle.h verify_range) under c.chunk_root. Call after
/// check_chunk_header.
bool chunk_bytes_proven(DType dtype, const TensorChunk& c, uint64_t total);

}  // namespace tribunal
