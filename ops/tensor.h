// Tensor: the one value type of RepOps. float32, row-major, rank 0..4, owning, 64-byte aligned.
// Source: docs/numerics.md "Arithmetic" (IEEE-754 binary32 storage).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tribunal {

/// Error raised by the op library for bad shapes, arity or attributes. Message says what and where.
class OpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Maximum tensor rank (docs/numerics.md: shapes up to rank 4, e.g. `reshape`).
inline constexpr int kMaxRank = 4;

/// A tensor shape: rank 0..4, each dimension ≥ 0. Row-major: the last dimension is contiguous.
class Shape {
 public:
  Shape() = default;
  /// Throws OpError if more than kMaxRank dims or a negative dim.
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  std::span<const int64_t> dims() const { return {dims_.data(), static_cast<size_t>(rank_)}; }
  /// Number of elements (1 for rank 0).
  int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[64, 784]" — for error messages.
  std::string str() const;

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

/// Storage of `bytes` aligned to 64 bytes (one cache line, one AVX-512 register). From
/// kHugePageBytes up it is aligned to 2 MiB and, on Linux, advised for transparent huge pages
/// (madvise(2) MADV_HUGEPAGE): a first write to a fresh 4 KiB page costs ≈ 12 µs on the VMs of
/// docs/performance.md ("Step memory and step 0"), and a step's working set is a million of them.
/// Throws std::bad_alloc. Free with deallocate_aligned and the same `bytes`.
void* allocate_aligned(size_t bytes);
void deallocate_aligned(void* p, size_t bytes) noexcept;
/// The size from which allocate_aligned asks for huge pages: one 2 MiB page.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

/// Allocator over allocate_aligned.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { deallocate_aligned(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

/// AlignedAllocator whose element construction without a value leaves the element unwritten (default-
/// initialized), so a tensor's storage can be made first and then written (zeros, in parallel) once.
template <class T>
struct DefaultInitAllocator : AlignedAllocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <class U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

/// Owning float32 tensor, zero-initialized on construction.
class Tensor {
 public:
  Tensor() : Tensor(Shape{}) {}  ///< a scalar +0
  explicit Tensor(Shape shape);
  Tensor(Shape shape, std::span<const float> values);  ///< Throws OpError on size mismatch.
  /// A tensor of `shape` whose elements are not written yet (their values unspecified): for a caller
  /// that writes every element itself, e.g. a first touch of fresh pages on many threads.
  static Tensor uninitialized(Shape shape);

  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> values() { return {data_.data(), data_.size()}; }
  std::span<const float> values() const { return {data_.data(), data_.size()}; }
  /// Raw little-endian bytes of the elements (what is hashed and checkpointed).
  std::span<const std::byte> bytes() const { return std::as_bytes(values()); }
  float& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  float operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }

  /// Changes the shape, reallocating only when the element count grows beyond capacity(). Contents
  /// unspecified after (elements past the old count are not written).
  void reshape_storage(const Shape& shape);
  /// The elements its storage holds without reallocating (≥ numel()).
  size_t capacity() const { return data_.capacity(); }

 private:
  Shape shape_;
  std::vector<float, DefaultInitAllocator<float>> data_;
};

}  // namespace tribunal
