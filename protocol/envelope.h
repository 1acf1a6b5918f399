// The Ed25519-signed envelope that carries every message, and dispute ids (docs/protocol.md,
// "Messages" and "Opening a dispute").
//
// Envelope: u8 version ‖ u8 kind ‖ 32-byte context (dispute id, or job id before a dispute) ‖
// u64 sequence ‖ u32 body length ‖ body (codec.h) ‖ 32-byte sender public key ‖ 64-byte Ed25519
// signature. The signature (libsodium crypto_sign_detached) covers H(Envelope tag ‖ everything before
// the signature), i.e. every byte but itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "protocol/codec.h"
#include "protocol/hash.h"
#include "protocol/messages.h"

namespace tribunal {

/// Envelope layout: the header before the body (version, kind, context, sequence, body length) and
/// the trailer after it (sender key, signature).
inline constexpr size_t kEnvelopeHeaderBytes = 1 + 1 + 32 + 8 + 4;
inline constexpr size_t kEnvelopeTrailerBytes = 32 + 64;
static_assert(kMaxBodyBytes == kMaxMessageBytes - kEnvelopeHeaderBytes - kEnvelopeTrailerBytes);

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

/// A decoded envelope; its signature checked unless `signature_checked` is false (see SignatureCheck).
struct Envelope {
  MessageKind kind = MessageKind::Error;
  Digest context{};
  uint64_t sequence = 0;
  PublicKey sender{};
  Body body;
  std::vector<uint8_t> bytes;  ///< the whole envelope as received (for evidence, e.g. claims)
  bool signature_checked = true;
};

/// When open_envelope checks the signature.
///
/// DeferTensorChunks serves the referee's OpenInputs round (docs/protocol.md, "Clocks and the
/// referee's work"): a TensorChunk proves its own bytes by its inclusion proof under a tensor hash
/// both parties signed, so a chunk that the game accepts needs no signature to be trusted; only a
/// chunk the game would hold against its sender (bad_proof) must be shown to be the sender's, and the
/// referee then checks the signature (check_envelope_signature) before it decides. This saves one
/// BLAKE3 pass over every opened byte and one Ed25519 verification per 64 KiB chunk.
enum class SignatureCheck : uint8_t {
  Always,             ///< every envelope's signature is checked before its body is decoded
  DeferTensorChunks,  ///< a TensorChunk is decoded with signature_checked = false
};

/// Encodes and signs `body` into an envelope. Throws WireError if the body does not encode,
/// ProtocolError if the key pair's halves disagree or signing fails.
std::vector<uint8_t> seal(const KeyPair& keys, const Digest& context, uint64_t sequence, const Body& body);

/// Decodes an envelope, checks version, lengths, canonical body and (see SignatureCheck) the signature
/// by the key it names. Throws WireError (TooBig, InvalidPayload, PolicyViolation for a bad signature)
/// naming the field and its offset in `bytes`.
Envelope open_envelope(std::span<const uint8_t> bytes, SignatureCheck check = SignatureCheck::Always);
/// The same, keeping the received frame itself as Envelope::bytes instead of a copy of it: what a
/// referee does with a frame it read (a 64 KiB tensor chunk is not copied to be recorded).
Envelope open_envelope(std::vector<uint8_t>&& bytes, SignatureCheck check = SignatureCheck::Always);

/// Checks the signature of an envelope that open_envelope decoded without it (env.bytes as received).
/// Throws WireError (PolicyViolation) if it does not verify under env.sender.
void check_envelope_signature(const Envelope& env);

/// dispute id = H(Dispute ‖ encode_body(opening)): it covers the whole opening (job, data set, both
/// signed claims and so both providers' endpoints), so two openings that differ in any byte are two
/// disputes, and a verdict names exactly what was disputed (docs/protocol.md, "Opening a dispute").
Digest dispute_id(const DisputeOpen& opening);

}  // namespace tribunal
