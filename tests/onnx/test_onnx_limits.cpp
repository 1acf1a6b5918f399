// The ONNX file as peer input (onnx/onnx_model.h OnnxLimits, issue 31 item 5): small ModelProtos built
// here with libonnx's protobuf classes, each past one limit, and the refusal each must get. The messages
// say what and where, so every check asserts the words that name the limit.
#include <doctest/doctest.h>

// GCC 12 reports a false -Wrestrict inside std::string for protobuf's inlined set_x(const char*) (GCC
// bug 105329); the strings here are literals.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <onnx/onnx_pb.h>

#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "onnx/lower.h"
#include "tests/source_dir.h"

namespace tribunal {
namespace {

/// A model of one Relu, X[2, 3] → Y, at `opset`.
onnx::ModelProto relu_model(int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("g");
  const auto value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "X", {2, 3});
  value(g->add_output(), "Y", {2, 3});
  auto* n = g->add_node();
  n->set_name("act");
  n->set_op_type("Relu");
  n->add_input("X");
  n->add_output("Y");
  return m;
}

/// Adds a float initializer `name` of shape `dims` (zeros), as raw_data.
onnx::TensorProto* add_initializer(onnx::ModelProto& m, const std::string& name, std::vector<int64_t> dims) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t->add_dims(d);
    n *= d;
  }
  t->set_raw_data(std::string(static_cast<size_t>(n) * 4, '\0'));
  return t;
}

/// The message OnnxModel::parse (or, with `lower`, import_onnx) refuses `bytes` with; "" if accepted.
std::string refusal(const std::string& bytes, const OnnxLimits& limits = {}, bool lower = false) {
  const auto span = std::as_bytes(std::span(bytes.data(), bytes.size()));
  try {
    if (lower) {
      import_onnx(span, "m.onnx", limits);
    } else {
      OnnxModel::parse(span, "m.onnx", limits);
    }
  } catch (const OnnxError& e) {
    return e.what();
  }
  return "";
}
std::string refusal(const onnx::ModelProto& m, const OnnxLimits& limits = {}, bool lower = false) {
  return refusal(m.SerializeAsString(), limits, lower);
}

/// Whether `message` contains `what`; shows the message when it does not.
bool says(const std::string& message, const std::string& what) {
  const bool found = message.find(what) != std::string::npos;
  if (!found) MESSAGE("the refusal was: \"" << message << "\"");
  return found;
}

TEST_CASE("the model every refusal below starts from is accepted") {
  CHECK(refusal(relu_model(), {}, true).empty());
  onnx::ModelProto m = relu_model();
  add_initializer(m, "w", {2, 3});
  CHECK(refusal(m).empty());
}

TEST_CASE("the committed fixtures import under the default limits (names included)") {
  for (const char* name : {"mlp.onnx", "cnn.onnx"}) {
    CAPTURE(name);
    std::ifstream in(testing::source_dir() / "tests/fixtures/onnx" / name, std::ios::binary);
    REQUIRE(in);
    std::stringstream bytes;
    bytes << in.rdbuf();
    CHECK(refusal(bytes.str(), {}, true).empty());
  }
}

TEST_CASE("a file larger than max_file_bytes is refused before it is parsed") {
  const std::string bytes = relu_model().SerializeAsString();
  OnnxLimits limits;
  limits.max_file_bytes = bytes.size() - 1;
  CHECK(says(refusal(bytes, limits),
             fmt::format("m.onnx: the file holds {} bytes, more than the {} a model file may", bytes.size(),
                         bytes.size() - 1)));
  limits.max_file_bytes = bytes.size();
  CHECK(refusal(bytes, limits).empty());
}

