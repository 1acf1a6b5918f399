#include "engine/autodiff.h"

#include <optional>

namespace tribunal {

std::vector<ValueId> append_backward(GraphBuilder& builder, ValueId loss, std::span<const ValueId> wrt, float seed) {
  StepGraph& g = builder.graph();
  if (g.values.at(loss).shape.rank() != 0) throw OpError("autodiff: the loss must be a scalar");
  const size_t forward_nodes = g.nodes.size();

  // Which values depend on a differentiated input (forward sweep).
  std::vector<bool> active(g.values.size(), false);
  for (ValueId w : wrt) active[w] = true;
  for (size_t n = 0; n < forward_nodes; ++n) {
    bool any = false;
    for (ValueId in : g.nodes[n].inputs) any = any || active[in];
    for (ValueId out : g.nodes[n].outputs) active[out] = any;
  }

  std::vector<std::optional<ValueId>> grad(g.values.size());
  Tensor one(Shape{});
  one[0] = seed;
  grad[loss] = builder.add_constant("grad/" + g.values[loss].name, std::move(one));

  // Reverse sweep. Node references are re-read by index: emitting appends to g.nodes.
  for (size_t n = forward_nodes; n-- > 0;) {
    const Node node = g.nodes[n];
    bool has_grad = false;
    for (ValueId out : node.outputs) has_grad = has_grad || grad[out].has_value();
    if (!has_grad) continue;
    std::vector<bool> needs(node.inputs.size());
    bool any_need = false;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      needs[i] = active[node.inputs[i]];
      any_need = any_need || needs[i];
    }
    if (!any_need) continue;
    const OpInfo& info = op_info(node.op);
    if (!info.vjp) throw OpError(std::string("autodiff: op '") + info.name + "' has no VJP rule");

    std::vector<ValueRef> out_grads;
    for (ValueId out : node.outputs) {
      if (!grad[out]) throw OpError(std::string("autodiff: op '") + info.name + "' needs the gradient of every output");
      out_grads.push_back(*grad[out]);
    }
    std::unique_ptr<bool[]> need_flags(new bool[needs.size()]);
    for (size_t i = 0; i < needs.size(); ++i) need_flags[i] = needs[i];
    std::vector<ValueRef> in_grads(node.inputs.size(), 0);
    const size_t values_before = g.values.size();
    const VjpArgs args{node.attrs, node.inputs, node.outputs, out_grads,
                       std::span<const bool>(need_flags.get(), needs.size())};
    info.vjp(builder, args, in_grads);
    grad.resize(g.values.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (!needs[i]) continue;
      const ValueId in = node.inputs[i];
      if (in_grads[i] >= values_before) g.values[in_grads[i]].name = "grad/" + g.values[in].name;
      builder.set_emit_name("grad/" + g.values[in].name);
      grad[in] = grad[in] ? builder.emit(OpKind::Add, {}, {*grad[in], in_grads[i]}) : in_grads[i];
      grad.resize(g.values.size());
    }
  }

  std::vector<ValueId> result;
  for (ValueId w : wrt) {
    if (!grad[w]) throw OpError("autodiff: '" + g.values[w].name + "' does not influence the loss");
    result.push_back(*grad[w]);
  }
  return result;
}

}  // namespace tribunal
