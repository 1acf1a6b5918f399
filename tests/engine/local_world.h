// Ranks as threads of one test process: a World whose collectives go through shared memory, so the
// data-parallel code path (engine/data_parallel.h) is tested without an MPI launcher.
#pragma once

#include <barrier>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "engine/world.h"

namespace tribunal::testing {

/// What the ranks of one run_ranks call share: one buffer per rank and a barrier.
struct LocalGroup {
  explicit LocalGroup(int ranks) : slots(static_cast<size_t>(ranks)), sync(ranks) {}
  std::vector<std::vector<std::byte>> slots;
  std::barrier<> sync;
};

/// Rank `rank` of a LocalGroup. Collectives: write this rank's slot, wait for all, read, wait again
/// (so no slot is overwritten before every rank has read it).
class LocalWorld final : public World {
 public:
  LocalWorld(LocalGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_.slots.size()); }

 protected:
  void gather(std::span<const std::byte> mine, std::span<std::byte> all) override {
    group_.slots[static_cast<size_t>(rank_)].assign(mine.begin(), mine.end());
    group_.sync.arrive_and_wait();
    for (size_t r = 0; r < group_.slots.size(); ++r)
      std::memcpy(all.data() + r * mine.size(), group_.slots[r].data(), mine.size());
    group_.sync.arrive_and_wait();
  }
  void broadcast_from_root(std::span<std::byte> bytes) override {
    if (rank_ == 0) group_.slots[0].assign(bytes.begin(), bytes.end());
    group_.sync.arrive_and_wait();
    if (rank_ != 0) std::memcpy(bytes.data(), group_.slots[0].data(), bytes.size());
    group_.sync.arrive_and_wait();
  }

 private:
  LocalGroup& group_;
  int rank_;
};

/// Runs `body` on `ranks` threads, each with its LocalWorld, and returns rank 0's result.
template <class Body>
auto run_ranks(int ranks, const Body& body) {
  LocalGroup group(ranks);
  using Result = decltype(body(std::declval<World&>()));
  std::vector<Result> results(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      LocalWorld world(group, r);
      results[static_cast<size_t>(r)] = body(world);
    });
  for (std::thread& t : threads) t.join();
  return results.front();
}

}  // namespace tribunal::testing
