// BLAKE2b-256 over libsodium's crypto_generichash (RFC 7693). See hash.h; DESIGN.md §5.
#include "protocol/hash.h"

#include <sodium.h>

namespace tribunal {
namespace {

static_assert(sizeof(Digest) == crypto_generichash_BYTES, "Digest must be crypto_generichash_BYTES");
static_assert(sizeof(crypto_generichash_state) <= 384, "crypto_generichash_state outgrew Hasher::state_");
static_assert(alignof(crypto_generichash_state) <= 64, "crypto_generichash_state needs more alignment");

// sodium_init() once per process; a function-local static is initialized thread-safely (C++11).
void ensure_sodium() {
  static const bool ok = [] {
    if (crypto_generichash_statebytes() > 384) {
      throw ProtocolError("libsodium: crypto_generichash_statebytes() exceeds Hasher's 384-byte state");
    }
    return sodium_init() >= 0;
  }();
  if (!ok) throw ProtocolError("libsodium: sodium_init() failed");
}

crypto_generichash_state* as_state(unsigned char* p) {
  return reinterpret_cast<crypto_generichash_state*>(p);
}

}  // namespace

Hasher::Hasher(HashTag tag) {
  ensure_sodium();
  if (crypto_generichash_init(as_state(state_), nullptr, 0, crypto_generichash_BYTES) != 0) {
    throw ProtocolError("Hasher: crypto_generichash_init failed");
  }
  update_u8(static_cast<uint8_t>(tag));
}

Hasher& Hasher::update(std::span<const std::byte> bytes) {
  if (crypto_generichash_update(as_state(state_), reinterpret_cast<const unsigned char*>(bytes.data()),
                                bytes.size()) != 0) {
    throw ProtocolError("Hasher::update: crypto_generichash_update failed");
  }
  return *this;
}

Hasher& Hasher::update(std::span<const uint8_t> bytes) { return update(std::as_bytes(bytes)); }

Hasher& Hasher::update_u8(uint8_t v) { return update(std::span<const uint8_t>(&v, 1)); }

Hasher& Hasher::update_u64(uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
  return update(std::span<const uint8_t>(le, 8));
}

Digest Hasher::final() {
  Digest d{};
  if (crypto_generichash_final(as_state(state_), d.data(), d.size()) != 0) {
    throw ProtocolError("Hasher::final: crypto_generichash_final failed (called twice?)");
  }
  return d;
}

Digest hash_tagged(HashTag tag, std::span<const std::byte> bytes) {
  return Hasher(tag).update(bytes).final();
}

Digest blake2b_256(std::span<const std::byte> bytes) {
  ensure_sodium();
  Digest d{};
  if (crypto_generichash(d.data(), d.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                         bytes.size(), nullptr, 0) != 0) {
    throw ProtocolError("blake2b_256: crypto_generichash failed");
  }
  return d;
}

std::string to_hex(const Digest& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * d.size(), '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kDigits[d[i] >> 4];
    s[2 * i + 1] = kDigits[d[i] & 0xf];
  }
  return s;
}

Digest digest_from_hex(std::string_view hex) {
  Digest d{};
  if (hex.size() != 2 * d.size()) {
    throw ProtocolError("digest_from_hex: expected 64 hex characters, got " + std::to_string(hex.size()));
  }
  auto nibble = [&](size_t pos) -> uint8_t {
    const char c = hex[pos];
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
    throw ProtocolError("digest_from_hex: character " + std::to_string(pos) + " is not a hex digit");
  };
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>(nibble(2 * i) << 4 | nibble(2 * i + 1));
  return d;
}

}  // namespace tribunal
