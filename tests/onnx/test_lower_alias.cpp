// A weight read through an alias: torch.onnx.export writes one initializer and Identity nodes for a
// tensor two modules share (an eval-mode export's fused BatchNorm biases, tied weights), so a node may
// read a parameter under the Identity's output name. The lowering finds the parameter by the
// initializer's own name, and the product reads the one parameter twice (docs/onnx.md "Parameters").
#include <doctest/doctest.h>

// GCC 12 reports a false -Wrestrict inside std::string for protobuf's inlined set_x(const char*) (GCC
// bug 105329); the strings here are literals.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "onnx/lower.h"
#include "tests/onnx/onnx_test_data.h"

using namespace tribunal;

namespace {

void float_value(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
              const std::string& out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
}

}  // namespace

TEST_CASE("lower_onnx: a parameter read through an Identity alias is the parameter itself") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("alias");
  float_value(g->add_input(), "x", {2, 2});
  float_value(g->add_output(), "y", {2, 2});
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(2);
  for (float v : {1.0f, 2.0f, 3.0f, 4.0f}) w->add_float_data(v);
  add_node(g, "Identity", {"w"}, "w.shared");
  add_node(g, "MatMul", {"x", "w"}, "a");
  add_node(g, "MatMul", {"a", "w.shared"}, "y");
  const std::string bytes = m.SerializeAsString();
  const auto model = import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), "alias.onnx");
  CHECK(model->params() == std::vector<std::string>{"w"});

  LowerOptions o;
  o.inputs.push_back({"x", Shape{2, 2}});
  o.training = true;
  const LoweredGraph lowered = lower_onnx(*model, o);
  REQUIRE(lowered.nodes.size() == 2);
  CHECK(lowered.nodes[1].inputs.at(1).kind == LoweredRef::Kind::Param);
  CHECK(lowered.nodes[1].inputs.at(1).index == 0);
  Tensor x(Shape{2, 2});
  for (int64_t i = 0; i < 4; ++i) x[i] = static_cast<float>(i + 1);  // x = w: y = w³
  const std::vector<Tensor> y = testing::execute(lowered, {x}, onnx_param_tensors(*model));
  REQUIRE(y.size() == 1);
  CHECK(y[0].values()[0] == 37.0f);  // [[1,2],[3,4]]³ = [[37,54],[81,118]]
  CHECK(y[0].values()[1] == 54.0f);
  CHECK(y[0].values()[2] == 81.0f);
  CHECK(y[0].values()[3] == 118.0f);
}
