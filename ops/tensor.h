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

/// Allocator that aligns storage to 64 bytes (one cache line, one AVX-512 register).
template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete (p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const {
    return true;
  }
};

/// Owning float32 tensor, zero-initialized on construction.
class Tensor {
 public:
  Tensor() : Tensor(Shape{}) {}  ///< a scalar +0
  explicit Tensor(Shape shape);
  Tensor(Shape shape, std::span<const float> values);  ///< Throws OpError on size mismatch.

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

  /// Changes the shape, reallocating only when the element count grows. Contents unspecified after.
  void reshape_storage(const Shape& shape);
  /// The elements its storage holds without reallocating (≥ numel()).
  size_t capacity() const { return data_.capacity(); }

 private:
  Shape shape_;
  std::vector<float, AlignedAllocator<float>> data_;
};

}  // namespace tribunal
