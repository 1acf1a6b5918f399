// The batch sampler (engine/sampler.h, docs/numerics.md "Randomness"): a permutation per epoch,
// derivable one position at a time, uniform enough to train on, and bounded in memory whatever the
// data set's size.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "engine/error.h"
#include "engine/sampler.h"

using namespace tribunal;

TEST_CASE("each epoch's order is a permutation of the data set") {
  for (int64_t n : {1, 2, 3, 7, 127, 128, 129, 1000, 4099}) {
    for (uint32_t epoch : {0u, 1u, 5u}) {
      const auto pivots = shuffle_pivots(77, epoch, n);
      std::vector<int64_t> order;
      for (int64_t p = 0; p < n; ++p) order.push_back(shuffled_index(77, epoch, n, p, pivots));
      std::vector<int64_t> sorted = order;
      std::sort(sorted.begin(), sorted.end());
      CAPTURE(n);
      CAPTURE(epoch);
      for (int64_t i = 0; i < n; ++i) REQUIRE(sorted[static_cast<size_t>(i)] == i);
      if (n >= 127) {
        // Shuffled: far from the identity and from the previous epoch's order.
        int64_t fixed = 0;
        for (int64_t i = 0; i < n; ++i) fixed += order[static_cast<size_t>(i)] == i;
        CHECK(fixed < n / 20 + 5);
      }
    }
  }
}

TEST_CASE("step t's batch is positions [pB, (p+1)B) of its epoch's order") {
  const int64_t n = 1003, batch = 10;  // 100 full batches per epoch; 3 samples dropped
  BatchSampler sampler(9, n, batch);
  CHECK(sampler.steps_per_epoch() == 100);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const auto pivots = shuffle_pivots(9, static_cast<uint32_t>(epoch), n);
    std::set<int64_t> seen;
    for (int64_t p = 0; p < 100; ++p) {
      const std::vector<int64_t> b = sampler.indices(epoch * 100 + p);
      REQUIRE(b.size() == 10);
      for (int64_t j = 0; j < batch; ++j)
        REQUIRE(b[static_cast<size_t>(j)] ==
                shuffled_index(9, static_cast<uint32_t>(epoch), n, p * batch + j, pivots));
      seen.insert(b.begin(), b.end());
    }
    CHECK(seen.size() == 1000);  // no sample twice in an epoch
  }
  // Any step can be asked for in any order (the referee asks for one step of a dispute).
  BatchSampler other(9, n, batch);
  CHECK(other.indices(250) == sampler.indices(250));
  CHECK(other.indices(3) == sampler.indices(3));
  CHECK(sampler.indices(0) != sampler.indices(100));                   // epochs differ
  CHECK(BatchSampler(10, n, batch).indices(0) != sampler.indices(0));  // seeds differ
}

TEST_CASE("golden batches: the sampler is part of the contract") {
  // Recorded from this code (docs/numerics.md): a change to the shuffle changes every trajectory
  // and must bump kRepOpsContractVersion.
  BatchSampler fashion(1234, 60000, 8);
  CHECK(fashion.indices(0) == std::vector<int64_t>{2921, 23919, 6018, 33760, 40256, 29306, 33989, 53732});
  CHECK(fashion.indices(7500) == std::vector<int64_t>{27263, 6121, 39687, 5655, 1860, 15907, 3646, 43212});
}

TEST_CASE("the first position is close to uniform over the data set") {
  // 20000 epochs of a 10-sample set: each index should be first ≈ 2000 times. Chi-square with 9
  // degrees of freedom stays below 27.9 with probability 0.999 for a uniform draw.
  constexpr int64_t n = 10, epochs = 20000;
  std::vector<double> count(n, 0);
  for (uint32_t e = 0; e < epochs; ++e)
    count[static_cast<size_t>(shuffled_index(3, e, n, 0, shuffle_pivots(3, e, n)))] += 1;
  double chi2 = 0;
  for (double c : count) chi2 += (c - 2000.0) * (c - 2000.0) / 2000.0;
  CAPTURE(chi2);
  CHECK(chi2 < 27.9);
}

TEST_CASE("a batch costs O(batch), whatever the data set's size") {
  // 2^32 − 1 samples: a permutation of them would take 32 GiB; a batch is computed directly.
  const int64_t n = (int64_t{1} << 32) - 1;
  BatchSampler sampler(5, n, 64);
  const std::vector<int64_t> b = sampler.indices(123456789);
  CHECK(std::set<int64_t>(b.begin(), b.end()).size() == 64);
  for (int64_t i : b) CHECK((i >= 0 && i < n));
}

TEST_CASE("the sampler refuses batches it cannot draw") {
  CHECK_THROWS_AS(BatchSampler(1, 10, 11), EngineError);
  CHECK_THROWS_AS(BatchSampler(1, 10, 0), EngineError);
  CHECK_THROWS_AS(BatchSampler(1, int64_t{1} << 32, 4), EngineError);
}
