// Philox4x32-10 counter-based random numbers (Salmon, Moraes, Dror, Shaw: "Parallel Random Numbers:
// As Easy as 1, 2, 3", SC'11; Random123). A pure function of (key, counter): any element's random
// number can be regenerated anywhere, in any order, on any thread or device, without state.
#pragma once

#include <array>
#include <cstdint>

#include "ops/portable.h"

namespace tribunal {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

/// The Philox4x32 bijection with 10 rounds; key bumped by the Weyl constants before rounds 2..10.
TRIBUNAL_HD PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k[0] += kW0;
      k[1] += kW1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

/// What a random stream is for; part of the counter so streams never collide.
/// Shuffle draws the pivots and ShuffleBits the swap decisions of the batch sampler's swap-or-not rounds
/// (engine/sampler.h).
enum class RandomPurpose : uint32_t { Init = 1, Shuffle = 2, Dropout = 3, ShuffleBits = 4 };

/// The tribunal keying (docs/numerics.md): key = seed, counter = (element lo, element hi, step, purpose).
/// Returns 4 independent 32-bit words for that element.
TRIBUNAL_HD PhiloxCounter philox_random(uint64_t seed, RandomPurpose purpose, uint32_t step,
                                        uint64_t element) {
  return philox4x32_10({static_cast<uint32_t>(element), static_cast<uint32_t>(element >> 32), step,
                        static_cast<uint32_t>(purpose)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

/// A float in [0, 1) from the top 24 bits of a word: exactly k·2⁻²⁴, k ∈ [0, 2²⁴).
TRIBUNAL_HD float uniform_from_bits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-8f;  // 2^-24, exact
}

/// An integer in [0, n) from a word by Lemire's multiply-shift (bias < n/2³², deterministic).
TRIBUNAL_HD uint32_t bounded_from_bits(uint32_t bits, uint32_t n) {
  return static_cast<uint32_t>((static_cast<uint64_t>(bits) * n) >> 32);
}

}  // namespace tribunal
