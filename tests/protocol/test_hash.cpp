// BLAKE3, tags, hex and tensor leaves (protocol/hash.h, protocol/tensor_hash.h).
// Expected hex values are those of tests/fixtures/commitment_kat.txt, written by
// tools/commitment_kat.py (an independent Python implementation; ctest's commitment_kat test checks it).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "protocol/hash.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"
#include "tests/protocol/commitment_kat.h"

using namespace tribunal;

namespace {

std::span<const std::byte> str_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

std::span<const std::byte> f32_bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span(v));
}

float f32_from_bits(uint32_t bits) {
  return std::bit_cast<float>(bits);
}

Digest leaf(std::vector<int64_t> shape, const std::vector<float>& v) {
  return tensor_leaf(DType::F32, shape, f32_bytes(v));
}

// x_i = 0.5·i − 1000, exact in float32 (as in tools/commitment_kat.py).
std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) - 1000.0f;
  return v;
}

// i mod 251 for i < n: the input pattern of BLAKE3's official test vectors.
std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i % 251);
  return v;
}

// The known answers of tests/fixtures/commitment_kat.txt other than the Merkle roots
// (test_merkle.cpp), each built from the same input as in tools/commitment_kat.py.
const std::pair<const char*, std::function<Digest()>> kHashKats[] = {
    // BLAKE3, unkeyed, 32-byte output; 5121 bytes (i mod 251, as in BLAKE3's test vectors) span six
    // of its 1 KiB chunks, so its tree of chaining values is exercised
    {"blake3_256/empty", [] { return blake3_256({}); }},
    {"blake3_256/abc", [] { return blake3_256(str_bytes("abc")); }},
    {"blake3_256/pattern_5121",
     [] {
       const std::vector<uint8_t> bytes = pattern(5121);
       return blake3_256(std::as_bytes(std::span(bytes)));
     }},
    {"hash_tagged/tensor/abc", [] { return hash_tagged(HashTag::Tensor, str_bytes("abc")); }},
    {"hash_tagged/job/empty", [] { return hash_tagged(HashTag::Job, {}); }},
    {"tensor_leaf/rank0", [] { return leaf({}, {3.5f}); }},
    // rank 2, with -0.0, a NaN with payload 1 (hashed as 0x7FC00000) and +inf
    {"tensor_leaf/rank2_specials",
     [] {
       return leaf({2, 3}, {1.0f, -0.0f, f32_from_bits(0x7FC00001u), 0.5f, INFINITY, -2.0f});
     }},
    // empty tensors: one empty chunk; the shape still distinguishes them
    {"tensor_leaf/empty_0", [] { return leaf({0}, {}); }},
    {"tensor_leaf/empty_2x0",
     [] {
       return leaf({2, 0}, {});
     }},
    // 160000 bytes: chunks of 65536, 65536, 28928
    {"tensor_leaf/ramp_40000", [] { return leaf({40000}, ramp(40000)); }},
    // the same with NaNs at elements 5000, 5001 (payloads 1, sign set) and 20000 (second chunk): the
    // NaN-free bytes around them are hashed in place, the NaNs as 0x7FC00000
    {"tensor_leaf/ramp_40000_nans",
     [] {
       std::vector<float> v = ramp(40000);
       v[5000] = f32_from_bits(0x7FC00001u);
       v[5001] = f32_from_bits(0xFFC00000u);
       v[20000] = f32_from_bits(0x7F800001u);
       return leaf({40000}, v);
     }},
};

}  // namespace

TEST_CASE("hash and tensor_leaf known answers (tests/fixtures/commitment_kat.txt)") {
  using testing::commitment_kat;
  for (const auto& kat : kHashKats) {  // no structured binding: clang 14 cannot capture one in CAPTURE
    const std::string kat_name = kat.first;
    CAPTURE(kat_name);
    CHECK(to_hex(kat.second()) == commitment_kat(kat_name));
  }
  // Every known answer the script writes is checked: here, or (merkle_root/…) in test_merkle.cpp.
  for (const auto& entry : testing::commitment_kats()) {
    const std::string kat_name = entry.first;
    CAPTURE(kat_name);
    const bool here = std::any_of(std::begin(kHashKats), std::end(kHashKats),
                                  [&](const auto& k) { return kat_name == k.first; });
    CHECK((here || kat_name.starts_with("merkle_root/")));
  }
}

