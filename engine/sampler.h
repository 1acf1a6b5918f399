// Which samples step t trains on: derivable by anyone from (seed, t) alone (DESIGN §5 "Data").
#pragma once

#include <cstdint>
#include <vector>

namespace tribunal {

/// The permutation of [0, samples) for one epoch: Fisher–Yates from the end, the swap partner of
/// position i being bounded_from_bits(philox_random(seed, Shuffle, epoch, i)[0], i + 1).
/// Source: Knuth TAOCP vol. 2 §3.4.2 Algorithm P; Lemire 2019 for the bounded integer.
std::vector<int64_t> epoch_permutation(uint64_t seed, int64_t epoch, int64_t samples);

/// Batches of a job: epoch e = t / (samples / batch) (a partial last batch is dropped), and step t
/// takes positions [p·batch, (p+1)·batch) of epoch e's permutation, p = t mod (samples / batch).
/// Caches the current epoch's permutation. Requires 1 ≤ batch ≤ samples.
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
  std::vector<int64_t> perm_;
};

}  // namespace tribunal
