// The fixed binary tree that combines the shards' partials of a sharded step graph
// (docs/numerics.md "Sharded batch reductions"). Its shape depends on the partial count only, never on
// which process computed which partial, so any number of ranks reproduces the same bits.
#pragma once

#include <span>
#include <string>

#include "engine/graph.h"

namespace tribunal {

/// Appends Add nodes summing `partials` (n ≥ 1 values of one shape) in the fixed tree: level by level,
/// adjacent pairs (0+1), (2+3), … in order, an odd last value carried up unchanged, until one value
/// remains. For 6 partials: ((p0+p1) + (p2+p3)) + (p4+p5). The root's value is named `name`, the inner
/// nodes' `name` + "/tree<level>.<i>". Returns the root (partials[0] itself when n = 1: no node).
/// partials[i] counts as shard i's: each node's StepGraph::node_shards entry is the block of shards
/// it sums (so a rank holding a whole block can combine it before the exchange). Throws OpError when
/// the partials' shapes differ or there are none.
ValueId append_tree_sum(GraphBuilder& builder, std::span<const ValueId> partials, const std::string& name);

}  // namespace tribunal
