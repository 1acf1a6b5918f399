#include "engine/executor.h"

#include <cassert>

namespace tribunal {

void Executor::run(const StepGraph& g, std::span<const Tensor* const> state, std::span<const Tensor* const> data,
                   const NodeHook& after_node) {
  assert(state.size() == g.state_inputs.size() && data.size() == g.data_inputs.size());
  slots_.resize(g.values.size());
  bound_.assign(g.values.size(), nullptr);
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    switch (val.source) {
      case ValueSource::State: bound_[v] = state[val.index]; break;
      case ValueSource::Data: bound_[v] = data[val.index]; break;
      case ValueSource::Constant: bound_[v] = &g.constants[val.index]; break;
      case ValueSource::Node:
        if (slots_[v].shape() != val.shape || slots_[v].values().size() != static_cast<size_t>(val.shape.numel()))
          slots_[v].reshape_storage(val.shape);
        bound_[v] = &slots_[v];
        break;
    }
  }
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    in.clear();
    out.clear();
    for (ValueId v : node.inputs) in.push_back(bound_[v]);
    for (ValueId v : node.outputs) out.push_back(&slots_[v]);
    if (reference_)
      run_reference(node.op, node.attrs, in, out);
    else
      run_on_device(device_, node.op, node.attrs, in, out, pool_);
    if (after_node) after_node(n, out);
  }
}

void Executor::take_next_state(const StepGraph& g, std::span<Tensor* const> state) {
  assert(state.size() == g.state_outputs.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const ValueId v = g.state_outputs[i];
    if (g.values[v].source == ValueSource::Node)
      std::swap(*state[i], slots_[v]);
    else
      *state[i] = *bound_[v];
  }
}

}  // namespace tribunal
