#include "ops/tensor.h"

#include <new>
#include <string>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tribunal {

Shape::Shape(std::initializer_list<int64_t> dims)
    : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw OpError("shape of rank " + std::to_string(dims.size()) + " exceeds the maximum rank 4");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) throw OpError("shape dimension " + std::to_string(i) + " is negative");
    dims_[i] = dims[i];
  }
  rank_ = static_cast<int>(dims.size());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<size_t>(i)] != o.dims_[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<size_t>(i)]);
  }
  return s + "]";
}

void* allocate_aligned(size_t bytes) {
  if (bytes < kHugePageBytes) return ::operator new (bytes, std::align_val_t{64});
  void* p = ::operator new (bytes, std::align_val_t{kHugePageBytes});
#if defined(__linux__)
  // Advice only: where huge pages are off or none is free the kernel backs the range with 4 KiB pages.
  // A huge page backs only a whole aligned 2 MiB of the range, so a tail under 2 MiB keeps 4 KiB
  // pages: taking whole huge pages instead measured no faster and held 1.30× the terms' memory (docs/
  // performance.md "Step memory and step 0").
  (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

void deallocate_aligned(void* p, size_t bytes) noexcept {
  if (bytes < kHugePageBytes)
    ::operator delete (p, std::align_val_t{64});
  else
    ::operator delete (p, std::align_val_t{kHugePageBytes});
}

Tensor Tensor::uninitialized(Shape shape) {
  Tensor t;
  t.shape_ = shape;
  decltype(t.data_) data(static_cast<size_t>(shape.numel()));  // default-initialized: not written
  t.data_.swap(data);
  return t;
}

Tensor::Tensor(Shape shape) : shape_(shape), data_(static_cast<size_t>(shape.numel()), 0.0f) {}

Tensor::Tensor(Shape shape, std::span<const float> values) : shape_(shape) {
  if (static_cast<int64_t>(values.size()) != shape.numel())
    throw OpError("tensor of shape " + shape.str() + " needs " + std::to_string(shape.numel()) +
                  " values, got " + std::to_string(values.size()));
  data_.assign(values.begin(), values.end());
}

void Tensor::reshape_storage(const Shape& shape) {
  shape_ = shape;
  data_.resize(static_cast<size_t>(shape.numel()));
}

}  // namespace tribunal
