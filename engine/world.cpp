#include "engine/world.h"

#include <algorithm>
#include <cassert>

namespace tribunal {

void SoloWorld::allgather(std::span<const std::byte> mine, std::span<std::byte> all) {
  assert(all.size() == mine.size());
  std::copy(mine.begin(), mine.end(), all.begin());
}

}  // namespace tribunal
