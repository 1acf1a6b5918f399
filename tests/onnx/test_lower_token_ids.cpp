// Token ids (an int64 graph input, docs/onnx.md "Token ids"): carried as integral floats and read only
// as a Gather's indices — through a view first, as Hugging Face's GPT-2 does (input_ids.view(-1, T)) —
// and refused, naming the node, wherever else a model reads them. Small ModelProtos built here.
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
#include "ops/registry.h"
#include "tests/onnx/onnx_test_data.h"

namespace tribunal {
namespace {

/// ids int64 [batch, 4] → the nodes `add` builds → Y (of `out_type`); a float table[10, 3] and an int64
/// shape {−1, 4} initializer.
template <class Add>
onnx::ModelProto ids_model(const Add& add, std::vector<int64_t> out_dims,
                           int32_t out_type = onnx::TensorProto::FLOAT) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("ids");
  auto* it = in->mutable_type()->mutable_tensor_type();
  it->set_elem_type(onnx::TensorProto::INT64);
  it->mutable_shape()->add_dim()->set_dim_param("batch");
  it->mutable_shape()->add_dim()->set_dim_value(4);
  auto* out = g->add_output();
  out->set_name("Y");
  auto* ot = out->mutable_type()->mutable_tensor_type();
  ot->set_elem_type(out_type);
  for (int64_t d : out_dims)
    d < 0 ? ot->mutable_shape()->add_dim()->set_dim_param("n")
          : ot->mutable_shape()->add_dim()->set_dim_value(d);
  auto* table = g->add_initializer();
  table->set_name("table");
  table->set_data_type(onnx::TensorProto::FLOAT);
  table->add_dims(10);
  table->add_dims(3);
  for (int i = 0; i < 30; ++i) table->add_float_data(static_cast<float>(i));
  auto* shape = g->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(2);
  shape->add_int64_data(-1);
  shape->add_int64_data(4);
  add(*g);
  return m;
}

std::shared_ptr<const OnnxModel> import(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  return import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), "ids.onnx");
}

onnx::NodeProto* node(onnx::GraphProto& g, const char* name, const char* type, std::vector<std::string> in,
                      const char* out) {
  auto* n = g.add_node();
  n->set_name(name);
  n->set_op_type(type);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

}  // namespace

TEST_CASE("lower_onnx: token ids through a view into a Gather: the table's rows at the ids") {
  const auto model = import(ids_model(
      [](onnx::GraphProto& g) {
        node(g, "view", "Reshape", {"ids", "shape"}, "flat");
        node(g, "embed", "Gather", {"table", "flat"}, "Y");
      },
      {-1, 4, 3}));
  REQUIRE(model->params() == std::vector<std::string>{"table"});
  LowerOptions o;
  o.inputs.push_back({"ids", Shape{2, 4}});
  const LoweredGraph g = lower_onnx(*model, o);
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op == OpKind::Reshape);
  CHECK(g.nodes[0].inputs.at(0).kind == LoweredRef::Kind::Input);
  CHECK(g.nodes[1].op == OpKind::GatherRows);
  CHECK(g.nodes[1].inputs.at(0).kind == LoweredRef::Kind::Param);
  CHECK(g.output_shapes.at(0) == Shape{2, 4, 3});
  // Run it: each id reads its row of the table.
  Tensor ids(Shape{2, 4});
  for (int64_t i = 0; i < 8; ++i) ids[i] = static_cast<float>((i * 7 + 7) % 10);
  const Tensor y = testing::execute(g, {ids}, onnx_param_tensors(*model)).at(0);
  for (int64_t i = 0; i < 8; ++i)
    for (int64_t c = 0; c < 3; ++c)
      CHECK(y[i * 3 + c] == static_cast<float>(ids[i] * 3 + static_cast<float>(c)));
}

TEST_CASE("lower_onnx: token ids read other than as Gather indices are refused naming the node") {
  const auto refusal = [](const onnx::ModelProto& m) {
    try {
      import(m);
    } catch (const OnnxError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // Cast to float, then arithmetic: ids are not numbers to compute with.
  std::string what = refusal(ids_model(
      [](onnx::GraphProto& g) {
        auto* a = node(g, "reader", "Cast", {"ids"}, "f")->add_attribute();
        a->set_name("to");
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(onnx::TensorProto::FLOAT);
        node(g, "out", "Relu", {"f"}, "Y");
      },
      {-1, 4}));
  CHECK(what.find("node 'reader' (Cast, opset 17): reads the int64 token ids 'ids' as a float tensor") !=
        std::string::npos);
  // Integer arithmetic on them at run time.
  what = refusal(ids_model([](onnx::GraphProto& g) { node(g, "reader", "Neg", {"ids"}, "Y"); }, {-1, 4},
                           onnx::TensorProto::INT64));
  CHECK(what.find("node 'reader' (Neg, opset 17): reads the int64 token ids 'ids' as a float tensor") !=
        std::string::npos);
}

}  // namespace tribunal
