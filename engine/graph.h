// The step graph: one training step as a flat, topologically ordered list of nodes (docs/architecture.md "One
// training step", docs/protocol.md). The node list is the bisection domain of the dispute game's level 3;
// node i's record will be H(op kind ‖ attributes ‖ input hashes ‖ output hashes). A graph is a pure function
// of the job spec and the step index, so every party (the referee included) builds the same one without
// training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "ops/tensor.h"

namespace tribunal {

using ValueId = uint32_t;

/// Where a value comes from.
enum class ValueSource : uint8_t {
  State,     ///< tensor `index` of the state before the step
  Data,      ///< data-set table `index` (0 = inputs, 1 = labels)
  Constant,  ///< graph constant `index` (e.g. the loss seed 1.0, the next step counter)
  Node,      ///< output `slot` of node `index`
};

struct Value {
  std::string name;  ///< for logs and verdicts, e.g. "l0.weight", "grad/l0.weight"
  Shape shape;
  ValueSource source = ValueSource::Node;
  uint32_t index = 0;
  uint32_t slot = 0;
};

struct Node {
  OpKind op = OpKind::Count;
  Attrs attrs;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
};

/// A contiguous block of shards [first, first + count) of a sharded step graph; first = −1: all of them.
struct ShardSpan {
  int32_t first = -1;
  int32_t count = 0;
  bool operator==(const ShardSpan&) const = default;
};

struct StepGraph {
  std::vector<Value> values;
  std::vector<Node> nodes;  ///< topological order: inputs are produced before use
  std::vector<Tensor> constants;
  std::vector<ValueId> state_inputs;   ///< value of each state tensor, canonical state order
  std::vector<ValueId> state_outputs;  ///< the next state, same order
  std::vector<ValueId> data_inputs;    ///< the data-set tables
  ValueId loss = 0;                    ///< the training loss of this step (a scalar)
  /// Sharded step graphs only (job.shards = S > 1, docs/numerics.md "Sharded batch reductions"):
  /// node_shards[n] is the block of shards node n's outputs depend on alone — {s, 1} for a node of
  /// shard s, {first, count} for a tree-combine node summing those shards' partials, {-1, 0} for a
  /// node that depends on every shard (the last combines, clipping, the optimizer). Shard nodes come
  /// first, shard by shard; a rank runs the nodes within its shards (engine/executor.h). Empty when S = 1.
  std::vector<ShardSpan> node_shards;
  /// partials[s]: the values of shard s that the tree combines read (its loss, then its gradient of
  /// every parameter in canonical order), the same count and shapes for every shard. Empty when S = 1.
  std::vector<std::vector<ValueId>> partials;
};

/// Appends values and nodes to a StepGraph, inferring output shapes through the op registry.
/// Also the VjpBuilder the autodiff hands to each op's VJP rule.
class GraphBuilder : public VjpBuilder {
 public:
  explicit GraphBuilder(StepGraph& graph) : g_(graph) {}

  ValueId add_state(std::string name, Shape shape);
  ValueId add_data(std::string name, Shape shape);
  ValueId add_constant(std::string name, Tensor value);

  /// Appends a node; returns its output values. Throws OpError on bad shapes or attributes.
  std::vector<ValueId> add_node(OpKind op, Attrs attrs, std::vector<ValueId> inputs, const std::string& name);

  /// VjpBuilder: appends a one-output node, its value named by set_emit_name().
  ValueRef emit(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) override;
  /// VjpBuilder: appends a node and returns all its outputs.
  std::vector<ValueRef> emit_all(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) override;
  /// VjpBuilder: the shape of a graph value.
  Shape shape(ValueRef v) const override { return g_.values.at(v).shape; }

  /// Names given to nodes emitted through emit() (set by the autodiff while it differentiates).
  void set_emit_name(std::string name) { emit_name_ = std::move(name); }

  StepGraph& graph() { return g_; }

 private:
  ValueId add_value(Value v);
  StepGraph& g_;
  std::string emit_name_ = "grad";
};

}  // namespace tribunal
