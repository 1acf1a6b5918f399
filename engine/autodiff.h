// Reverse-mode automatic differentiation over the op registry: appends the backward nodes of a
// graph's forward part, derived from each op's VJP rule (ops/registry.h), never written per model.
// Source: Griewank & Walther, "Evaluating Derivatives", ch. 3 (reverse mode); gradients of values
// used more than once are summed with Add nodes in reverse topological order.
#pragma once

#include <span>
#include <vector>

#include "engine/graph.h"

namespace tribunal {

/// Appends nodes computing d(loss)/d(w) for each w in `wrt` to the builder's graph and returns those
/// gradient values (same order). `loss` must be a scalar produced by the graph. Only nodes present
/// when called are differentiated. Throws OpError if an op on the path has no VJP rule, or if some
/// w does not influence the loss. `seed` is d(objective)/d(loss), the constant the sweep starts from
/// (1; a shard's loss in a sharded step graph weighs 1/S).
std::vector<ValueId> append_backward(GraphBuilder& builder, ValueId loss, std::span<const ValueId> wrt,
                                     float seed = 1.0f);

}  // namespace tribunal
