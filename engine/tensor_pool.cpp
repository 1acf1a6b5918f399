#include "engine/tensor_pool.h"

#include <iterator>
#include <utility>

namespace tribunal {

Tensor TensorPool::take(const Shape& shape) {
  const auto n = static_cast<size_t>(shape.numel());
  const auto fit = free_.lower_bound(n);
  if (fit == free_.end() || fit->first > n + n / 4) return Tensor(shape);
  Tensor t = std::move(fit->second.tensor);
  free_bytes_ -= fit->first * sizeof(float);
  free_.erase(fit);
  t.reshape_storage(shape);  // within its capacity: no allocation (elements past the old size are zeroed)
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
