// When each value of a step graph is read for the last time: the executor releases a node output's
// buffer to its pool once that node has run (engine/executor.h, docs/performance.md "Step memory"),
// and bench_gpt_step counts the forward values the backward pass still reads from it.
#pragma once

#include <cstddef>
#include <limits>
#include <vector>

#include "engine/graph.h"

namespace tribunal {

/// last_uses(): a value no node reads (a state, data or constant value left unread).
inline constexpr size_t kNoUse = std::numeric_limits<size_t>::max();

/// last[v] for every value v of `g`: the index of the last node (in node order, the order the executor
/// runs an unsharded graph in) that reads v; for a node output no node reads, the node that writes it;
/// kNoUse for a state, data or constant value no node reads.
std::vector<size_t> last_uses(const StepGraph& g);

/// The bytes (float32) of the node outputs written at or before node `n` that a node after `n` reads:
/// what must be held across that point. With `n` the loss node, the activations the backward pass
/// reads. `last` is last_uses(g).
uint64_t bytes_live_after(const StepGraph& g, const std::vector<size_t>& last, size_t n);

}  // namespace tribunal
