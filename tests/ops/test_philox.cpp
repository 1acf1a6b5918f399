// Philox4x32-10 (ops/philox.h): the Random123 known-answer vectors, so that our generator is the
// published one (other implementations, e.g. cuRAND's or JAX's, can then be checked against the same
// vectors), the tribunal keying, and the exact integer-to-float/bounded conversions built on it.
#include <doctest/doctest.h>

#include <cstdint>
#include <ios>
#include <iterator>
#include <random>
#include <vector>

#include "ops/philox.h"

using namespace tribunal;

TEST_CASE("philox4x32_10 reproduces the Random123 known-answer vectors") {
  // Random123 kat_vectors, "philox4x32 10" lines: counter, key → output.
  struct Kat {
    PhiloxCounter ctr;
    PhiloxKey key;
    PhiloxCounter out;
  };
  const Kat kats[] = {
      {{0u, 0u, 0u, 0u}, {0u, 0u}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
       {0xffffffffu, 0xffffffffu},
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
       {0xa4093822u, 0x299f31d0u},
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Kat& k : kats) {
    const PhiloxCounter got = philox4x32_10(k.ctr, k.key);
    INFO("ctr[0] = 0x" << std::hex << k.ctr[0] << ", key[0] = 0x" << k.key[0]);
    CHECK(got[0] == k.out[0]);
    CHECK(got[1] == k.out[1]);
    CHECK(got[2] == k.out[2]);
    CHECK(got[3] == k.out[3]);
  }
}

TEST_CASE("philox4x32_10 is a function of (counter, key): every input word changes the output") {
  const PhiloxCounter c{1u, 2u, 3u, 4u};
  const PhiloxKey k{5u, 6u};
  const PhiloxCounter base = philox4x32_10(c, k);
  CHECK(philox4x32_10(c, k) == base);  // no hidden state
  for (int i = 0; i < 4; ++i) {
    PhiloxCounter c2 = c;
    c2[static_cast<size_t>(i)] ^= 1u;
    CHECK(philox4x32_10(c2, k) != base);
  }
  for (int i = 0; i < 2; ++i) {
    PhiloxKey k2 = k;
    k2[static_cast<size_t>(i)] ^= 0x80000000u;
    CHECK(philox4x32_10(c, k2) != base);
  }
}

TEST_CASE("philox_random keys by seed and counts by (element, step, purpose) as documented") {
  const uint64_t seed = 0x0123456789abcdefULL;
  const uint64_t element = 0x00000007fffffffeULL;
  const PhiloxCounter want = philox4x32_10(
      {0xfffffffeu, 0x7u, 42u, static_cast<uint32_t>(RandomPurpose::Dropout)}, {0x89abcdefu, 0x01234567u});
  CHECK(philox_random(seed, RandomPurpose::Dropout, 42u, element) == want);
  // Distinct purposes, steps, elements (including the high word) and seeds give distinct streams.
  const PhiloxCounter a = philox_random(seed, RandomPurpose::Init, 0, 0);
  CHECK(philox_random(seed, RandomPurpose::Shuffle, 0, 0) != a);
  CHECK(philox_random(seed, RandomPurpose::Init, 1, 0) != a);
  CHECK(philox_random(seed, RandomPurpose::Init, 0, 1) != a);
  CHECK(philox_random(seed, RandomPurpose::Init, 0, uint64_t{1} << 32) != a);
  CHECK(philox_random(seed + 1, RandomPurpose::Init, 0, 0) != a);
  CHECK(philox_random(seed + (uint64_t{1} << 32), RandomPurpose::Init, 0, 0) != a);
}

TEST_CASE("uniform_from_bits: exactly k·2^-24 for the top 24 bits k, always in [0, 1)") {
  CHECK(uniform_from_bits(0u) == 0.0f);
  CHECK(uniform_from_bits(0xFFu) == 0.0f);  // the low 8 bits are dropped
  CHECK(uniform_from_bits(0x100u) == 0x1p-24f);
  CHECK(uniform_from_bits(0x80000000u) == 0.5f);
  CHECK(uniform_from_bits(0xFFFFFFFFu) == 1.0f - 0x1p-24f);  // the largest value, strictly below 1
  CHECK(uniform_from_bits(0xFFFFFFFFu) < 1.0f);

  // Exactness: 24-bit integers are floats, and scaling by a power of two is exact. Failures are
  // counted (one CHECK, the first bad input reported) rather than asserted per draw.
  std::mt19937 rng(1234);
  int bad = 0;
  uint32_t first_bad = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    const float u = uniform_from_bits(bits);
    const bool ok =
        u >= 0.0f && u < 1.0f && static_cast<double>(u) * 16777216.0 == static_cast<double>(bits >> 8);
    if (!ok && bad++ == 0) first_bad = bits;
  }
  INFO("first bad input 0x" << std::hex << first_bad);
  CHECK(bad == 0);
  // 2u − 1 (the init map) is exact too: the result has at most 24 significant bits.
  for (uint32_t k : {0u, 1u, 0x7FFFFFu, 0x800000u, 0x800001u, 0xFFFFFFu}) {
    const float u = uniform_from_bits(k << 8);
    CHECK(static_cast<double>(u * 2.0f - 1.0f) == 2.0 * static_cast<double>(k) / 16777216.0 - 1.0);
  }
}

TEST_CASE("bounded_from_bits: floor(bits·n / 2^32), always < n") {
  const uint32_t ns[] = {1u, 2u, 3u, 7u, 10u, 60000u, 0x7FFFFFFFu, 0x80000001u, 0xFFFFFFFFu};
  for (uint32_t n : ns) {
    INFO("n = " << n);
    CHECK(bounded_from_bits(0u, n) == 0u);
    CHECK(bounded_from_bits(0xFFFFFFFFu, n) == n - 1);
  }
  std::mt19937 rng(99);
  int bad = 0;
  uint32_t first_bits = 0, first_n = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint32_t bits = rng();
    const uint32_t n = ns[static_cast<size_t>(i) % std::size(ns)];
    const uint32_t r = bounded_from_bits(bits, n);
    // The definition, checked as an inequality: r·2^32 ≤ bits·n < (r+1)·2^32 (bits·n fits in 64 bits;
    // (r+1)·2^32 can be 2^64, so that side is compared in 128 bits).
    const uint64_t prod = static_cast<uint64_t>(bits) * n;
    const bool ok = r < n && (static_cast<uint64_t>(r) << 32) <= prod &&
                    static_cast<unsigned __int128>(prod) < (static_cast<unsigned __int128>(r) + 1) << 32;
    if (!ok && bad++ == 0) first_bits = bits, first_n = n;
  }
  {
    INFO("first bad input: bits 0x" << std::hex << first_bits << ", n " << std::dec << first_n);
    CHECK(bad == 0);
  }
  // Philox words mapped to [0, 10) land in each bucket about equally often (chi-square, 9 dof;
  // the 0.1% critical value is 27.9), a smoke test that the word and the map are not degenerate.
  std::vector<int> counts(10, 0);
  const int draws = 100000;
  for (int i = 0; i < draws / 4; ++i)
    for (uint32_t w : philox_random(7, RandomPurpose::Shuffle, 0, static_cast<uint64_t>(i)))
      ++counts[bounded_from_bits(w, 10)];
  double chi2 = 0.0;
  for (int c : counts) chi2 += (c - draws / 10.0) * (c - draws / 10.0) / (draws / 10.0);
  INFO("chi-square = " << chi2);
  CHECK(chi2 < 27.9);
}
