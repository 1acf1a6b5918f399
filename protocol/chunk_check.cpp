// One TensorChunk against its tensor leaf. See chunk_check.h; docs/commitments.md, "Tensor leaves".
#include "protocol/chunk_check.h"

#include <algorithm>

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
  if (c.chunk >= chunks) {
    why = "tensor chunk " + std::to_string(c.chunk) + " of a tensor of " + std::to_string(chunks) + " chunks";
    return std::nullopt;
  }
  return total;
}

bool chunk_bytes_proven(DType dtype, const TensorChunk& c, uint64_t total) {
  const uint64_t chunks = tensor_chunk_count(total);
  const uint64_t offset = uint64_t{c.chunk} * kTensorChunkBytes;
  if (offset > total) return false;
  const uint64_t expect = std::min<uint64_t>(kTensorChunkBytes, total - offset);
  return c.bytes.size() == expect && c.proof.index == c.chunk && c.proof.size == chunks &&
         verify_inclusion(tensor_chunk_hash(dtype, std::as_bytes(std::span(c.bytes))), c.proof, c.chunk_root);
}

}  // namespace tribunal
