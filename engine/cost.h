// What a dispute about a job can cost the referee, derived from the job alone (docs/protocol.md,
// "Bounds on a dispute's cost"): the referee checks it against its operator's policy when a dispute
// is opened, before it builds a graph, computes anything of the job or holds any state of it.
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

/// Bytes of one party's rounding log of a node's outputs (rounding-log jobs, OpenLog): ⌈output
/// elements / 5⌉ (packed trits, docs/commitments.md).
uint64_t node_log_bytes(const StepGraph& g, const Node& n);

/// What re-executing a node costs the referee in a rounding-log job against a RepOps one (docs/protocol.md,
/// "Bounds on a dispute's cost"): the float64 op (with the contractions' widened operands and quanta)
/// and both parties' logs replayed, against the fast float32 kernel on one thread. Measured by
/// bench_rounding_log ("referee": the shipped jobs' heaviest contraction and heaviest other node, in a
/// child process each; docs/performance.md, "Rounding-log mode"): CPU 2.8–9.7× RepOps', peak memory
/// 1.8–5.3× the node's float32 inputs and outputs. The factors leave room above the largest:
/// CPU per unit of node_work…
inline constexpr uint64_t kRoundingLogCpu = 16;
/// … and memory per byte of the node's float32 inputs and outputs.
inline constexpr uint64_t kRoundingLogMemory = 8;

/// The referee's cost of re-executing node `n` in a job of `mode`: node_work, times kRoundingLogCpu in
/// a rounding-log job (RepOps and fast jobs: node_work). Saturates at UINT64_MAX.
uint64_t node_reexecution_work(const StepGraph& g, const Node& n, NumericsMode mode);

/// Bytes the referee holds to re-execute node `n` in a job of `mode`: its inputs as it reads them
/// (node_input_bytes) and its outputs, float32; in a rounding-log job that times kRoundingLogMemory.
/// Saturates at UINT64_MAX.
uint64_t node_memory(const StepGraph& g, const Node& n, NumericsMode mode);

/// The most a dispute about the job can make the referee hold and compute. Every term saturates at
/// its type's maximum.
struct DisputeCost {
  int64_t parameters = 0;  ///< the model's parameter count (the referee derives state_hash(0))
  /// node_reexecution_work of the step graph's heaviest node: node_work, in a rounding-log job times
  /// the float64 re-execution's CPU factor
  uint64_t max_node_work = 0;
  std::string heaviest_node;     ///< its op and output, e.g. "conv2d 'conv0.out'" (the first of equals)
  uint64_t max_node_memory = 0;  ///< node_memory of the node that needs the most (the job's mode)
  /// The most one located node makes the referee receive: node_input_bytes, plus in a rounding-log
  /// job both parties' node_log_bytes (docs/protocol.md "Rounding-log jobs").
  uint64_t max_opened_bytes = 0;
  uint64_t nodes = 0;   ///< nodes of one step graph (the level-3 bisection domain; what building it costs)
  int64_t shards = 1;   ///< train.shards: per-shard copies of the forward and backward nodes
  int64_t batch = 0;    ///< batch rows: the sampler's and the gathers' indices per step
  int64_t context = 0;  ///< a GPT's context T (its attention is T×T per head); 0 for the others
};

/// The cost of a dispute about `job` on a data set of shape `data`, derived from the job text's
/// numbers alone: no graph is built and nothing of the job is computed. Time O(terms of the job
/// text + train.shards) arithmetic, whatever the sizes (a GPT's layers count once); memory O(1)
/// beyond the parameter list of an MLP or CNN. Equal, term for term, to dispute_cost(job, graph)
/// on the job's built step graph (tests/referee/test_dispute_cost.cpp). Throws OpError when the
/// job's shapes do not fit its ops (the graph would not build) and EngineError when the data shape
/// does not fit the model (label width).
DisputeCost dispute_cost(const JobSpec& job, const DataShape& data);

/// The same terms measured on a built step graph of `job` (any step's: they all have the same
/// shapes): the parameter count from the job's state layout, then the maxima and count over `graph`.
DisputeCost dispute_cost(const JobSpec& job, const StepGraph& graph);

}  // namespace tribunal
