// Canonical binary encoding of protocol message bodies (docs/protocol.md, "Messages").
//
// Encoding: little-endian fixed-width integers (u8/u16/u32/u64), i64 as two's complement, f32 as its
// bits, an enum as one byte, a digest as 32 raw bytes, a byte string / string as u32 length + bytes,
// a vector as u32 count + elements, an InclusionProof as u64 index, u64 size, u32 count + digests,
// fields in declaration order (messages.h). Decoding is strict: every length is checked against the
// remaining input and the limits below, enums must hold a defined value, and trailing bytes are an
// error — so every message has exactly one encoding. Each message's fields are listed once
// (codec.cpp), and that one list drives both directions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "protocol/hash.h"
#include "protocol/messages.h"

namespace tribunal {

/// Limits: anything larger is refused before it is allocated.
inline constexpr size_t kMaxMessageBytes = size_t{1} << 20;  ///< one envelope (1 MiB)
inline constexpr size_t kMaxStringBytes = size_t{1} << 16;   ///< job TOML, URLs, details
inline constexpr size_t kMaxListItems = 4096;                ///< indices, records, hashes, samples
inline constexpr size_t kMaxProofLength = 64;                ///< Merkle path (trees ≤ 2^64 leaves)
inline constexpr size_t kMaxRangeProofLength = 128;          ///< a range proof: ≤ 2 digests per level
/// Chunks in one TensorChunk frame: 15 of 64 KiB with the rest of the message fit one envelope.
inline constexpr size_t kMaxFrameChunks = 15;
inline constexpr size_t kMaxChunkBytes = kMaxFrameChunks * 65536;  ///< TensorChunk payload
inline constexpr size_t kMaxClaimEnvelopeBytes = 2048;  ///< a Claim envelope inside DisputeOpen / Verdict
/// The largest body: one envelope less its 46-byte header and 96-byte trailer (envelope.h).
inline constexpr size_t kMaxBodyBytes = kMaxMessageBytes - 46 - 96;
static_assert(kMaxChunkBytes + kMaxListItems * 8 + kMaxRangeProofLength * 32 + 256 <= kMaxBodyBytes,
              "a full TensorChunk frame (its bytes, the longest shape, a range proof) must fit one envelope");

/// WebSocket close codes used for protocol errors (RFC 6455 §7.4.1).
enum class CloseCode : uint16_t {
  Normal = 1000,
  GoingAway = 1001,
  ProtocolError = 1002,
  InvalidPayload = 1007,   ///< undecodable or non-canonical message
  PolicyViolation = 1008,  ///< bad signature, wrong sender, replay, out of turn
  TooBig = 1009,
  InternalError = 1011,
};

/// A refused message: what is wrong, where (field / offset), and the close code to send.
class WireError : public ProtocolError {
 public:
  WireError(CloseCode code, const std::string& what) : ProtocolError(what), code_(code) {}
  CloseCode code() const { return code_; }

 private:
  CloseCode code_;
};

/// A message body; alternative k − 1 is the body of MessageKind k.
using Body = std::variant<JobSubmit, Claim, DisputeOpen, Query, Children, IntervalCommit, StepCommit, Records,
                          TensorChunk, Samples, Verdict, ErrorMessage, RefereeCheck, RefereeAnswer,
                          StateRequest, StateHeader, LogRequest, LogHeader, LogEvidence>;

/// The kind tag of a body.
MessageKind kind_of(const Body& body);

/// Canonical bytes of a body (no envelope). Throws WireError (InvalidPayload for an undeclared enum
/// value or a broken structural rule, TooBig over a limit) naming the field.
std::vector<uint8_t> encode_body(const Body& body);

/// Decodes a body of `kind`; throws WireError(InvalidPayload / TooBig) naming the field and its offset.
/// `offset_base` is where `bytes` starts in the buffer the caller holds (an envelope), so that error
/// offsets count from there.
Body decode_body(MessageKind kind, std::span<const uint8_t> bytes, size_t offset_base = 0);

}  // namespace tribunal
