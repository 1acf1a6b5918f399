// BLAKE3 hashing (32-byte output; the BLAKE3 specification, via its reference C implementation,
// cmake/blake3.cmake) with one-byte domain tags. Source: docs/commitments.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tribunal {

/// Error raised by the protocol layer (bad hex, bad proof shape, libsodium failure, misuse of Hasher).
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A 32-byte BLAKE3 digest (the default 256-bit output of unkeyed BLAKE3).
using Digest = std::array<uint8_t, 32>;

/// Domain-separation tags: the first byte of every hashed message says what it is, so a digest of
/// one kind can never be passed off as another. 0x00/0x01 are RFC 6962's leaf and node prefixes.
enum class HashTag : uint8_t {
  MerkleLeaf = 0x00,
  MerkleNode = 0x01,
  Tensor = 0x10,       ///< tensor leaf: header + root over chunks
  TensorChunk = 0x11,  ///< one fixed-size chunk of a tensor's bytes
  Sample = 0x12,       ///< one data-set sample (its input and label tensor leaves)
  Job = 0x13,          ///< canonical job spec encoding
  NodeRecord = 0x14,   ///< one node of a step graph: op, attributes, input and output hashes
  Dispute = 0x15,      ///< dispute id: the whole DisputeOpen body (wire.h dispute_id)
  Envelope = 0x16,     ///< the bytes an envelope signature covers
  File = 0x17,         ///< a registered file's whole content (a job's initial weights, engine/job.h)
};

/// Incremental BLAKE3 (unkeyed, 32-byte output). Construct with a tag; update(); final() once.
/// Copyable: a copy continues from the same state. Updates of many KiB at once let BLAKE3 hash
/// its 1 KiB chunks in parallel SIMD lanes (AVX-512: 16 at a time).
class Hasher {
 public:
  /// Starts a hash whose first message byte is `tag`.
  explicit Hasher(HashTag tag);
  /// Appends raw bytes.
  Hasher& update(std::span<const std::byte> bytes);
  /// Appends raw bytes.
  Hasher& update(std::span<const uint8_t> bytes);
  /// Appends the 32 digest bytes.
  Hasher& update(const Digest& d) { return update(std::span<const uint8_t>(d)); }
  /// Appends one byte.
  Hasher& update_u8(uint8_t v);
  Hasher& update_u64(uint64_t v);  ///< Appends 8 bytes, little-endian.
  /// The digest of everything appended. Call once; a second call throws ProtocolError.
  Digest final();

 private:
  alignas(8) unsigned char state_[1920];  // a blake3_hasher (static_assert in hash.cpp)
  bool finalized_ = false;
};

/// One-shot H(tag ‖ bytes).
Digest hash_tagged(HashTag tag, std::span<const std::byte> bytes);

/// Untagged BLAKE3(bytes), 32 bytes. Only for the empty Merkle tree's root H() and known-answer
/// tests; every protocol message is tagged.
Digest blake3_256(std::span<const std::byte> bytes);

/// sodium_init() once per process (thread-safe); every libsodium user in the tree (signatures,
/// random bytes, hex) calls it first. Throws ProtocolError if libsodium cannot be initialized.
void ensure_sodium();

/// Lowercase hex of `bytes`, 2·bytes.size() characters (libsodium sodium_bin2hex: constant time).
std::string to_hex(std::span<const uint8_t> bytes);

/// Parses exactly 2·out.size() hex digits (either case) into `out` with libsodium's constant-time
/// sodium_hex2bin, so a secret key can be parsed with it. Returns nullopt once all of `out` is
/// written, or the position of the first character that is not a hex digit (`out` is then zeroed).
/// Throws ProtocolError if hex.size() is not 2·out.size(): callers check the length first, in their
/// own words.
std::optional<size_t> hex_to_bytes(std::string_view hex, std::span<uint8_t> out);

/// Parses 64 hex characters; throws ProtocolError naming the offending position otherwise.
Digest digest_from_hex(std::string_view hex);

}  // namespace tribunal
