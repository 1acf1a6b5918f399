// One TensorChunk against its tensor leaf. See chunk_check.h; docs/commitments.md, "Tensor leaves".
#include "protocol/chunk_check.h"

#include <algorithm>

#include "protocol/codec.h"
#include "protocol/merkle.h"

namespace tribunal {

std::optional<uint64_t> opened_byte_length(DType dtype, std::span<const int64_t> shape) {
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && numel > kMaxOpenedElements / static_cast<uint64_t>(d))) return std::nullopt;
    numel *= static_cast<uint64_t>(d);
  }
  return tensor_byte_length(dtype, numel);
}

uint64_t tensor_chunk_count(uint64_t bytes) {
  return std::max<uint64_t>(1, (bytes + kTensorChunkBytes - 1) / kTensorChunkBytes);
}

namespace {

// Whether frame `c`'s run [c.chunk, c.chunk + c.count) is 1 to kMaxFrameChunks chunks of a tensor of
// `chunks` chunks.
bool run_fits(const TensorChunk& c, uint64_t chunks) {
  return c.chunk < chunks && c.count != 0 && c.count <= kMaxFrameChunks && c.count <= chunks - c.chunk;
}

}  // namespace

std::optional<uint64_t> check_chunk_header(const ExpectedTensor& want, const TensorChunk& c,
                                           const Digest* known_chunk_root, std::string& why) {
  if (c.shape != want.shape) {
    why = "tensor shape is not the shape of the value in the job's graph";
    return std::nullopt;
  }
  const std::optional<uint64_t> total = opened_byte_length(want.dtype, want.shape);
  if (!total) {
    why = "tensor shape out of range";
    return std::nullopt;
  }
  const uint64_t chunks = tensor_chunk_count(*total);
  const bool known_header = known_chunk_root != nullptr && c.chunk_root == *known_chunk_root;
  if (c.chunks != chunks || (!known_header && tensor_leaf_from_chunk_root(want.dtype, c.shape, *total,
                                                                          c.chunk_root) != want.hash)) {
    why = "tensor header does not match the committed tensor hash";
    return std::nullopt;
  }
  if (!run_fits(c, chunks)) {
    why = "tensor chunks [" + std::to_string(c.chunk) + ", +" + std::to_string(c.count) +
          ") of a tensor of " + std::to_string(chunks) + " chunks (1 to " + std::to_string(kMaxFrameChunks) +
          " in a frame)";
    return std::nullopt;
  }
  return total;
}

ChunkRun chunk_run(uint64_t total, uint64_t first, uint64_t count) {
  const uint64_t begin = std::min(total, first * kTensorChunkBytes);
  const uint64_t end = std::min(total, (first + count) * kTensorChunkBytes);
  return {begin, end - begin};
}

bool chunk_bytes_proven(DType dtype, const TensorChunk& c, uint64_t total) {
  const uint64_t chunks = tensor_chunk_count(total);
  // Checked again here: the hashes below hold at most kMaxFrameChunks.
  if (!run_fits(c, chunks) || c.bytes.size() != chunk_run(total, c.chunk, c.count).length) return false;
  const auto bytes = std::as_bytes(std::span(c.bytes));
  Digest hashes[kMaxFrameChunks];
  for (uint32_t i = 0; i < c.count; ++i) {
    const size_t off = size_t{i} * kTensorChunkBytes;
    hashes[i] = tensor_chunk_hash(dtype, bytes.subspan(off, std::min(kTensorChunkBytes, bytes.size() - off)));
  }
  return verify_range(std::span<const Digest>(hashes, c.count), c.chunk, chunks, c.proof, c.chunk_root);
}

}  // namespace tribunal
