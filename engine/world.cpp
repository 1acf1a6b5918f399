#include "engine/world.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <vector>

namespace tribunal {

namespace {
// Each rank's failure message in the second exchange of a failed agreement (NUL-terminated).
constexpr size_t kMessageBytes = 1024;
}  // namespace

RankFailure::RankFailure(int rank, int size, const std::string& what)
    : EngineError("rank " + std::to_string(rank) + " of " + std::to_string(size) + " failed: " + what),
      rank_(rank) {}

// Collective. Round 1: every rank's flag (failed or not). Only when one is set, round 2, which every
// rank then knows to make: every rank's message, in rank order. A failed agreement leaves the ranks
// in step (each made the same two exchanges), so they can go on with their next collective.
void World::agree(const std::string* failure) {
  const auto n = static_cast<size_t>(size());
  if (n == 1) {
    if (failure) throw RankFailure(0, 1, *failure);
    return;
  }
  const int32_t mine = failure ? 1 : 0;
  std::vector<int32_t> flags(n);
  gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(flags)));
  const auto failed = std::find(flags.begin(), flags.end(), 1);
  if (failed == flags.end()) return;
  std::array<char, kMessageBytes> message{};
  if (failure) std::memcpy(message.data(), failure->data(), std::min(failure->size(), kMessageBytes - 1));
  std::vector<char> messages(kMessageBytes * n);
  gather(std::as_bytes(std::span(message)), std::as_writable_bytes(std::span(messages)));
  const auto r = static_cast<size_t>(failed - flags.begin());
  const char* what = messages.data() + r * kMessageBytes;
  throw RankFailure(static_cast<int>(r), size(), std::string(what, strnlen(what, kMessageBytes - 1)));
}

void World::allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
  agree(nullptr);
  gather(mine, all);
}

void World::broadcast(std::span<std::byte> bytes) {
  agree(nullptr);
  broadcast_from_root(bytes);
}

void World::check() {
  agree(nullptr);
}

void World::fail(const std::string& what) {
  agree(&what);
  throw RankFailure(rank(), size(), what);  // not reached: agree() threw, naming this rank or a lower one
}

void SoloWorld::gather(std::span<const std::byte> mine, std::span<std::byte> all) {
  assert(all.size() == mine.size());
  std::copy(mine.begin(), mine.end(), all.begin());
}

}  // namespace tribunal