TEST_CASE("too many nodes, too many initializers") {
  onnx::ModelProto m = relu_model();
  for (int i = 0; i < 2; ++i) {  // Y → Y1 → Y2 through two more Relus
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type("Relu");
    n->add_input(i == 0 ? "Y" : "Y1");
    n->add_output(i == 0 ? "Y1" : "Y2");
  }
  OnnxLimits limits;
  limits.max_nodes = 2;
  CHECK(says(refusal(m, limits), "m.onnx: the graph has 3 nodes, more than the 2 a model may"));
  limits.max_nodes = 3;
  CHECK(refusal(m, limits).empty());

  onnx::ModelProto w = relu_model();
  for (const char* name : {"a", "b", "c"}) add_initializer(w, name, {1});
  limits = {};
  limits.max_initializers = 2;
  CHECK(says(refusal(w, limits), "m.onnx: the graph has 3 initializers, more than the 2 a model may"));
}

TEST_CASE("constants over max_elements, one tensor or all together") {
  OnnxLimits limits;
  limits.max_elements = 15;
  onnx::ModelProto one = relu_model();
  add_initializer(one, "big", {4, 4});
  CHECK(says(refusal(one, limits), "initializer 'big' has more than 15 elements"));

  onnx::ModelProto two = relu_model();
  add_initializer(two, "a", {10});
  add_initializer(two, "b", {10});
  CHECK(says(refusal(two, limits), "initializer 'b': the model's constants exceed 15 elements in all"));
  limits.max_elements = 20;
  CHECK(refusal(two, limits).empty());

  // A huge declared shape with no data at all is refused by its count, before any allocation.
  onnx::ModelProto huge = relu_model();
  auto* t = huge.mutable_graph()->add_initializer();
  t->set_name("huge");
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 4; ++i) t->add_dims(int64_t{1} << 20);
  CHECK(says(refusal(huge), "initializer 'huge' has more than 536870912 elements"));
}

TEST_CASE("a rank above max_rank, of an initializer or of a graph value") {
  onnx::ModelProto m = relu_model();
  add_initializer(m, "deep", std::vector<int64_t>(9, 1));
  CHECK(says(refusal(m), "initializer 'deep' has rank 9 (at most 8)"));

  onnx::ModelProto v = relu_model();
  auto* shape = v.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->Clear();
  for (int i = 0; i < 9; ++i) shape->add_dim()->set_dim_value(1);
  *v.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape() = *shape;
  CHECK(says(refusal(v), "graph value 'X' has rank 9 (at most 8)"));
}

TEST_CASE("opsets outside 13–17 and other operator domains") {
  CHECK(says(refusal(relu_model(12)),
             "m.onnx: the model's default-domain opset is 12; the importer supports opsets 13 to 17"));
  CHECK(says(refusal(relu_model(18)),
             "m.onnx: the model's default-domain opset is 18; the importer supports opsets 13 to 17"));
  CHECK(refusal(relu_model(13)).empty());

  onnx::ModelProto m = relu_model();
  auto* op = m.add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
  CHECK(says(refusal(m),
             "m.onnx: operator domain 'com.microsoft' is not supported (only the default domain ai.onnx)"));

  onnx::ModelProto n = relu_model();
  n.mutable_graph()->mutable_node(0)->set_domain("com.example");
  auto* op2 = n.add_opset_import();
  op2->set_domain("ai.onnx.ml");
  op2->set_version(3);
  n.mutable_graph()->mutable_node(0)->set_domain("ai.onnx.ml");
  CHECK(says(refusal(n), "node 'act' (Relu) is in operator domain 'ai.onnx.ml' (only the default domain"));
}

TEST_CASE("external data is refused without reading the path it names") {
  for (const char* location : {"/etc/hostname", "/nonexistent/weights.bin", "../../weights.bin"}) {
    CAPTURE(location);
    onnx::ModelProto m = relu_model();
    auto* t = add_initializer(m, "w", {2, 3});
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = t->add_external_data();
    entry->set_key("location");
    entry->set_value(location);
    // The same refusal whether the file exists, is missing or lies outside any directory: the path is
    // never resolved (a read would fail differently for each).
    CHECK(says(refusal(m),
               "m.onnx: initializer 'w' keeps its data in an external file: a model file must hold all its "
               "data (a job never names a path)"));
  }
  // In a Constant's value attribute too.
  onnx::ModelProto c = relu_model();
  auto* n = c.mutable_graph()->add_node();
  n->set_name("k");
  n->set_op_type("Constant");
  n->add_output("K");
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = a->mutable_t()->add_external_data();
  entry->set_key("location");
  entry->set_value("/etc/hostname");
  CHECK(says(refusal(c), "node 'k' (Constant) attribute 'value' keeps its data in an external file"));
}

