// Reads ONNX's backend node test data (tests/onnx/onnx_test_data.h) with libonnx's protobuf classes;
// only tests link them.
#include "tests/onnx/onnx_test_data.h"

#include "ops/registry.h"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tribunal::testing {
namespace {

std::string read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file.string() + ": cannot open");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The values of `t` (raw_data, little-endian, of `width` bytes each, or the typed field), as int64 or float.
template <class T, class Stored, class Field>
std::vector<T> values(const onnx::TensorProto& t, const Field& typed, size_t n,
                      const std::filesystem::path& file) {
  std::vector<T> out(n);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * sizeof(Stored))
      throw std::runtime_error(file.string() + ": raw_data does not match the tensor's shape");
    for (size_t i = 0; i < n; ++i) {
      Stored v;
      std::memcpy(&v, t.raw_data().data() + i * sizeof(Stored), sizeof(Stored));
      out[i] = static_cast<T>(v);
    }
  } else {
    if (static_cast<size_t>(typed.size()) != n)
      throw std::runtime_error(file.string() + ": the tensor holds fewer or more values than its shape");
    for (size_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(static_cast<Stored>(typed.Get(static_cast<int>(i))));
  }
  return out;
}

}  // namespace

std::optional<OnnxTestTensor> read_tensor_pb(const std::filesystem::path& file) {
  onnx::TensorProto t;
  if (!t.ParseFromString(read_bytes(file))) throw std::runtime_error(file.string() + ": not a TensorProto");
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw std::runtime_error(file.string() + ": external data");
  OnnxTestTensor out;
  out.name = t.name();
  out.value.dims.assign(t.dims().begin(), t.dims().end());
  const auto n = static_cast<size_t>(out.value.elements());
  out.value.type = OnnxConstant::Type::Int64;
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      out.value.type = OnnxConstant::Type::Float32;
      out.value.floats = values<float, float>(t, t.float_data(), n, file);
      break;
    case onnx::TensorProto::INT64:
      out.value.ints = values<int64_t, int64_t>(t, t.int64_data(), n, file);
      break;
    case onnx::TensorProto::INT32:
      out.value.ints = values<int64_t, int32_t>(t, t.int32_data(), n, file);
      break;
    case onnx::TensorProto::INT8:
      out.value.ints = values<int64_t, int8_t>(t, t.int32_data(), n, file);
      break;
    case onnx::TensorProto::UINT8:
      out.value.ints = values<int64_t, uint8_t>(t, t.int32_data(), n, file);
      break;
    case onnx::TensorProto::BOOL:
      out.value.ints = values<int64_t, uint8_t>(t, t.int32_data(), n, file);
      break;
    default:
      return std::nullopt;
  }
  return out;
}

std::vector<OnnxNodeTestData> list_node_test(const std::filesystem::path& test_dir) {
  std::vector<OnnxNodeTestData> sets;
  for (int n = 0;; ++n) {
    OnnxNodeTestData set;
    set.dir = test_dir / ("test_data_set_" + std::to_string(n));
    if (!std::filesystem::is_directory(set.dir)) break;
    for (int k = 0; std::filesystem::exists(set.dir / ("input_" + std::to_string(k) + ".pb")); ++k)
      set.inputs.push_back(set.dir / ("input_" + std::to_string(k) + ".pb"));
    for (int k = 0; std::filesystem::exists(set.dir / ("output_" + std::to_string(k) + ".pb")); ++k)
      set.outputs.push_back(set.dir / ("output_" + std::to_string(k) + ".pb"));
    sets.push_back(std::move(set));
  }
  if (sets.empty()) throw std::runtime_error(test_dir.string() + ": no test_data_set_0");
  return sets;
}

OnnxModel read_node_test_model(const std::filesystem::path& test_dir, const OnnxLimits& limits) {
  const std::string bytes = read_bytes(test_dir / "model.onnx");
  return OnnxModel::parse(std::as_bytes(std::span(bytes.data(), bytes.size())),
                          (test_dir / "model.onnx").string(), limits);
}

std::vector<Tensor> execute(const LoweredGraph& g, const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& params, const std::vector<Tensor>& buffers) {
  std::vector<std::vector<Tensor>> values(g.nodes.size());
  const auto at = [&](const LoweredRef& r) -> const Tensor& {
    switch (r.kind) {
      case LoweredRef::Kind::Input:
        return inputs.at(r.index);
      case LoweredRef::Kind::Param:
        return params.at(r.index);
      case LoweredRef::Kind::Buffer:
        return buffers.at(r.index);
      case LoweredRef::Kind::Constant:
        return g.constants.at(r.index);
      case LoweredRef::Kind::Node:
        break;
    }
    return values.at(r.index).at(r.slot);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const LoweredNode& n = g.nodes[i];
    std::vector<const Tensor*> in;
    for (const LoweredRef& r : n.inputs) in.push_back(&at(r));
    for (const Shape& s : n.outputs) values[i].emplace_back(s);
    std::vector<Tensor*> out;
    for (Tensor& t : values[i]) out.push_back(&t);
    run_reference(n.op, n.attrs, in, out);
  }
  std::vector<Tensor> outs;
  for (const LoweredRef& r : g.outputs) outs.push_back(at(r));
  for (const LoweredRef& r : g.buffer_updates) outs.push_back(at(r));
  return outs;
}

}  // namespace tribunal::testing
