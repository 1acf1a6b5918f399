#include "engine/sampler.h"

#include <cstddef>
#include <utility>

#include "ops/philox.h"

namespace tribunal {

std::vector<int64_t> epoch_permutation(uint64_t seed, int64_t epoch, int64_t samples) {
  std::vector<int64_t> perm(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i) perm[static_cast<size_t>(i)] = i;
  for (int64_t i = samples - 1; i > 0; --i) {
    const uint32_t bits = philox_random(seed, RandomPurpose::Shuffle, static_cast<uint32_t>(epoch), static_cast<uint64_t>(i))[0];
    const int64_t j = bounded_from_bits(bits, static_cast<uint32_t>(i + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

BatchSampler::BatchSampler(uint64_t seed, int64_t samples, int64_t batch)
    : seed_(seed), samples_(samples), batch_(batch) {}

std::vector<int64_t> BatchSampler::indices(int64_t step) {
  const int64_t per_epoch = steps_per_epoch();
  const int64_t epoch = step / per_epoch, pos = step % per_epoch;
  if (epoch != epoch_) {
    perm_ = epoch_permutation(seed_, epoch, samples_);
    epoch_ = epoch;
  }
  return {perm_.begin() + pos * batch_, perm_.begin() + (pos + 1) * batch_};
}

}  // namespace tribunal