/// An If node `depth` levels deep (its then_branch an If again, the innermost and every else_branch an
/// Identity of X).
void nest_if(onnx::GraphProto* g, int depth, const std::string& out) {
  auto* n = g->add_node();
  if (depth == 0) {
    n->set_op_type("Identity");
    n->add_input("X");
    n->add_output(out);
    return;
  }
  n->set_op_type("If");
  n->set_name(fmt::format("if{}", depth));
  n->add_input("C");
  n->add_output(out);
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = n->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* sub = a->mutable_g();
    sub->set_name(fmt::format("{}{}", branch, depth));
    nest_if(sub, branch == std::string("then_branch") ? depth - 1 : 0, fmt::format("r{}", depth));
    auto* o = sub->add_output();
    o->set_name(fmt::format("r{}", depth));
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
}

TEST_CASE("subgraph attributes (If) and nesting deeper than max_nesting") {
  onnx::ModelProto m = relu_model();
  auto* c = m.mutable_graph()->add_input();
  c->set_name("C");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
  nest_if(m.mutable_graph(), 1, "Z");
  CHECK(says(refusal(m),
             "m.onnx: node 'if1' (If) attribute 'then_branch' is a graph: subgraphs (If, Loop, Scan) are "
             "not supported"));

  // Each If level nests ModelProto → GraphProto → NodeProto → AttributeProto → GraphProto …: ten
  // levels parse under the default limit of 64 and not under 16.
  onnx::ModelProto deep = relu_model();
  nest_if(deep.mutable_graph(), 10, "Z");
  const std::string bytes = deep.SerializeAsString();
  CHECK(says(refusal(bytes), "is a graph: subgraphs"));
  OnnxLimits limits;
  limits.max_nesting = 16;
  CHECK(says(refusal(bytes, limits), "m.onnx: not an ONNX model: the protobuf message does not parse"));
  // 25 levels (over 75 messages deep) are refused under the default limit.
  onnx::ModelProto deeper = relu_model();
  nest_if(deeper.mutable_graph(), 25, "Z");
  CHECK(says(refusal(deeper), "m.onnx: not an ONNX model: the protobuf message does not parse"));
}

TEST_CASE("bytes that are not a protobuf message") {
  CHECK(says(refusal(std::string("\xff\xff\xff\xff", 4)), "m.onnx: not an ONNX model"));
  CHECK(says(refusal(std::string("\x0a\x10\x01", 3)), "m.onnx: not an ONNX model"));  // truncated field
  // Valid protobuf that is no model: the checker refuses it (no graph, no IR version).
  CHECK(says(refusal(std::string()), "the importer supports opsets"));
}

TEST_CASE("an op the importer does not support is refused naming op type, node and opset") {
  onnx::ModelProto m = relu_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("Softsign");
  m.mutable_graph()->mutable_node(0)->set_name("/block/act/Softsign");
  CHECK(refusal(m).empty());        // parsing reads any op of the default domain …
  CHECK(says(refusal(m, {}, true),  // … lowering refuses it
             "m.onnx: node '/block/act/Softsign' (Softsign, opset 17): op type Softsign is not supported"));
}

