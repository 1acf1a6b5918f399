// BLAKE3 over its reference C implementation (cmake/blake3.cmake); libsodium for hex and sodium_init.
// See hash.h; docs/commitments.md.
#include "protocol/hash.h"

#include <blake3.h>
#include <sodium.h>

#include <cctype>
#include <new>
#include <string>

namespace tribunal {
namespace {

static_assert(sizeof(Digest) == BLAKE3_OUT_LEN, "Digest must be BLAKE3_OUT_LEN bytes");

blake3_hasher* as_state(unsigned char* p) {
  return std::launder(reinterpret_cast<blake3_hasher*>(p));
}

}  // namespace

// A function-local static is initialized once, thread-safely (C++11), so sodium_init() runs once.
void ensure_sodium() {
  static const bool ok = sodium_init() >= 0;
  if (!ok) throw ProtocolError("libsodium: sodium_init() failed");
}

Hasher::Hasher(HashTag tag) {
  static_assert(sizeof(blake3_hasher) <= sizeof(state_), "blake3_hasher outgrew Hasher::state_");
  static_assert(alignof(blake3_hasher) <= 8, "blake3_hasher needs more alignment than Hasher::state_");
  blake3_hasher_init(new (state_) blake3_hasher);
  update_u8(static_cast<uint8_t>(tag));
}

Hasher& Hasher::update(std::span<const std::byte> bytes) {
  if (finalized_) throw ProtocolError("Hasher::update: called after final()");
  blake3_hasher_update(as_state(state_), bytes.data(), bytes.size());
  return *this;
}

Hasher& Hasher::update(std::span<const uint8_t> bytes) {
  return update(std::as_bytes(bytes));
}

Hasher& Hasher::update_u8(uint8_t v) {
  return update(std::span<const uint8_t>(&v, 1));
}

Hasher& Hasher::update_u64(uint64_t v) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
  return update(std::span<const uint8_t>(le, 8));
}

Digest Hasher::final() {
  if (finalized_) throw ProtocolError("Hasher::final: called twice");
  finalized_ = true;
  Digest d{};
  blake3_hasher_finalize(as_state(state_), d.data(), d.size());
  return d;
}

Digest hash_tagged(HashTag tag, std::span<const std::byte> bytes) {
  return Hasher(tag).update(bytes).final();
}

Digest blake3_256(std::span<const std::byte> bytes) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  blake3_hasher_update(&h, bytes.data(), bytes.size());
  Digest d{};
  blake3_hasher_finalize(&h, d.data(), d.size());
  return d;
}

std::string to_hex(std::span<const uint8_t> bytes) {
  std::string s(2 * bytes.size() + 1, '\0');  // sodium_bin2hex writes a terminator
  sodium_bin2hex(s.data(), s.size(), bytes.data(), bytes.size());
  s.pop_back();
  return s;
}

std::optional<size_t> hex_to_bytes(std::string_view hex, std::span<uint8_t> out) {
  if (hex.size() != 2 * out.size()) {
    throw ProtocolError("hex_to_bytes: " + std::to_string(hex.size()) + " characters for " +
                        std::to_string(out.size()) + " bytes");
  }
  const char* end = nullptr;
  size_t written = 0;
  if (sodium_hex2bin(out.data(), out.size(), hex.data(), hex.size(), nullptr, &written, &end) == 0 &&
      written == out.size()) {
    return std::nullopt;
  }
  sodium_memzero(out.data(), out.size());
  // sodium_hex2bin stops at the first non-digit, backing up to the start of a half-read pair; the
  // non-digit is then the pair's second character.
  size_t bad = static_cast<size_t>(end - hex.data());
  if (bad + 1 < hex.size() && std::isxdigit(static_cast<unsigned char>(hex[bad]))) ++bad;
  return bad;
}

Digest digest_from_hex(std::string_view hex) {
  Digest d{};
  if (hex.size() != 2 * d.size()) {
    throw ProtocolError("digest_from_hex: expected 64 hex characters, got " + std::to_string(hex.size()));
  }
  if (const auto bad = hex_to_bytes(hex, d)) {
    throw ProtocolError("digest_from_hex: character " + std::to_string(*bad) + " is not a hex digit");
  }
  return d;
}

}  // namespace tribunal
