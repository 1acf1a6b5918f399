#include "engine/sampler.h"

#include <algorithm>
#include <string>

#include "engine/error.h"
#include "ops/philox.h"

namespace tribunal {

std::array<uint32_t, kShuffleRounds> shuffle_pivots(uint64_t seed, uint32_t epoch, int64_t samples) {
  std::array<uint32_t, kShuffleRounds> pivots{};
  for (uint32_t r = 0; r < kShuffleRounds; ++r)
    pivots[r] = bounded_from_bits(philox_random(seed, RandomPurpose::Shuffle, epoch, r)[0],
                                  static_cast<uint32_t>(samples));
  return pivots;
}

int64_t shuffled_index(uint64_t seed, uint32_t epoch, int64_t samples, int64_t position,
                       const std::array<uint32_t, kShuffleRounds>& pivots) {
  const auto n = static_cast<uint64_t>(samples);
  auto x = static_cast<uint64_t>(position);
  for (uint32_t r = 0; r < kShuffleRounds; ++r) {
    const uint64_t partner = (pivots[r] + n - x) % n;
    const uint64_t m = std::max(x, partner);  // the pair {x, partner} draws one decision
    const auto words = philox_random(seed, RandomPurpose::ShuffleBits, epoch, (uint64_t{r} << 32) | (m >> 7));
    if ((words[(m & 127) >> 5] >> (m & 31)) & 1u) x = partner;
  }
  return static_cast<int64_t>(x);
}

BatchSampler::BatchSampler(uint64_t seed, int64_t samples, int64_t batch)
    : seed_(seed), samples_(samples), batch_(batch) {
  if (batch < 1 || batch > samples || samples >= (int64_t{1} << 32))
    throw EngineError("batch sampler: need 1 <= batch (" + std::to_string(batch) + ") <= samples (" +
                      std::to_string(samples) + ") < 2^32");
}

std::vector<int64_t> BatchSampler::indices(int64_t step) {
  const int64_t per_epoch = steps_per_epoch();
  const int64_t epoch = step / per_epoch, pos = step % per_epoch;
  if (epoch != epoch_) {
    pivots_ = shuffle_pivots(seed_, static_cast<uint32_t>(epoch), samples_);
    epoch_ = epoch;
  }
  std::vector<int64_t> out(static_cast<size_t>(batch_));
  for (int64_t j = 0; j < batch_; ++j)
    out[static_cast<size_t>(j)] =
        shuffled_index(seed_, static_cast<uint32_t>(epoch), samples_, pos * batch_ + j, pivots_);
  return out;
}

}  // namespace tribunal
