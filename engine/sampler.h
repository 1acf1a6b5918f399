// Which samples step t trains on: derivable by anyone from (seed, t) alone, in O(batch) time and
// memory (docs/numerics.md "Randomness", batches).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace tribunal {

/// Rounds of the swap-or-not shuffle: the Ethereum consensus specification's SHUFFLE_ROUND_COUNT.
inline constexpr uint32_t kShuffleRounds = 90;

/// The data-set index at `position` of epoch `epoch`'s order of [0, samples): the swap-or-not shuffle
/// (Hoang, Morris, Rogaway, "An Enciphering Scheme Based on a Card Shuffle", CRYPTO 2012; the
/// `compute_shuffled_index` of the Ethereum consensus specification) with kShuffleRounds rounds.
/// Round r: pivot = bounded(philox(seed, Shuffle, epoch, r)[0], samples), partner = (pivot + samples −
/// x) mod samples, m = max(x, partner); x becomes partner when bit m mod 128 of
/// philox(seed, ShuffleBits, epoch, r·2³² + m / 128) (word (m mod 128)/32, bit m mod 32) is 1. Each
/// round is an involution, so the whole map is a permutation, and one position costs O(rounds)
/// without building the epoch's order. Requires 0 ≤ position < samples < 2³²; `pivots` are the
/// epoch's kShuffleRounds pivots (shuffle_pivots).
int64_t shuffled_index(uint64_t seed, uint32_t epoch, int64_t samples, int64_t position,
                       const std::array<uint32_t, kShuffleRounds>& pivots);

/// The epoch's round pivots of shuffled_index.
std::array<uint32_t, kShuffleRounds> shuffle_pivots(uint64_t seed, uint32_t epoch, int64_t samples);

/// Batches of a job: epoch e = t / (samples / batch) (a partial last batch is dropped), and step t
/// takes positions [p·batch, (p+1)·batch) of epoch e's order (shuffled_index), p = t mod
/// (samples / batch). Holds only the current epoch's pivots. Throws EngineError unless
/// 1 ≤ batch ≤ samples < 2³².
class BatchSampler {
 public:
  BatchSampler(uint64_t seed, int64_t samples, int64_t batch);
  /// Sample indices of step t (t ≥ 0), length batch.
  std::vector<int64_t> indices(int64_t step);
  int64_t steps_per_epoch() const { return samples_ / batch_; }

 private:
  uint64_t seed_;
  int64_t samples_, batch_;
  int64_t epoch_ = -1;
  std::array<uint32_t, kShuffleRounds> pivots_{};
};

}  // namespace tribunal