TEST_CASE("hash_tagged prefixes the tag byte") {
  CHECK(hash_tagged(HashTag::Tensor, str_bytes("abc")) == blake3_256(str_bytes("\x10"
                                                                               "abc")));
  CHECK(hash_tagged(HashTag::Sample, str_bytes("abc")) != hash_tagged(HashTag::Job, str_bytes("abc")));
}

TEST_CASE("hash_tagged's wide path is BLAKE3's digest at every length around its chunk and batch edges") {
  // hash_tagged hashes the chunks of tag ‖ bytes through its own tree schedule (protocol/hash.cpp);
  // the library's streaming hasher is the reference. Lengths: every one up to three BLAKE3 chunks,
  // each side of every chunk edge up to past the wide path's limit (128 chunks with the tag), a
  // 64 KiB tensor chunk; from an odd address, as a chunk inside a tensor may start.
  std::vector<uint8_t> data(140000 + 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 3 * 1024; ++n) lengths.push_back(n);
  for (size_t k = 4; k <= 130; ++k)
    for (size_t n : {k * 1024 - 2, k * 1024 - 1, k * 1024, k * 1024 + 1}) lengths.push_back(n);
  for (size_t n : {size_t{65536}, size_t{65535}, size_t{16 * 1024 - 1}, size_t{17 * 1024}, size_t{140000}})
    lengths.push_back(n);
  for (size_t n : lengths) {
    CAPTURE(n);
    const auto bytes = std::as_bytes(std::span(data).subspan(3, n));
    const Digest want = Hasher(HashTag::TensorChunk).update(bytes).final();
    REQUIRE(hash_tagged(HashTag::TensorChunk, bytes) == want);
  }
  // An empty span whose data() is null (an empty tensor's one chunk).
  CHECK(hash_tagged(HashTag::TensorChunk, std::span<const std::byte>()) ==
        Hasher(HashTag::TensorChunk).final());
}

TEST_CASE("Hasher: incremental equals one-shot; u64 is little-endian; final() twice throws") {
  const std::string msg(1000, 'x');
  Hasher h(HashTag::Sample);
  h.update(str_bytes(std::string_view(msg).substr(0, 1)))
      .update(str_bytes(std::string_view(msg).substr(1, 500)));
  Hasher copy = h;  // a copy continues from the same state
  h.update(str_bytes(std::string_view(msg).substr(501)));
  copy.update(str_bytes(std::string_view(msg).substr(501)));
  const Digest expected = hash_tagged(HashTag::Sample, str_bytes(msg));
  CHECK(h.final() == expected);
  CHECK(copy.final() == expected);
  CHECK_THROWS_AS(h.final(), ProtocolError);
  CHECK_THROWS_AS(copy.update_u8(1), ProtocolError);

  const uint8_t le[] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xab};
  CHECK(Hasher(HashTag::Job).update_u64(0x0102030405060708ull).update_u8(0xab).final() ==
        hash_tagged(HashTag::Job, std::as_bytes(std::span(le))));
}

TEST_CASE("to_hex / digest_from_hex round-trip and reject malformed input") {
  const Digest d = blake3_256(str_bytes("abc"));
  const std::string hex = to_hex(d);
  CHECK(hex.size() == 64);
  CHECK(digest_from_hex(hex) == d);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(digest_from_hex(upper) == d);

  CHECK_THROWS_AS(digest_from_hex(""), ProtocolError);
  CHECK_THROWS_AS(digest_from_hex(hex.substr(0, 63)), ProtocolError);
  CHECK_THROWS_AS(digest_from_hex(hex + "0"), ProtocolError);
  CHECK_THROWS_WITH_AS(digest_from_hex(hex.substr(0, 62)), doctest::Contains("got 62"), ProtocolError);
  for (size_t pos : {size_t{0}, size_t{1}, size_t{37}, size_t{63}}) {
    for (char bad : {'g', 'G', ' ', 'x', '-', '\0'}) {
      std::string s = hex;
      s[pos] = bad;
      CAPTURE(pos);
      const std::string want = "character " + std::to_string(pos) + " ";
      CHECK_THROWS_WITH_AS(digest_from_hex(s), doctest::Contains(want.c_str()), ProtocolError);
    }
  }
}

