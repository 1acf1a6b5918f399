// What a dispute about a job can cost the referee, derived from the job alone (docs/protocol.md,
// "Bounds on a dispute's cost"): the referee checks it against its operator's policy when a dispute
// is opened, before it holds any state, opened tensor or stored byte of it.
#pragma once

#include <cstdint>
#include <string>

#include "engine/graph.h"
#include "engine/job.h"

namespace tribunal {

/// Work of re-executing one node: multiply-adds for the contractions (linear, matmul, conv2d and
/// its input and weight gradients: output elements × the length of each output's fma chain), else
/// the elements the op reads and writes (of a data-set table, only the gathered rows). Saturates at
/// UINT64_MAX.
uint64_t node_work(const StepGraph& g, const Node& n);

/// Bytes of a node's input tensors (float32; of a data-set table, the gathered rows): what a referee
/// receives when it opens them (OpenInputs: tensors, or proven samples).
uint64_t node_input_bytes(const StepGraph& g, const Node& n);

/// The most a dispute about the job can make the referee hold and compute.
struct DisputeCost {
  int64_t parameters = 0;          ///< the model's parameter count (the referee derives state_hash(0))
  uint64_t max_node_work = 0;      ///< node_work of the step graph's heaviest node
  std::string heaviest_node;       ///< its op and output, e.g. "conv2d 'conv0'"
  uint64_t max_opened_bytes = 0;   ///< node_input_bytes of the node with the largest inputs
  size_t nodes = 0;                ///< nodes of one step graph (the level-3 bisection domain)
};

/// The cost of a dispute about `job` whose step graphs look like `graph` (any step's: they all have
/// the same shapes): the parameter count from the job's state layout, then the maxima over the graph.
DisputeCost dispute_cost(const JobSpec& job, const StepGraph& graph);

}  // namespace tribunal
