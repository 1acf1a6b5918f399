// Tensor leaf encoding (docs/commitments.md): the commitment to one tensor.
//
//   chunks  = the element bytes (little-endian) split into kTensorChunkBytes pieces, the last one
//             shorter; an empty tensor has one empty chunk
//   chunk_root = RFC 6962 Merkle root over H(TensorChunk ‖ chunk_i)
//   leaf    = H(Tensor ‖ dtype u8 ‖ rank u8 ‖ dims u64 LE… ‖ byte length u64 LE ‖ chunk_root)
//
// For float32, every NaN is hashed as 0x7FC00000 (NaN payloads differ across hardware).
// The chunk size is part of the contract; chunk roots let large tensors be hashed in parallel and
// streamed in chunks that are each checked with an inclusion proof.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/hash.h"

namespace tribunal {

/// Bytes per tensor chunk (64 KiB = 16384 float32).
inline constexpr size_t kTensorChunkBytes = 65536;

/// Element type codes in the leaf encoding.
enum class DType : uint8_t {
  F32 = 1,  ///< float32, 4 bytes per element
  /// Rounding decisions (ops/rounding_log.h), packed five trits per byte: a tensor of shape [count]
  /// holds ⌈count / 5⌉ bytes (tensor_byte_length). A node's rounding log is committed as such a
  /// tensor leaf (docs/protocol.md, "Rounding-log jobs"), so it streams in TensorChunks like any tensor.
  Trits = 2,
};

/// Bytes of a tensor of `numel` elements of `dtype`: 4·numel for F32, ⌈numel / 5⌉ for Trits. Throws
/// ProtocolError for an unknown dtype or a count whose bytes overflow.
uint64_t tensor_byte_length(DType dtype, uint64_t numel);

/// The digest of one chunk: H(TensorChunk ‖ bytes), with float32 NaNs canonicalized.
Digest tensor_chunk_hash(DType dtype, std::span<const std::byte> chunk);

/// The tensor leaf digest above. Throws ProtocolError if bytes.size() is not
/// tensor_byte_length(dtype, numel).
Digest tensor_leaf(DType dtype, std::span<const int64_t> shape, std::span<const std::byte> bytes);

/// The chunk digests of a tensor's bytes (at least one; the last chunk may be short).
std::vector<Digest> tensor_chunk_hashes(DType dtype, std::span<const std::byte> bytes);

/// The leaf from its parts: H(Tensor ‖ dtype ‖ rank ‖ dims ‖ byte length ‖ chunk_root). Lets a
/// receiver check a tensor's header before its chunks arrive.
Digest tensor_leaf_from_chunk_root(DType dtype, std::span<const int64_t> shape, uint64_t byte_length,
                                   const Digest& chunk_root);

/// A data-set sample's value in dataset_root: H(Sample ‖ tensor_leaf(F32, [features], input) ‖
/// label leaf), the label leaf being tensor_leaf(F32, [], label) for a class id (label_width 0, `label`
/// holds one float) or tensor_leaf(F32, [label_width], label) for a label sequence (e.g. the next
/// bytes of a text window). Throws std::invalid_argument if label.size() does not fit label_width.
Digest sample_leaf(std::span<const float> input, std::span<const float> label, uint64_t label_width);

/// sample_leaf for a class-id label (label_width 0).
Digest sample_leaf(std::span<const float> input, float label);

}  // namespace tribunal