TEST_CASE("tensor_leaf matches the encoding in tensor_hash.h") {
  const std::vector<float> v = ramp(40000);
  const auto bytes = f32_bytes(v);
  const Digest chunk_root =
      merkle_root(std::vector<Digest>{tensor_chunk_hash(DType::F32, bytes.subspan(0, 65536)),
                                      tensor_chunk_hash(DType::F32, bytes.subspan(65536, 65536)),
                                      tensor_chunk_hash(DType::F32, bytes.subspan(131072))});
  const Digest expected = Hasher(HashTag::Tensor)
                              .update_u8(1)
                              .update_u8(2)
                              .update_u64(200)
                              .update_u64(200)
                              .update_u64(160000)
                              .update(chunk_root)
                              .final();
  CHECK(leaf({200, 200}, v) == expected);
  CHECK(tensor_chunk_hash(DType::F32, bytes.subspan(0, 64)) ==
        hash_tagged(HashTag::TensorChunk, bytes.subspan(0, 64)));
  // Same bytes, different shape: different leaf.
  CHECK(leaf({200, 200}, v) != leaf({40000}, v));
  CHECK(leaf({1}, {3.5f}) != leaf({}, {3.5f}));
}

TEST_CASE("tensor_leaf canonicalizes float32 NaNs, and only NaNs") {
  const float qnan = f32_from_bits(0x7FC00000u);
  const std::vector<uint32_t> nans = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,
                                      0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA5A5A5u};
  for (uint32_t bits : nans) {
    CAPTURE(bits);
    CHECK(leaf({3}, {1.0f, f32_from_bits(bits), 2.0f}) == leaf({3}, {1.0f, qnan, 2.0f}));
  }
  // Infinities are not NaNs.
  CHECK(leaf({1}, {INFINITY}) != leaf({1}, {qnan}));
  CHECK(leaf({1}, {-INFINITY}) != leaf({1}, {INFINITY}));
  // Signed zeros are different bits and different commitments.
  CHECK(leaf({2}, {0.0f, 1.0f}) != leaf({2}, {-0.0f, 1.0f}));

  // A large multi-chunk tensor: NaNs with varied payloads at chunk/block edges equal canonical ones.
  std::vector<float> a = ramp(50000), b = a;
  for (size_t i :
       {size_t{0}, size_t{1023}, size_t{1024}, size_t{16383}, size_t{16384}, size_t{40000}, size_t{49999}}) {
    a[i] = f32_from_bits(0xFF800000u | static_cast<uint32_t>(i + 1));
    b[i] = qnan;
  }
  CHECK(leaf({50000}, a) == leaf({50000}, b));
  b[49999] = 1.0f;
  CHECK(leaf({50000}, a) != leaf({50000}, b));
  // The canonical NaN bytes are what is hashed.
  const uint32_t canon = 0x7FC00000u;
  const float payload_nan = f32_from_bits(0xFFF00001u);
  CHECK(tensor_chunk_hash(DType::F32, std::as_bytes(std::span(&payload_nan, 1))) ==
        hash_tagged(HashTag::TensorChunk, std::as_bytes(std::span(&canon, 1))));
  // A whole 64 KiB chunk with NaNs (the block-by-block path) hashes as its canonical bytes do on the
  // wide path.
  std::vector<float> chunk = ramp(16384), canonical = chunk;
  for (size_t i : {size_t{5}, size_t{4095}, size_t{4096}, size_t{16383}}) {
    chunk[i] = f32_from_bits(0x7F800000u | static_cast<uint32_t>(i + 1));
    std::memcpy(&canonical[i], &canon, 4);
  }
  CHECK(tensor_chunk_hash(DType::F32, std::as_bytes(std::span(chunk))) ==
        hash_tagged(HashTag::TensorChunk, std::as_bytes(std::span(canonical))));
}

TEST_CASE("tensor_leaf rejects inconsistent input") {
  const std::vector<float> v = ramp(6);
  CHECK_THROWS_AS(tensor_leaf(DType::F32, std::vector<int64_t>{2, 2}, f32_bytes(v)), ProtocolError);
  CHECK_THROWS_AS(tensor_leaf(DType::F32, std::vector<int64_t>{-2, -3}, f32_bytes(v)), ProtocolError);
  CHECK_THROWS_AS(tensor_leaf(DType::F32, std::vector<int64_t>{int64_t{1} << 62, 1 << 4}, f32_bytes(v)),
                  ProtocolError);
  CHECK_THROWS_AS(tensor_leaf(static_cast<DType>(7), std::vector<int64_t>{6}, f32_bytes(v)), ProtocolError);
  CHECK_THROWS_AS(tensor_chunk_hash(DType::F32, f32_bytes(v).subspan(0, 7)), ProtocolError);
  CHECK_NOTHROW(tensor_leaf(DType::F32, std::vector<int64_t>{3, 2}, f32_bytes(v)));
}
