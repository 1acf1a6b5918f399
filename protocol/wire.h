// Canonical binary encoding of protocol messages and the Ed25519-signed envelope (DESIGN §7).
//
// Encoding: little-endian fixed-width integers (u8/u16/u32/u64), f32 as its bits, a digest as 32 raw
// bytes, a byte string / string as u32 length + bytes, a vector as u32 count + elements, an
// InclusionProof as u64 index, u64 size, u32 count + digests, fields in declaration order.
// Decoding is strict: every length is checked against the remaining input and the limits below,
// enums must hold a defined value, and trailing bytes are an error — so every message has exactly
// one encoding.
//
// Envelope: u8 version ‖ u8 kind ‖ 32-byte context (dispute id, or job id before a dispute) ‖
// u64 sequence ‖ u32 body length ‖ body ‖ 32-byte sender public key ‖ 64-byte Ed25519 signature.
// The signature (libsodium crypto_sign_detached) covers H(Envelope tag ‖ everything before the
// public key ‖ public key), i.e. every byte but itself.
#pragma once

#include <array>
#include <cstdint>
#include <span>
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
inline constexpr size_t kMaxChunkBytes = 65536;              ///< TensorChunk payload (= kTensorChunkBytes)
inline constexpr size_t kMaxClaimEnvelopeBytes = 2048;       ///< a Claim envelope inside DisputeOpen / Verdict

/// WebSocket close codes used for protocol errors (RFC 6455 §7.4.1).
enum class CloseCode : uint16_t {
  Normal = 1000,
  GoingAway = 1001,
  ProtocolError = 1002,
  InvalidPayload = 1007,  ///< undecodable or non-canonical message
  PolicyViolation = 1008, ///< bad signature, wrong sender, replay, out of turn
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

using Body = std::variant<JobSubmit, Claim, DisputeOpen, Query, Answer, IntervalCommit, StepCommit, Records,
                          TensorChunk, Samples, Verdict, ErrorMessage>;

/// The kind tag of a body.
MessageKind kind_of(const Body& body);

/// Canonical bytes of a body (no envelope).
std::vector<uint8_t> encode_body(const Body& body);

/// Decodes a body of `kind`; throws WireError(InvalidPayload / TooBig) naming the field.
Body decode_body(MessageKind kind, std::span<const uint8_t> bytes);

using PublicKey = std::array<uint8_t, 32>;

/// An Ed25519 key pair (libsodium crypto_sign_keypair). Key files: nodes/key_file.h.
struct KeyPair {
  PublicKey public_key{};
  std::array<uint8_t, 64> secret_key{};
  /// True if public_key is the public half stored in secret_key (its last 32 bytes); a pair whose
  /// halves disagree would sign envelopes that name the wrong sender.
  bool halves_agree() const;
};

/// A fresh key pair. Throws ProtocolError if libsodium fails.
KeyPair generate_keypair();

/// A decoded, signature-checked envelope.
struct Envelope {
  MessageKind kind = MessageKind::Error;
  Digest context{};
  uint64_t sequence = 0;
  PublicKey sender{};
  Body body;
  std::vector<uint8_t> bytes;  ///< the whole envelope as received (for evidence, e.g. claims)
};

/// Encodes and signs `body` into an envelope.
std::vector<uint8_t> seal(const KeyPair& keys, const Digest& context, uint64_t sequence, const Body& body);

/// Decodes an envelope, checks version, lengths, canonical body and the signature by the key it
/// names. Throws WireError (TooBig, InvalidPayload, PolicyViolation for a bad signature).
Envelope open_envelope(std::span<const uint8_t> bytes);

/// dispute id = H(Dispute ‖ encode_body(opening)): it covers the whole opening (job, data set, both
/// signed claims and so both providers' endpoints), so two openings that differ in any byte are two
/// disputes, and a verdict names exactly what was disputed (docs/protocol.md, "Opening a dispute").
Digest dispute_id(const DisputeOpen& opening);

}  // namespace tribunal
