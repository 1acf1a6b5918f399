// An ONNX model file read as peer input (docs/onnx.md): the bytes parsed by Debian's libonnx under
// explicit limits, ONNX's own checker and shape inference run, then copied into plain structs so that
// nothing above this file sees protobuf. Source: the ONNX specification, IR version 8 and the default
// operator set ("ai.onnx") versions 13–17 (https://onnx.ai/onnx/repo-docs/IR.html, Operators.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace tribunal {

/// An ONNX file that cannot be imported: the message names the file, and where a node is at fault its
/// name, op type and the model's opset (e.g. "m.onnx: node '/l0/Gemm' (Gemm, opset 17): transA = 1 is
/// not supported").
class OnnxError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a model file may hold before anything is built from it: an ONNX file is as much peer input
/// as a network frame (a job names it; every party that builds the job's graphs parses it).
struct OnnxLimits {
  uint64_t max_file_bytes = uint64_t{2} << 30;  ///< protobuf's own ceiling for one message is 2 GiB
  int max_nodes = 65536;
  int max_initializers = 65536;
  uint64_t max_elements = uint64_t{1} << 29;  ///< all initializers and constants together (2 GiB of float32)
  int max_rank = 8;                           ///< of any tensor, initializer or declared value
  int64_t min_opset = 13;                     ///< the default domain's opset range the importer knows
  int64_t max_opset = 17;
  int max_nesting = 64;         ///< protobuf's recursion limit (messages inside messages)
  size_t max_name_bytes = 256;  ///< of any node, value or initializer name (torch's are < 100)
};

/// A tensor whose values the importer knows: an initializer, a Constant's value or a folded shape
/// computation. Float32 or int64 (ONNX's FLOAT and INT64; BOOL, INT32 and DOUBLE are widened on
/// read: bool and int32 to int64, double refused).
struct OnnxConstant {
  enum class Type : uint8_t { Float32, Int64 };
  Type type = Type::Float32;
  std::vector<int64_t> dims;  ///< ONNX shape (rank 0: a scalar)
  std::vector<float> floats;  ///< Float32: the values, row-major
  std::vector<int64_t> ints;  ///< Int64: the values, row-major
  int64_t elements() const;   ///< product of dims (1 for a scalar)
};

/// One attribute of a node (ONNX AttributeProto) in the kinds the importer reads.
struct OnnxAttribute {
  enum class Kind : uint8_t { Int, Float, String, Ints, Floats, Tensor };
  Kind kind = Kind::Int;
  int64_t i = 0;
  float f = 0.0f;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::optional<OnnxConstant> tensor;
};

/// One node of the graph, in the file's (topological, checked) order.
struct OnnxNode {
  std::string name;                  ///< the node's name, or "#<index>" when the file gives none
  std::string op_type;               ///< e.g. "Gemm"
  std::vector<std::string> inputs;   ///< value names; "" for an omitted optional input
  std::vector<std::string> outputs;  ///< value names; "" for an omitted optional output
  std::map<std::string, OnnxAttribute> attributes;
};

/// A graph input or output as declared: element type (ONNX TensorProto.DataType) and dims, −1 for a
/// symbolic or unknown dimension.
struct OnnxValueInfo {
  std::string name;
  int32_t elem_type = 0;
  std::vector<int64_t> dims;
};

/// A parsed, checked ONNX model. Cheap to copy around by shared_ptr (engine/job.h keeps one per job).
class OnnxModel {
 public:
  /// Parses `bytes` (a whole .onnx file; `source` names it in errors) under `limits`, runs
  /// onnx::checker::check_model and strict shape inference, and refuses what the importer never
  /// reads: an opset outside [min_opset, max_opset], another operator domain, external data (a
  /// model must not name a local file: refused before anything else reads the tensors), subgraph
  /// attributes, sparse initializers, a tensor of another element type, a name longer than
  /// max_name_bytes. Throws OnnxError saying what and where.
  static OnnxModel parse(std::span<const std::byte> bytes, const std::string& source,
                         const OnnxLimits& limits = {});

  const std::string& source() const { return source_; }
  int64_t opset() const { return opset_; }
  /// The tool that wrote the file (ModelProto.producer_name, e.g. "pytorch"): where a producer's
  /// semantics differ from ONNX's definition, the importer follows the producer's (docs/onnx.md).
  const std::string& producer() const { return producer_; }
  const std::vector<OnnxNode>& nodes() const { return nodes_; }
  /// Every initializer by name (graph constants and weights alike).
  const std::map<std::string, OnnxConstant>& initializers() const { return initializers_; }
  /// The initializers' names in file order.
  const std::vector<std::string>& initializer_order() const { return initializer_order_; }
  /// Graph inputs that are not initializers (the data the model is fed).
  const std::vector<OnnxValueInfo>& inputs() const { return inputs_; }
  /// The graph input `name`, or nullptr when the graph has none of that name.
  const OnnxValueInfo* input(const std::string& name) const {
    for (const auto& in : inputs_)
      if (in.name == name) return &in;
    return nullptr;
  }
  const std::vector<OnnxValueInfo>& outputs() const { return outputs_; }

  /// The trainable parameters: the float initializers some computing node reads at run time (not
  /// only shape computations, which are folded at import), in file order. Set by onnx/lower.h's
  /// import_onnx, which lowers the graph once to find them.
  const std::vector<std::string>& params() const { return params_; }
  void set_params(std::vector<std::string> names) { params_ = std::move(names); }

  /// The buffers: float initializers a training step updates but the optimizer does not train —
  /// the running mean and variance a training-mode BatchNormalization reads (its inputs 3 and 4) and
  /// replaces by its outputs 1 and 2 (docs/onnx.md "Parameters and buffers"), in file order. Set by
  /// import_onnx.
  const std::vector<std::string>& buffers() const { return buffers_; }
  void set_buffers(std::vector<std::string> names) { buffers_ = std::move(names); }

  /// "<source>: node '<name>' (<op_type>, opset <N>): " — the prefix of every error about a node.
  std::string where(const OnnxNode& node) const;

 private:
  std::string source_, producer_;
  int64_t opset_ = 0;
  std::vector<OnnxNode> nodes_;
  std::map<std::string, OnnxConstant> initializers_;
  std::vector<std::string> initializer_order_;
  std::vector<OnnxValueInfo> inputs_, outputs_;
  std::vector<std::string> params_, buffers_;
};

/// ONNX TensorProto.DataType codes the importer names in messages.
const char* onnx_type_name(int32_t elem_type);

}  // namespace tribunal
