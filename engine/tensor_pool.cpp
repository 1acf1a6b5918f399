#include "engine/tensor_pool.h"

#include <cstring>
#include <iterator>
#include <utility>

namespace tribunal {

Tensor TensorPool::take(const Shape& shape, ThreadPool* threads) {
  const auto n = static_cast<size_t>(shape.numel());
  const auto fit = free_.lower_bound(n);
  if (fit == free_.end() || fit->first > n + n / 4) {
    Tensor t = Tensor::uninitialized(shape);
    made_bytes_ += n * sizeof(float);
    float* data = t.data();
    const auto zero = [data](int64_t b, int64_t e) {
      std::memset(data + b, 0, static_cast<size_t>(e - b) * sizeof(float));
    };
    // A range per thread of at least one huge page (ops/tensor.h allocate_aligned).
    constexpr auto kGrain = static_cast<int64_t>(kHugePageBytes / sizeof(float));
    if (threads)
      threads->parallel_for(static_cast<int64_t>(n), zero, kGrain);
    else
      zero(0, static_cast<int64_t>(n));
    return t;
  }
  Tensor t = std::move(fit->second.tensor);
  free_bytes_ -= fit->first * sizeof(float);
  free_.erase(fit);
  t.reshape_storage(shape);  // within its capacity: no allocation
  return t;
}

void TensorPool::give(Tensor t, uint64_t generation) {
  // By capacity, not size: a tensor that served a smaller shape still holds its whole storage.
  const size_t n = t.capacity();
  if (n == 0 || n * sizeof(float) > max_bytes_) return;  // no storage (a moved-from tensor), or too big
  free_.emplace(n, Kept{std::move(t), generation});
  free_bytes_ += n * sizeof(float);
  while (free_bytes_ > max_bytes_) {
    const auto largest = std::prev(free_.end());
    free_bytes_ -= largest->first * sizeof(float);
    free_.erase(largest);
  }
}

void TensorPool::drop_given_before(uint64_t generation) {
  for (auto it = free_.begin(); it != free_.end();)
    if (it->second.generation < generation) {
      free_bytes_ -= it->first * sizeof(float);
      it = free_.erase(it);
    } else {
      ++it;
    }
}

}  // namespace tribunal
