// The processes that train one job together (data parallel, docs/running.md "Data-parallel training
// over MPI"): each rank computes some shards of every step and the ranks exchange the shards'
// partials. The engine sees only this interface; the MPI implementation is mpi/mpi_world.h, and a
// process on its own is SoloWorld.
#pragma once

#include <cstddef>
#include <span>

namespace tribunal {

/// A fixed group of `size()` processes numbered 0 … size()−1, with the two collectives data-parallel
/// training needs. Every rank must make the same calls in the same order (collective semantics).
class World {
 public:
  virtual ~World() = default;
  /// This process's number, 0 ≤ rank < size.
  virtual int rank() const = 0;
  /// How many processes train together (≥ 1).
  virtual int size() const = 0;
  /// Every rank passes `mine` of the same length; `all` (size()·mine.size() bytes) receives every
  /// rank's bytes in rank order, on every rank. The result does not depend on the order in which the
  /// messages arrive. Throws EngineError on a transport failure.
  virtual void allgather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  /// Copies rank 0's `bytes` into every rank's `bytes` (the same length on every rank).
  virtual void broadcast(std::span<std::byte> bytes) = 0;
};

/// One process on its own: rank 0 of 1; the collectives copy.
class SoloWorld final : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all) override;
  void broadcast(std::span<std::byte>) override {}
};

}  // namespace tribunal
