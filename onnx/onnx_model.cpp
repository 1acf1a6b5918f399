// Reads an ONNX file with libonnx (protobuf) under OnnxLimits and copies what the importer uses into
// plain structs (onnx/onnx_model.h). The only file of the project that includes protobuf headers.
#include "onnx/onnx_model.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace tribunal {
namespace {

// TensorProto.DataType codes (onnx.proto).
constexpr int32_t kFloat = 1, kUint8 = 2, kInt8 = 3, kInt32 = 6, kInt64 = 7, kBool = 9;

bool is_external(const onnx::TensorProto& t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0;
}

struct Reader {
  const std::string& source;
  const OnnxLimits& limits;
  uint64_t elements = 0;  // all constants read so far

  [[noreturn]] void fail(const std::string& what) const {
    throw OnnxError(fmt::format("{}: {}", source, what));
  }

  std::vector<int64_t> dims_of(const onnx::TensorProto& t, const std::string& what) {
    if (t.dims_size() > limits.max_rank)
      fail(fmt::format("{} has rank {} (at most {})", what, t.dims_size(), limits.max_rank));
    std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
    uint64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0) fail(fmt::format("{} has a negative dimension {}", what, d));
      if (d > 0 && n > limits.max_elements / static_cast<uint64_t>(d))
        fail(fmt::format("{} has more than {} elements", what, limits.max_elements));
      n *= static_cast<uint64_t>(d);
    }
    if (n > limits.max_elements - elements)
      fail(fmt::format("{}: the model's constants exceed {} elements in all", what, limits.max_elements));
    elements += n;
    return dims;
  }

  // The raw_data or typed field of `t` as T, checked against the element count.
  template <class T, class Field>
  std::vector<T> values(const onnx::TensorProto& t, const Field& typed, size_t n, const std::string& what) {
    std::vector<T> out(n);
    if (t.has_raw_data()) {
      const std::string& raw = t.raw_data();
      if (raw.size() != n * sizeof(T))
        fail(fmt::format("{}: raw_data holds {} bytes, its shape needs {}", what, raw.size(), n * sizeof(T)));
      std::memcpy(out.data(), raw.data(),
                  raw.size());  // ONNX raw_data is little-endian, as every target here
    } else {
      if (static_cast<size_t>(typed.size()) != n)
        fail(fmt::format("{}: holds {} values, its shape needs {}", what, typed.size(), n));
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(typed.Get(static_cast<int>(i)));
    }
    return out;
  }

  [[noreturn]] void fail_external(const std::string& what) const {
    fail(
        fmt::format("{} keeps its data in an external file: a model file must hold all its data (a job never "
                    "names a path)",
                    what));
  }

  /// A name the model gives (`kind` says whose), refused when longer than max_name_bytes; the message
  /// quotes only its start.
  void check_name(const std::string& name, const char* kind) const {
    if (name.size() <= limits.max_name_bytes) return;
    fail(fmt::format("{} '{}…' is {} bytes long, more than the {} a name may be", kind, name.substr(0, 32),
                     name.size(), limits.max_name_bytes));
  }
  void check_names(const onnx::GraphProto& g) const {
    for (const auto& n : g.node()) {
      check_name(n.name(), "node name");
      for (const auto& v : n.input()) check_name(v, "value name");
      for (const auto& v : n.output()) check_name(v, "value name");
      for (const auto& a : n.attribute()) check_name(a.name(), "attribute name");
    }
    for (const auto& t : g.initializer()) check_name(t.name(), "initializer name");
    for (const auto& v : g.input()) check_name(v.name(), "graph input name");
    for (const auto& v : g.output()) check_name(v.name(), "graph output name");
    for (const auto& v : g.value_info()) check_name(v.name(), "value name");
  }

  OnnxConstant tensor(const onnx::TensorProto& t, const std::string& what) {
    if (is_external(t)) fail_external(what);
    OnnxConstant c;
    c.dims = dims_of(t, what);
    const auto n = static_cast<size_t>(c.elements());
    switch (t.data_type()) {
      case kFloat:
        c.type = OnnxConstant::Type::Float32;
        c.floats = values<float>(t, t.float_data(), n, what);
        break;
      case kInt64:
        c.type = OnnxConstant::Type::Int64;
        c.ints = values<int64_t>(t, t.int64_data(), n, what);
        break;
      case kInt32:
      case kBool:
      case kUint8:
      case kInt8: {
        // Stored in int32_data when not raw; raw data has the type's own width.
        c.type = OnnxConstant::Type::Int64;
        c.ints.resize(n);
        if (t.has_raw_data()) {
          const size_t width = t.data_type() == kInt32 ? 4 : 1;
          if (t.raw_data().size() != n * width)
            fail(fmt::format("{}: raw_data holds {} bytes, its shape needs {}", what, t.raw_data().size(),
                             n * width));
          for (size_t i = 0; i < n; ++i) {
            const char* p = t.raw_data().data() + i * width;
            if (width == 4) {
              int32_t v;
              std::memcpy(&v, p, 4);
              c.ints[i] = v;
            } else {
              c.ints[i] = t.data_type() == kInt8 ? static_cast<int8_t>(*p) : static_cast<uint8_t>(*p);
            }
          }
        } else {
          c.ints = values<int64_t>(t, t.int32_data(), n, what);
        }
        break;
      }
      default:
        fail(fmt::format(
            "{} has element type {}, the importer reads float, int64, int32, int8, uint8 and bool", what,
            onnx_type_name(t.data_type())));
    }
    return c;
  }

  OnnxValueInfo value_info(const onnx::ValueInfoProto& v) {
    OnnxValueInfo info;
    info.name = v.name();
    if (!v.type().has_tensor_type())
      fail(fmt::format("graph input or output '{}' is not a tensor", v.name()));
    const auto& tt = v.type().tensor_type();
    info.elem_type = tt.elem_type();
    if (tt.has_shape()) {
      if (tt.shape().dim_size() > limits.max_rank)
        fail(fmt::format("graph value '{}' has rank {} (at most {})", v.name(), tt.shape().dim_size(),
                         limits.max_rank));
      for (const auto& d : tt.shape().dim()) info.dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
    return info;
  }
};

}  // namespace

