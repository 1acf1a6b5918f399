// A time on the game's clock for tests: `at(900)` is 900 ms after the clock's epoch.
#pragma once

#include <chrono>
#include <cstdint>

#include "protocol/game.h"

namespace tribunal::testing {

inline GameTime at(int64_t ms) {
  return GameTime(std::chrono::milliseconds(ms));
}

}  // namespace tribunal::testing
