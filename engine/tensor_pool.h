// Tensors kept for reuse, so that memory of a like size comes back with its pages already touched: the
// executor's node outputs from one node or step to the next (engine/executor.h, docs/performance.md
// "Step memory"), and a referee's re-executions (dispute/job_oracle.h), whose inputs and outputs are
// tens of MB at GPT-2-small dimensions. Freed to glibc, such buffers came back at other addresses often
// enough that every dispute first-touched fresh pages again (≈ 12 µs per 4 KiB page on the VMs of
// docs/performance.md, "The light referee") and zero-filled outputs that the op then overwrote.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>

#include "ops/tensor.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// A best-fit free list of tensors by element capacity: a kept tensor serves a request of n elements
/// when its capacity is n to 1.25 n (the smallest such), so a buffer is not tied up by a much smaller
/// value. Not thread-safe: one per thread or per executor.
class TensorPool {
 public:
  /// Keeps at most `max_bytes` of free tensors; giving back beyond it frees the largest ones first.
  explicit TensorPool(size_t max_bytes = std::numeric_limits<size_t>::max()) : max_bytes_(max_bytes) {}

  /// A tensor of `shape` whose contents are unspecified (a kept one, reshaped within its capacity), or
  /// a new one (zeros), whose pages `threads` first touch side by side when given (a fresh page's first
  /// write is the costly part of a new buffer: docs/performance.md "Step memory and step 0"). Not from
  /// within a task of `threads` (ThreadPool::parallel_for is not reentrant).
  Tensor take(const Shape& shape, ThreadPool* threads = nullptr);
  /// Keeps `t` for a later take(), stamped with `generation` (for drop_given_before), or frees it when
  /// it alone exceeds the pool's bytes.
  void give(Tensor t, uint64_t generation = 0);
  /// Frees the kept tensors given with a generation below `generation` (idle since then).
  void drop_given_before(uint64_t generation);
  /// The bytes of the tensors kept now (their capacity).
  size_t free_bytes() const { return free_bytes_; }
  /// The bytes of the new tensors take() has made so far (fresh memory; a kept one served the rest).
  uint64_t made_bytes() const { return made_bytes_; }

 private:
  struct Kept {
    Tensor tensor;
    uint64_t generation = 0;
  };
  size_t max_bytes_ = 0, free_bytes_ = 0;
  uint64_t made_bytes_ = 0;
  std::multimap<size_t, Kept> free_;  // by capacity (elements)
};

}  // namespace tribunal
