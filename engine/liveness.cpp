#include "engine/liveness.h"

#include <cstdint>

namespace tribunal {

std::vector<size_t> last_uses(const StepGraph& g) {
  std::vector<size_t> last(g.values.size(), kNoUse);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (ValueId v : g.nodes[n].inputs) last.at(v) = n;
    for (ValueId v : g.nodes[n].outputs)
      if (last.at(v) == kNoUse) last[v] = n;  // read by nothing (so far): it dies where it is written
  }
  return last;
}

uint64_t bytes_live_after(const StepGraph& g, const std::vector<size_t>& last, size_t n) {
  uint64_t bytes = 0;
  for (size_t m = 0; m <= n && m < g.nodes.size(); ++m)
    for (ValueId v : g.nodes[m].outputs)
      if (last.at(v) > n) bytes += static_cast<uint64_t>(g.values[v].shape.numel()) * 4;
  return bytes;
}

}  // namespace tribunal