int64_t OnnxConstant::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const char* onnx_type_name(int32_t elem_type) {
  switch (elem_type) {
    case 1:
      return "float";
    case 2:
      return "uint8";
    case 3:
      return "int8";
    case 4:
      return "uint16";
    case 5:
      return "int16";
    case 6:
      return "int32";
    case 7:
      return "int64";
    case 8:
      return "string";
    case 9:
      return "bool";
    case 10:
      return "float16";
    case 11:
      return "double";
    case 12:
      return "uint32";
    case 13:
      return "uint64";
    case 16:
      return "bfloat16";
    default:
      return "an unknown type";
  }
}

std::string OnnxModel::where(const OnnxNode& node) const {
  return fmt::format("{}: node '{}' ({}, opset {}): ", source_, node.name, node.op_type, opset_);
}

OnnxModel OnnxModel::parse(std::span<const std::byte> bytes, const std::string& source,
                           const OnnxLimits& limits) {
  Reader r{source, limits};
  if (bytes.size() > limits.max_file_bytes)
    r.fail(fmt::format("the file holds {} bytes, more than the {} a model file may", bytes.size(),
                       limits.max_file_bytes));
  onnx::ModelProto proto;
  {
    google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                              static_cast<int>(bytes.size()));
    in.SetTotalBytesLimit(
        static_cast<int>(std::min<uint64_t>(limits.max_file_bytes, std::numeric_limits<int>::max())));
    in.SetRecursionLimit(limits.max_nesting);
    if (!proto.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
      r.fail("not an ONNX model: the protobuf message does not parse");  // malformed, or nested too deep
  }
  const onnx::GraphProto& g = proto.graph();
  if (g.node_size() > limits.max_nodes)
    r.fail(
        fmt::format("the graph has {} nodes, more than the {} a model may", g.node_size(), limits.max_nodes));
  if (g.initializer_size() > limits.max_initializers)
    r.fail(fmt::format("the graph has {} initializers, more than the {} a model may", g.initializer_size(),
                       limits.max_initializers));
  if (g.sparse_initializer_size() > 0) r.fail("sparse initializers are not supported");
  // Before ONNX's checker and shape inference see the model: names bounded, and no tensor that
  // points at a file (the checker resolves external data against a directory; nothing here may).
  r.check_names(g);
  for (const auto& t : g.initializer())
    if (is_external(t)) r.fail_external(fmt::format("initializer '{}'", t.name()));
  // Subgraphs (If, Loop, Scan bodies) too: the importer never lowers them, so ONNX's checker and
  // shape inference need not walk them; nor nodes of other operator domains.
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    const std::string name = n.name().empty() ? fmt::format("#{}", i) : n.name();  // as OnnxNode::name
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      r.fail(fmt::format("node '{}' ({}) is in operator domain '{}' (only the default domain ai.onnx)", name,
                         n.op_type(), n.domain()));
    for (const auto& a : n.attribute()) {
      if (a.has_t() && is_external(a.t()))
        r.fail_external(fmt::format("node '{}' ({}) attribute '{}'", name, n.op_type(), a.name()));
      // ONNX's Conv/Pool shape inference divides by a stride unchecked (a stride of 0 is SIGFPE in
      // libonnx 1.12, found by tests/fuzz/fuzz_onnx_import): every stride, dilation and kernel size
      // is positive in ONNX's operator definitions, so anything else is refused before inference.
      if (a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape")
        for (int64_t v : a.ints())
          if (v < 1)
            r.fail(
                fmt::format("node '{}' ({}) attribute '{}' holds {}: strides, dilations and kernel sizes "
                            "must be positive",
                            name, n.op_type(), a.name(), v));
      if (a.has_g() || a.graphs_size() > 0)
        r.fail(
            fmt::format("node '{}' ({}) attribute '{}' is a graph: subgraphs (If, Loop, Scan) are not "
                        "supported",
                        name, n.op_type(), a.name()));
    }
  }
  if (proto.functions_size() > 0) r.fail("model-local functions are not supported");

  OnnxModel m;
  m.source_ = source;
  m.producer_ = proto.producer_name();
  for (const auto& op : proto.opset_import()) {
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      m.opset_ = op.version();
    } else if (op.domain() != "ai.onnx.ml" && op.domain() != "ai.onnx.preview.training") {
      r.fail(fmt::format("operator domain '{}' is not supported (only the default domain ai.onnx)",
                         op.domain()));
    }
  }
  if (m.opset_ < limits.min_opset || m.opset_ > limits.max_opset)
    r.fail(fmt::format("the model's default-domain opset is {}; the importer supports opsets {} to {}",
                       m.opset_, limits.min_opset, limits.max_opset));

  // ONNX's own validation first: the checker (names defined before use, topological order, each
  // node against its schema), then strict shape inference (types and shapes agree).
  try {
    onnx::checker::check_model(proto);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    r.fail(fmt::format("the ONNX checker refuses the model: {}", e.what()));
  }

  std::set<std::string> initializer_names;
  for (const auto& t : g.initializer()) {
    if (!initializer_names.insert(t.name()).second)
      r.fail(fmt::format("initializer '{}' is defined twice", t.name()));
    m.initializers_.emplace(t.name(), r.tensor(t, fmt::format("initializer '{}'", t.name())));
    m.initializer_order_.push_back(t.name());
  }
  for (const auto& v : g.input())
    if (!initializer_names.count(v.name())) m.inputs_.push_back(r.value_info(v));
  for (const auto& v : g.output()) m.outputs_.push_back(r.value_info(v));

  m.nodes_.reserve(static_cast<size_t>(g.node_size()));
  for (int i = 0; i < g.node_size(); ++i) {
    const auto& n = g.node(i);
    OnnxNode node;
    node.name = n.name().empty() ? fmt::format("#{}", i) : n.name();
    node.op_type = n.op_type();
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      r.fail(fmt::format("node '{}' ({}) is in operator domain '{}' (only the default domain ai.onnx)",
                         node.name, node.op_type, n.domain()));
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    for (const auto& a : n.attribute()) {
      OnnxAttribute attr;
      const std::string what =
          fmt::format("node '{}' ({}) attribute '{}'", node.name, node.op_type, a.name());
      switch (a.type()) {
        case onnx::AttributeProto::INT:
          attr.kind = OnnxAttribute::Kind::Int;
          attr.i = a.i();
          break;
        case onnx::AttributeProto::FLOAT:
          attr.kind = OnnxAttribute::Kind::Float;
          attr.f = a.f();
          break;
        case onnx::AttributeProto::STRING:
          attr.kind = OnnxAttribute::Kind::String;
          attr.s = a.s();
          break;
        case onnx::AttributeProto::INTS:
          attr.kind = OnnxAttribute::Kind::Ints;
          attr.ints.assign(a.ints().begin(), a.ints().end());
          break;
        case onnx::AttributeProto::FLOATS:
          attr.kind = OnnxAttribute::Kind::Floats;
          attr.floats.assign(a.floats().begin(), a.floats().end());
          break;
        case onnx::AttributeProto::TENSOR:
          attr.kind = OnnxAttribute::Kind::Tensor;
          attr.tensor = r.tensor(a.t(), what);
          break;
        default:
          r.fail(fmt::format(
              "{}: attributes of this kind (graphs, sparse tensors, strings lists) are not supported", what));
      }
      node.attributes.emplace(a.name(), std::move(attr));
    }
    m.nodes_.push_back(std::move(node));
  }
  return m;
}

}  // namespace tribunal
