// Tensor leaf encoding (docs/commitments.md). See tensor_hash.h for the byte layout.
#include "protocol/tensor_hash.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "protocol/merkle.h"

namespace tribunal {
namespace {

static_assert(std::endian::native == std::endian::little, "tensor bytes are hashed as stored: little-endian");

constexpr uint32_t kCanonicalNaN = 0x7FC00000u;

bool is_nan_bits(uint32_t bits) {
  return (bits & 0x7fffffffu) > 0x7f800000u;
}

// True iff any float32 in `p[0..n)` is a NaN. Branch-free so the compiler vectorizes it; on x86-64 the
// AVX2 clone (picked at load time) halves the scan's cost, about 2% of the hash time. Other
// architectures have one version (AArch64's baseline Advanced SIMD vectorizes it already), and so has
// a ThreadSanitizer build: the clones' resolver runs while the loader relocates, before the sanitizer's
// runtime is up, and its instrumented entry crashes the process.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRIBUNAL_TSAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(TRIBUNAL_TSAN)
#define TRIBUNAL_NAN_SCAN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TRIBUNAL_NAN_SCAN_CLONES
#endif
TRIBUNAL_NAN_SCAN_CLONES bool any_nan(const std::byte* p, size_t n) {
  uint32_t any = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + 4 * i, 4);
    any |= static_cast<uint32_t>(is_nan_bits(bits));
  }
  return any != 0;
}

// The unit a chunk's length must be a multiple of: the element size of F32; a byte of packed trits.
size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::Trits:
      return 1;
  }
  throw ProtocolError("tensor hash: unknown dtype code " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

uint64_t tensor_byte_length(DType dtype, uint64_t numel) {
  switch (dtype) {
    case DType::F32:
      if (numel > UINT64_MAX / 4) throw ProtocolError("tensor hash: element count overflows");
      return numel * 4;
    case DType::Trits:
      return numel / 5 + (numel % 5 != 0);
  }
  throw ProtocolError("tensor hash: unknown dtype code " + std::to_string(static_cast<int>(dtype)));
}

Digest tensor_chunk_hash(DType dtype, std::span<const std::byte> chunk) {
  const size_t esize = dtype_size(dtype);
  if (chunk.size() % esize != 0) {
    throw ProtocolError("tensor_chunk_hash: chunk of " + std::to_string(chunk.size()) +
                        " bytes is not a whole number of " + std::to_string(esize) + "-byte elements");
  }
  // A NaN-free chunk (every chunk of a trained model's state) is hashed in place on the wide path
  // (hash.h hash_tagged). A chunk with a NaN is copied to this thread's buffer, its NaNs rewritten.
  if (dtype != DType::F32 || !any_nan(chunk.data(), chunk.size() / 4))
    return hash_tagged(HashTag::TensorChunk, chunk);
  thread_local std::vector<std::byte> canonical;
  canonical.assign(chunk.begin(), chunk.end());
  for (size_t i = 0; i < canonical.size(); i += 4) {
    uint32_t bits;
    std::memcpy(&bits, canonical.data() + i, 4);
    if (is_nan_bits(bits)) std::memcpy(canonical.data() + i, &kCanonicalNaN, 4);
  }
  return hash_tagged(HashTag::TensorChunk, canonical);
}

Digest tensor_leaf(DType dtype, std::span<const int64_t> shape, std::span<const std::byte> bytes) {
  if (shape.size() > 255) {
    throw ProtocolError("tensor_leaf: rank " + std::to_string(shape.size()) +
                        " does not fit the u8 rank field");
  }
  uint64_t numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      throw ProtocolError("tensor_leaf: dimension " + std::to_string(i) + " is negative (" +
                          std::to_string(shape[i]) + ")");
    }
    const auto d = static_cast<uint64_t>(shape[i]);
    if (d != 0 && numel > UINT64_MAX / 4 / d) {
      throw ProtocolError("tensor_leaf: element count overflows at dimension " + std::to_string(i));
    }
    numel *= d;
  }
  if (bytes.size() != tensor_byte_length(dtype, numel)) {
    throw ProtocolError("tensor_leaf: " + std::to_string(bytes.size()) + " bytes given, shape needs " +
                        std::to_string(tensor_byte_length(dtype, numel)) + " bytes (" +
                        std::to_string(numel) + " elements)");
  }

  return tensor_leaf_from_chunk_root(dtype, shape, bytes.size(),
                                     merkle_root(tensor_chunk_hashes(dtype, bytes)));
}

std::vector<Digest> tensor_chunk_hashes(DType dtype, std::span<const std::byte> bytes) {
  const size_t n_chunks = std::max<size_t>(1, (bytes.size() + kTensorChunkBytes - 1) / kTensorChunkBytes);
  std::vector<Digest> chunk_hashes(n_chunks);
  for (size_t c = 0; c < n_chunks; ++c) {
    const size_t off = c * kTensorChunkBytes;
    chunk_hashes[c] =
        tensor_chunk_hash(dtype, bytes.subspan(off, std::min(kTensorChunkBytes, bytes.size() - off)));
  }
  return chunk_hashes;
}

Digest tensor_leaf_from_chunk_root(DType dtype, std::span<const int64_t> shape, uint64_t byte_length,
                                   const Digest& chunk_root) {
  Hasher h(HashTag::Tensor);
  h.update_u8(static_cast<uint8_t>(dtype)).update_u8(static_cast<uint8_t>(shape.size()));
  for (int64_t d : shape) h.update_u64(static_cast<uint64_t>(d));
  h.update_u64(byte_length).update(chunk_root);
  return h.final();
}

Digest sample_leaf(std::span<const float> input, std::span<const float> label, uint64_t label_width) {
  if (label.size() != (label_width == 0 ? 1 : label_width))
    throw std::invalid_argument("sample_leaf: " + std::to_string(label.size()) +
                                " label values for label width " + std::to_string(label_width));
  const int64_t input_shape[1] = {static_cast<int64_t>(input.size())};
  const Digest input_leaf = tensor_leaf(DType::F32, input_shape, std::as_bytes(input));
  const int64_t label_shape[1] = {static_cast<int64_t>(label_width)};
  const std::span<const int64_t> shape =
      label_width == 0 ? std::span<const int64_t>() : std::span(label_shape);
  const Digest label_leaf = tensor_leaf(DType::F32, shape, std::as_bytes(label));
  return Hasher(HashTag::Sample).update(input_leaf).update(label_leaf).final();
}

Digest sample_leaf(std::span<const float> input, float label) {
  return sample_leaf(input, std::span<const float>(&label, 1), 0);
}

}  // namespace tribunal
