// BLAKE3 over its reference C implementation (cmake/blake3.cmake); libsodium for hex and sodium_init.
// See hash.h; docs/commitments.md.
#include "protocol/hash.h"

#include <blake3.h>
extern "C" {
#include <blake3_impl.h>  // the library's own SIMD primitives: blake3_hash_many, blake3_compress_in_place
}
#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <new>
#include <string>

namespace tribunal {
namespace {

static_assert(sizeof(Digest) == BLAKE3_OUT_LEN, "Digest must be BLAKE3_OUT_LEN bytes");

blake3_hasher* as_state(unsigned char* p) {
  return std::launder(reinterpret_cast<blake3_hasher*>(p));
}

// hash_tagged's wide path covers messages (tag included) of up to this many BLAKE3 chunks: a 64 KiB
// tensor chunk and its tag byte are 65.
constexpr size_t kWideMaxChunks = 128;

// H(tag ‖ bytes) with every full 1 KiB BLAKE3 chunk hashed in the widest SIMD batches the CPU has
// (AVX-512: 16 chunks side by side), for 1 + bytes.size() ≤ kWideMaxChunks · 1024.
//
// Why not blake3_hasher_update: the tag byte moves BLAKE3's chunk boundaries one byte into `bytes`,
// and the hasher only hashes chunks side by side within a subtree whose start is a multiple of its
// size (a stack of chaining values over contiguous input). After the first chunk that is subtrees of
// 1, 2, 4, 8 chunks before the first full batch of 16: a quarter of a 64 KiB chunk at a fraction of
// the width, half the speed of raw BLAKE3 on AVX-512 (docs/performance.md, "State hashing"). Here
// each chunk is named by its own pointer (the first one, with the tag, is copied to 1 KiB on the
// stack), so any 16 are one batch; then the tree above them is reduced level by level, pairs side by
// side, an odd last node carried up unchanged — the same tree as the specification's (BLAKE3 §2.1:
// the left subtree holds the largest power of two of chunks smaller than the total), so the same
// digest as blake3_hasher, which tests/protocol/test_hash.cpp checks length by length.
Digest hash_tagged_wide(HashTag tag, std::span<const std::byte> bytes) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t total = 1 + bytes.size();
  const size_t chunks = (total + BLAKE3_CHUNK_LEN - 1) / BLAKE3_CHUNK_LEN;
  // The last chunk goes through the block-by-block path below (it may be short, and a lone chunk is
  // the root); every other chunk is full.
  const size_t full = chunks - 1;
  uint8_t cvs[kWideMaxChunks][BLAKE3_OUT_LEN];
  alignas(64) uint8_t first[BLAKE3_CHUNK_LEN];
  first[0] = static_cast<uint8_t>(tag);
  if (!bytes.empty())  // an empty span's data() may be null, which memcpy may not be given
    std::memcpy(first + 1, in, std::min(bytes.size(), size_t{BLAKE3_CHUNK_LEN - 1}));
  const auto chunk_start = [&](size_t c) { return c == 0 ? first : in + c * BLAKE3_CHUNK_LEN - 1; };
  const uint8_t* starts[kWideMaxChunks] = {};
  for (size_t c = 0; c < full; ++c) starts[c] = chunk_start(c);
  // Chunk c's counter is c; the library takes its widest batches through them in order.
  if (full > 0)
    blake3_hash_many(starts, full, BLAKE3_CHUNK_LEN / BLAKE3_BLOCK_LEN, IV, 0, true, 0, CHUNK_START,
                     CHUNK_END, cvs[0]);
  // The last chunk, block by block (zero-padded, its true length in the block-length field).
  const size_t last_len = total - full * BLAKE3_CHUNK_LEN;
  const uint8_t* last = chunk_start(full);
  const size_t blocks = std::max<size_t>(1, (last_len + BLAKE3_BLOCK_LEN - 1) / BLAKE3_BLOCK_LEN);
  uint32_t cv[8];
  std::memcpy(cv, IV, sizeof cv);
  for (size_t b = 0; b < blocks; ++b) {
    alignas(64) uint8_t block[BLAKE3_BLOCK_LEN] = {};
    const size_t len = std::min<size_t>(BLAKE3_BLOCK_LEN, last_len - b * BLAKE3_BLOCK_LEN);
    std::memcpy(block, last + b * BLAKE3_BLOCK_LEN, len);
    uint8_t flags = (b == 0 ? CHUNK_START : 0) | (b + 1 == blocks ? CHUNK_END : 0);
    if (b + 1 == blocks && chunks == 1) flags |= ROOT;
    blake3_compress_in_place(cv, block, static_cast<uint8_t>(len), full, flags);
  }
  Digest d{};
  if (chunks == 1) {
    store_cv_words(d.data(), cv);
    return d;
  }
  store_cv_words(cvs[full], cv);
  // Parents level by level; cvs[2i] ‖ cvs[2i + 1] is one 64-byte parent block in place.
  size_t n = chunks;
  while (n > 2) {
    const size_t pairs = n / 2;
    const uint8_t* parents[kWideMaxChunks / 2];
    for (size_t i = 0; i < pairs; ++i) parents[i] = cvs[2 * i];
    uint8_t next[kWideMaxChunks / 2][BLAKE3_OUT_LEN];
    blake3_hash_many(parents, pairs, 1, IV, 0, false, PARENT, 0, 0, next[0]);
    if (n % 2 != 0) std::memcpy(next[pairs], cvs[n - 1], BLAKE3_OUT_LEN);
    n = pairs + n % 2;
    std::memcpy(cvs, next, n * BLAKE3_OUT_LEN);
  }
  alignas(64) uint8_t root_block[BLAKE3_BLOCK_LEN];
  std::memcpy(root_block, cvs, BLAKE3_BLOCK_LEN);
  std::memcpy(cv, IV, sizeof cv);
  blake3_compress_in_place(cv, root_block, BLAKE3_BLOCK_LEN, 0, PARENT | ROOT);
  store_cv_words(d.data(), cv);
  return d;
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
  if (bytes.size() < kWideMaxChunks * BLAKE3_CHUNK_LEN) return hash_tagged_wide(tag, bytes);
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