TEST_CASE(
    "MaxPool: an odd H or W lowers (floor mode); ceil mode and a pad as large as the kernel are refused") {
  onnx::ModelProto m = relu_model();
  auto* g = m.mutable_graph();
  const auto set_dims = [](onnx::ValueInfoProto* v, std::vector<int64_t> dims) {
    auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->Clear();
    for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
  };
  set_dims(g->mutable_input(0), {1, 1, 5, 5});
  set_dims(g->mutable_output(0), {1, 1, 2, 2});
  auto* n = g->mutable_node(0);
  n->set_op_type("MaxPool");
  n->set_name("pool");
  for (const char* name : {"kernel_shape", "strides"}) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(2);
    a->add_ints(2);
  }
  CHECK(refusal(m, {}, true).empty());  // the general window, floor mode: row and column 4 never read
  set_dims(g->mutable_input(0), {1, 1, 4, 4});
  CHECK(refusal(m, {}, true).empty());  // the 2×2 window of the built-in CNN (ints {})
  auto* ceil = n->add_attribute();
  ceil->set_name("ceil_mode");
  ceil->set_type(onnx::AttributeProto::INT);
  ceil->set_i(1);
  CHECK(says(refusal(m, {}, true),
             "m.onnx: node 'pool' (MaxPool, opset 17): ceil_mode = 1 (only floor mode) is not supported"));
  ceil->set_i(0);
  auto* pads = n->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(2);
  set_dims(g->mutable_output(0), {1, 1, 4, 4});  // (4 + 2 + 2 − 2)/2 + 1, as ONNX's shape inference has it
  CHECK(says(refusal(m, {}, true),
             "m.onnx: node 'pool' (MaxPool, opset 17): kernel_shape [2, 2], strides [2, 2], "
             "pads [2, 2, 2, 2] (kernel sides 1..8, strides ≥ 1, each pad ≥ 0 and smaller "
             "than its kernel side) is not supported"));
}

TEST_CASE("a stride, dilation or kernel size below 1 is refused before ONNX's shape inference") {
  // A Conv with strides [0, 1]: libonnx 1.12's shape inference divides by it (SIGFPE), found by
  // tests/fuzz/fuzz_onnx_import.
  for (const char* attribute : {"strides", "dilations", "kernel_shape"}) {
    CAPTURE(attribute);
    onnx::ModelProto m = relu_model();
    auto* g = m.mutable_graph();
    auto* shape = g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->Clear();
    for (int64_t d : {1, 1, 4, 4}) shape->add_dim()->set_dim_value(d);
    g->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
    add_initializer(m, "w", {1, 1, 3, 3});
    auto* n = g->mutable_node(0);
    n->set_op_type("Conv");
    n->set_name("conv");
    n->add_input("w");
    auto* a = n->add_attribute();
    a->set_name(attribute);
    a->set_type(onnx::AttributeProto::INTS);
    a->add_ints(std::string(attribute) == "kernel_shape" ? 3 : 0);
    a->add_ints(std::string(attribute) == "kernel_shape" ? -3 : 1);
    CHECK(says(refusal(m), fmt::format("m.onnx: node 'conv' (Conv) attribute '{}' holds {}: strides, "
                                       "dilations and kernel sizes must be positive",
                                       attribute, std::string(attribute) == "kernel_shape" ? -3 : 0)));
  }
}

TEST_CASE("names longer than max_name_bytes are refused, quoting only their start") {
  const std::string at_limit(256, 'n'), over(257, 'n');
  {
    onnx::ModelProto m = relu_model();
    m.mutable_graph()->mutable_node(0)->set_name(at_limit);
    CHECK(refusal(m).empty());
    m.mutable_graph()->mutable_node(0)->set_name(over);
    const std::string message = refusal(m);
    CHECK(says(message,
               fmt::format("m.onnx: node name '{}…' is 257 bytes long, more than the 256 a name may be",
                           std::string(32, 'n'))));
    CHECK(message.size() < 200);
  }
  {
    onnx::ModelProto m = relu_model();
    m.mutable_graph()->mutable_node(0)->set_output(0, over);
    m.mutable_graph()->mutable_output(0)->set_name(over);
    CHECK(says(refusal(m), fmt::format("value name '{}…' is 257 bytes long", std::string(32, 'n'))));
  }
  {
    onnx::ModelProto m = relu_model();
    add_initializer(m, over, {1});
    CHECK(says(refusal(m), fmt::format("initializer name '{}…' is 257 bytes long", std::string(32, 'n'))));
  }
  {
    onnx::ModelProto m = relu_model();
    m.mutable_graph()->mutable_input(0)->set_name(over);
    m.mutable_graph()->mutable_node(0)->set_input(0, over);
    CHECK(says(refusal(m), "is 257 bytes long"));
  }
}

}  // namespace
}  // namespace tribunal
