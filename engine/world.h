// The processes that train one job together (data parallel, docs/running.md "Data-parallel training
// over MPI"): each rank computes some shards of every step and the ranks exchange the shards'
// partials. The engine sees only this interface; the MPI implementation is mpi/mpi_world.h, and a
// process on its own is SoloWorld.
//
// No rank may wait forever for one that failed. Every collective first makes the ranks agree that
// none has failed (one 4-byte allgather); a rank whose work throws takes part in its next collective
// only to say so (World::fail), and every rank then throws RankFailure from that same collective,
// naming the failed rank and its error. This is chosen over MPI_Abort because it leaves every rank
// in step: a provider under mpirun reports the failed job and trains the next one, and `tribunal
// train` exits 1 on every rank with the error. It holds because every rank makes the same sequence
// of collectives, so the failed rank's next collective meets every other rank at the same one, and
// no rank can pass an agreement without every rank. A rank that dies without throwing (killed,
// crashed) is the launcher's to handle: mpirun ends the job when a rank exits abnormally.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "engine/error.h"

namespace tribunal {

/// Thrown on every rank of a World, from the same collective, when a rank failed (World::fail).
class RankFailure : public EngineError {
 public:
  /// "rank R of K failed: WHAT".
  RankFailure(int rank, int size, const std::string& what);
  /// The failed rank (the lowest, when several failed at once).
  int rank() const { return rank_; }

 private:
  int rank_;
};

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
  /// messages arrive. Throws RankFailure when a rank failed (fail()) instead of taking part.
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all);
  /// Copies rank 0's `bytes` into every rank's `bytes` (the same length on every rank). Throws
  /// RankFailure when a rank failed instead of taking part.
  void broadcast(std::span<std::byte> bytes);
  /// A collective that moves no data: returns when no rank failed, else throws RankFailure. Called by
  /// every rank at the end of work that must succeed on all of them (lockstep()).
  void check();
  /// Called by a rank whose work failed, in place of its next collective: every rank (this one too)
  /// throws RankFailure naming this rank and `what` (its first 1023 bytes).
  [[noreturn]] void fail(const std::string& what);

 protected:
  /// The transport, with no agreement (the public collectives add it): rank-ordered allgather of
  /// equal-length buffers, and a broadcast from rank 0. An implementation must not throw for a
  /// transport failure after which the ranks could be out of step (MpiWorld aborts the job instead).
  virtual void gather(std::span<const std::byte> mine, std::span<std::byte> all) = 0;
  virtual void broadcast_from_root(std::span<std::byte> bytes) = 0;

 private:
  void agree(const std::string* failure);
};

/// One process on its own: rank 0 of 1; the collectives copy.
class SoloWorld final : public World {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

 protected:
  void gather(std::span<const std::byte> mine, std::span<std::byte> all) override;
  void broadcast_from_root(std::span<std::byte>) override {}
};

/// Runs `work` as one lockstep region of `world`, on every rank: an exception it throws on this rank
/// (anything but RankFailure) is told to every rank at their next collective (World::fail), and at
/// the end every rank checks that none failed (World::check), so that a failure after the last
/// exchange (e.g. rank 0 writing its last checkpoint) ends every rank too. Returns what `work`
/// returns; throws RankFailure on every rank when any failed. One rank alone: `work()` as it is.
template <class Work>
auto lockstep(World& world, Work&& work) -> decltype(work()) {
  if (world.size() == 1) return work();
  try {
    if constexpr (std::is_void_v<decltype(work())>) {
      work();
      world.check();
    } else {
      auto result = work();
      world.check();
      return result;
    }
  } catch (const RankFailure&) {
    throw;  // every rank learned it at the same collective: nothing more to agree on
  } catch (const std::exception& e) {
    world.fail(e.what());
  } catch (...) {
    world.fail("an unknown exception");
  }
}

}  // namespace tribunal
