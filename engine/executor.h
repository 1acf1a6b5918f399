// Runs a StepGraph node by node with the RepOps kernels. Node outputs live in slots that are reused
// across steps (same graph shape → no allocation after the first step).
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "engine/graph.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// Which shards of a sharded step graph (StepGraph::node_shard) this process computes, for data-
/// parallel training: the nodes of the other shards are skipped, and `exchange` fills their partials
/// (StepGraph::partials) before the first node every rank runs. The default computes every shard.
struct ShardRun {
  int64_t first = 0;   ///< the first shard computed here
  int64_t count = -1;  ///< how many shards from `first` (-1: all)
  /// Called once, after the shard nodes: must write every partial of the shards not computed here
  /// (Executor::partial) from those computed here.
  std::function<void(class Executor&)> exchange;
};

class Executor {
 public:
  /// `reference` selects the scalar reference kernels instead of the fast ones (tests).
  explicit Executor(ThreadPool& pool, bool reference = false) : pool_(pool), reference_(reference) {}

  /// Called after node `index` ran, with its output tensors (may modify them: fault injection).
  using NodeHook = std::function<void(size_t index, std::span<Tensor* const> outputs)>;

  /// Runs every node of `g`. `state[i]` binds g.state_inputs[i], `data[i]` binds g.data_inputs[i];
  /// both must outlive the next call. Throws OpError from a kernel (e.g. a bad label).
  /// `shards` selects the shards computed here (sharded graphs only).
  void run(const StepGraph& g, std::span<const Tensor* const> state, std::span<const Tensor* const> data,
           const NodeHook& after_node = {}, const ShardRun& shards = {});

  /// The value's tensor after run() (state/data/constant values resolve to what they are bound to).
  const Tensor& value(ValueId v) const { return *bound_[v]; }

  /// The storage of node output `v` during ShardRun::exchange, for writing a partial received from
  /// another rank (already shaped).
  Tensor& partial(ValueId v) { return slots_.at(v); }

  /// Moves the tensors of g.state_outputs into `state` (swapping storage, no copy for node outputs).
  void take_next_state(const StepGraph& g, std::span<Tensor* const> state);

 private:
  ThreadPool& pool_;
  bool reference_;
  std::vector<Tensor> slots_;          // storage of node outputs, by value id
  std::vector<const Tensor*> bound_;   // every value's tensor, by value id
};

}  // namespace tribunal
