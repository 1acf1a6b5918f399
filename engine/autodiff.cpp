#include "engine/autodiff.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace tribunal {
namespace {

// The first node the loss depends on: the sweeps below start there, not at node 0. In a sharded
// step graph shard s's loss depends on none of the earlier shards' nodes, so differentiating each
// shard costs its own nodes, not the whole graph built so far (linear, not quadratic, in the shard
// count). Nodes skipped this way have no gradient, so the emitted nodes are the same either way.
size_t first_node_of(const StepGraph& g, ValueId loss) {
  size_t first = g.nodes.size();
  std::unordered_set<uint32_t> seen;
  std::vector<ValueId> stack{loss};
  while (!stack.empty()) {
    const Value& v = g.values[stack.back()];
    stack.pop_back();
    if (v.source != ValueSource::Node || !seen.insert(v.index).second) continue;
    first = std::min<size_t>(first, v.index);
    for (ValueId in : g.nodes[v.index].inputs) stack.push_back(in);
  }
  return first;
}

}  // namespace

std::vector<ValueId> append_backward(GraphBuilder& builder, ValueId loss, std::span<const ValueId> wrt,
                                     float seed) {
  StepGraph& g = builder.graph();
  if (g.values.at(loss).shape.rank() != 0) throw OpError("autodiff: the loss must be a scalar");
  const size_t forward_nodes = g.nodes.size();
  const size_t first_node = first_node_of(g, loss);

  // Which values depend on a differentiated input (forward sweep). Sparse: only the values the
  // swept nodes touch are entered, so the cost does not grow with the graph before first_node.
  std::unordered_set<ValueId> active(wrt.begin(), wrt.end());
  for (size_t n = first_node; n < forward_nodes; ++n) {
    bool any = false;
    for (ValueId in : g.nodes[n].inputs) any = any || active.count(in) != 0;
    if (any)
      for (ValueId out : g.nodes[n].outputs) active.insert(out);
  }

  std::unordered_map<ValueId, ValueId> grad;
  Tensor one(Shape{});
  one[0] = seed;
  grad[loss] = builder.add_constant("grad/" + g.values[loss].name, std::move(one));

  // Reverse sweep. Node references are re-read by index: emitting appends to g.nodes.
  for (size_t n = forward_nodes; n-- > first_node;) {
    const Node node = g.nodes[n];
    bool has_grad = false;
    for (ValueId out : node.outputs) has_grad = has_grad || grad.count(out) != 0;
    if (!has_grad) continue;
    std::vector<bool> needs(node.inputs.size());
    bool any_need = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      needs[i] = active.count(node.inputs[i]) != 0;
      any_need = any_need || needs[i];
    }
    if (!any_need) continue;
    const OpInfo& info = op_info(node.op);
    if (!info.vjp) throw OpError(std::string("autodiff: op '") + info.name + "' has no VJP rule");

    std::vector<ValueRef> out_grads;
    for (ValueId out : node.outputs) {
      const auto it = grad.find(out);
      if (it == grad.end())
        throw OpError(std::string("autodiff: op '") + info.name + "' needs the gradient of every output");
      out_grads.push_back(it->second);
    }
    std::unique_ptr<bool[]> need_flags(new bool[needs.size()]);
    for (size_t i = 0; i < needs.size(); ++i) need_flags[i] = needs[i];
    std::vector<ValueRef> in_grads(node.inputs.size(), 0);
    const size_t values_before = g.values.size();
    const VjpArgs args{node.attrs, node.inputs, node.outputs, out_grads,
                       std::span<const bool>(need_flags.get(), needs.size())};
    info.vjp(builder, args, in_grads);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!needs[i]) continue;
      const ValueId in = node.inputs[i];
      if (in_grads[i] >= values_before) g.values[in_grads[i]].name = "grad/" + g.values[in].name;
      builder.set_emit_name("grad/" + g.values[in].name);
      const auto it = grad.find(in);
      if (it == grad.end())
        grad.emplace(in, in_grads[i]);
      else
        it->second = builder.emit(OpKind::Add, {}, {it->second, in_grads[i]});
    }
  }

  std::vector<ValueId> result;
  for (ValueId w : wrt) {
    const auto it = grad.find(w);
    if (it == grad.end()) throw OpError("autodiff: '" + g.values[w].name + "' does not influence the loss");
    result.push_back(it->second);
  }
  return result;
}

}  // namespace tribunal
