#include "engine/graph.h"

namespace tribunal {

ValueId GraphBuilder::add_value(Value v) {
  g_.values.push_back(std::move(v));
  return static_cast<ValueId>(g_.values.size() - 1);
}

ValueId GraphBuilder::add_state(std::string name, Shape shape) {
  const auto index = static_cast<uint32_t>(g_.state_inputs.size());
  ValueId id = add_value({std::move(name), shape, ValueSource::State, index, 0});
  g_.state_inputs.push_back(id);
  return id;
}

ValueId GraphBuilder::add_data(std::string name, Shape shape) {
  const auto index = static_cast<uint32_t>(g_.data_inputs.size());
  ValueId id = add_value({std::move(name), shape, ValueSource::Data, index, 0});
  g_.data_inputs.push_back(id);
  return id;
}

ValueId GraphBuilder::add_constant(std::string name, Tensor value) {
  const auto index = static_cast<uint32_t>(g_.constants.size());
  const Shape shape = value.shape();
  g_.constants.push_back(std::move(value));
  return add_value({std::move(name), shape, ValueSource::Constant, index, 0});
}

std::vector<ValueId> GraphBuilder::add_node(OpKind op, Attrs attrs, std::vector<ValueId> inputs,
                                            const std::string& name) {
  std::vector<Shape> in_shapes;
  in_shapes.reserve(inputs.size());
  for (ValueId v : inputs) in_shapes.push_back(g_.values.at(v).shape);
  const std::vector<Shape> out_shapes = infer_shapes(op, attrs, in_shapes);
  const auto node_index = static_cast<uint32_t>(g_.nodes.size());
  Node node{op, std::move(attrs), std::move(inputs), {}};
  for (size_t i = 0; i < out_shapes.size(); ++i) {
    std::string vname = out_shapes.size() == 1 ? name : name + "#" + std::to_string(i);
    node.outputs.push_back(add_value(
        {std::move(vname), out_shapes[i], ValueSource::Node, node_index, static_cast<uint32_t>(i)}));
  }
  g_.nodes.push_back(std::move(node));
  return g_.nodes.back().outputs;
}

ValueRef GraphBuilder::emit(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) {
  return add_node(kind, std::move(attrs), std::move(inputs), emit_name_).front();
}

std::vector<ValueRef> GraphBuilder::emit_all(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) {
  return add_node(kind, std::move(attrs), std::move(inputs), emit_name_);
}

}  // namespace tribunal
