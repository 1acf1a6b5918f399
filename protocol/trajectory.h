// Which states a trajectory commits (docs/architecture.md "State and commitments"): the checkpoint steps of a
// job.
#pragma once

#include <cstdint>
#include <vector>

namespace tribunal {

/// Steps whose state hashes are the trajectory's leaves: 0, s, 2s, …, and T when T is not a
/// multiple of s. Requires s ≥ 1.
inline std::vector<uint64_t> checkpoint_steps(uint64_t steps, uint64_t stride) {
  std::vector<uint64_t> out;
  for (uint64_t t = 0; t <= steps; t += stride) out.push_back(t);
  if (out.back() != steps) out.push_back(steps);
  return out;
}

}  // namespace tribunal
