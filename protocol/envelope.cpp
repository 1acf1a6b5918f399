// Signed envelopes and dispute ids. See envelope.h; docs/protocol.md, "Messages".
#include "protocol/envelope.h"

#include <sodium.h>

#include <algorithm>
#include <string>

#include "protocol/codec_stream.h"

namespace tribunal {
namespace {

static_assert(kEnvelopeTrailerBytes == crypto_sign_PUBLICKEYBYTES + crypto_sign_BYTES);
static_assert(sizeof(PublicKey) == crypto_sign_PUBLICKEYBYTES);
static_assert(sizeof(KeyPair::secret_key) == crypto_sign_SECRETKEYBYTES);

/// What an envelope signature signs: H(Envelope ‖ every byte before the signature).
Digest envelope_digest(std::span<const uint8_t> signed_bytes) {
  return Hasher(HashTag::Envelope).update(signed_bytes).final();
}

/// True if the signature that ends `bytes` (a whole envelope whose layout was checked) verifies under
/// `sender`.
bool signature_verifies(std::span<const uint8_t> bytes, const PublicKey& sender) {
  ensure_sodium();
  const size_t signature_at = bytes.size() - crypto_sign_BYTES;
  const Digest signed_digest = envelope_digest(bytes.first(signature_at));
  return crypto_sign_verify_detached(bytes.data() + signature_at, signed_digest.data(), signed_digest.size(),
                                     sender.data()) == 0;
}

}  // namespace

bool KeyPair::halves_agree() const {
  return std::equal(public_key.begin(), public_key.end(),
                    secret_key.begin() + (secret_key.size() - public_key.size()));
}

KeyPair generate_keypair() {
  ensure_sodium();
  KeyPair keys;
  if (crypto_sign_keypair(keys.public_key.data(), keys.secret_key.data()) != 0) {
    throw ProtocolError("generate_keypair: crypto_sign_keypair failed");
  }
  return keys;
}

std::vector<uint8_t> seal(const KeyPair& keys, const Digest& context, uint64_t sequence, const Body& body) {
  ensure_sodium();
  if (!keys.halves_agree()) throw ProtocolError("seal: public key is not the secret key's public half");
  const std::vector<uint8_t> encoded = encode_body(body);  // ≤ kMaxBodyBytes, so the envelope fits
  codec::ByteWriter w;
  w.reserve(kEnvelopeHeaderBytes + encoded.size() + kEnvelopeTrailerBytes);
  w.u8(kWireVersion);
  w.u8(static_cast<uint8_t>(kind_of(body)));
  w.raw(context);
  w.u64(sequence);
  w.u32(static_cast<uint32_t>(encoded.size()));
  w.raw(encoded);
  w.raw(keys.public_key);
  const Digest signed_digest = envelope_digest(w.bytes_so_far());
  std::array<uint8_t, crypto_sign_BYTES> signature{};
  if (crypto_sign_detached(signature.data(), nullptr, signed_digest.data(), signed_digest.size(),
                           keys.secret_key.data()) != 0) {
    throw ProtocolError("seal: crypto_sign_detached failed");
  }
  w.raw(signature);
  return w.take();
}

namespace {

// open_envelope without Envelope::bytes, which the callers fill (a copy, or the frame moved in).
Envelope open_checked(std::span<const uint8_t> bytes, SignatureCheck check) {
  ensure_sodium();
  if (bytes.size() > kMaxMessageBytes) {
    throw WireError(CloseCode::TooBig, "Envelope: " + std::to_string(bytes.size()) + " bytes exceed " +
                                           std::to_string(kMaxMessageBytes));
  }
  using codec::FieldName;
  const FieldName envelope{"Envelope"};
  const FieldName version_field{"version", &envelope}, kind_field{"kind", &envelope},
      context_field{"context", &envelope}, sequence_field{"sequence", &envelope},
      length_field{"body_length", &envelope}, body_field{"body", &envelope},
      sender_field{"sender", &envelope}, signature_field{"signature", &envelope};

  codec::ByteReader r(bytes);
  Envelope env;
  const uint8_t version = r.u8(version_field);
  if (version != kWireVersion) {
    r.fail(CloseCode::InvalidPayload, version_field, 0,
           "version " + std::to_string(version) + " is not " + std::to_string(kWireVersion));
  }
  env.kind = r.enumeration<MessageKind>(kind_field);
  env.context = r.digest(context_field);
  env.sequence = r.u64(sequence_field);
  const size_t length_at = r.offset();
  const uint32_t body_length = r.u32(length_field);
  if (r.remaining() < kEnvelopeTrailerBytes || body_length != r.remaining() - kEnvelopeTrailerBytes) {
    r.fail(CloseCode::InvalidPayload, length_field, length_at,
           "body length " + std::to_string(body_length) + " does not match the envelope size " +
               std::to_string(bytes.size()));
  }
  const size_t body_at = r.offset();
  const std::span<const uint8_t> body = r.take(body_field, body_length);
  const auto sender = r.take(sender_field, env.sender.size());
  std::copy(sender.begin(), sender.end(), env.sender.begin());
  const size_t signature_at = r.offset();
  r.take(signature_field, crypto_sign_BYTES);
  r.finish(envelope);

  // The signature first: a body is only parsed once it is known to come from the named sender —
  // except a TensorChunk whose check the caller defers (SignatureCheck): its body proves itself.
  env.signature_checked =
      !(check == SignatureCheck::DeferTensorChunks && env.kind == MessageKind::TensorChunk);
  if (env.signature_checked && !signature_verifies(bytes, env.sender)) {
    r.fail(CloseCode::PolicyViolation, signature_field, signature_at, "does not verify under the sender key");
  }
  env.body = decode_body(env.kind, body, body_at);
  return env;
}

}  // namespace

Envelope open_envelope(std::span<const uint8_t> bytes, SignatureCheck check) {
  Envelope env = open_checked(bytes, check);
  env.bytes.assign(bytes.begin(), bytes.end());
  return env;
}

Envelope open_envelope(std::vector<uint8_t>&& bytes, SignatureCheck check) {
  Envelope env = open_checked(bytes, check);
  env.bytes = std::move(bytes);  // checked as it is: the buffer moves, its bytes stay where they were read
  return env;
}

void check_envelope_signature(const Envelope& env) {
  if (env.bytes.size() < kEnvelopeHeaderBytes + kEnvelopeTrailerBytes ||
      !signature_verifies(env.bytes, env.sender))
    throw WireError(CloseCode::PolicyViolation,
                    "Envelope.signature: does not verify under the sender key at offset " +
                        std::to_string(env.bytes.size() - crypto_sign_BYTES));
}

Digest dispute_id(const DisputeOpen& opening) {
  Hasher h(HashTag::Dispute);
  h.update(encode_body(opening));
  return h.final();
}

}  // namespace tribunal
