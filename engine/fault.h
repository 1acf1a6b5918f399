// Deliberate deviations from the honest computation: how a cheating provider is simulated (demo,
// tests, scenario scripts). A faulty trainer is the honest algorithm fed a wrong trace, so it answers
// every dispute question consistently with its own (wrong) trajectory.
#pragma once

#include <cstdint>

namespace tribunal {

struct Fault {
  /// Corrupt one node output: at step `step`, add `delta` to element `element` (every element when
  /// −1) of output `slot` of node `node`, right after the node runs (later nodes see the corrupted
  /// value).
  int64_t step = -1;
  int64_t node = -1;
  uint32_t slot = 0;
  int64_t element = 0;
  float delta = 1e-3f;

  /// Train on another sample: at step `swap_step`, batch position `swap_position` reads data-set row
  /// `swap_row` instead of the permutation's.
  int64_t swap_step = -1;
  int64_t swap_position = 0;
  int64_t swap_row = 0;

  /// Start from wrong weights: add this to element 0 of the first parameter of state 0.
  float init_delta = 0.0f;

  bool any() const { return step >= 0 || swap_step >= 0 || init_delta != 0.0f; }
};

}  // namespace tribunal
