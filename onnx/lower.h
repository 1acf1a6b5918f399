// Lowering an ONNX graph onto RepOps nodes (docs/onnx.md): every subgraph that only computes shapes or
// constants is folded at import, every other node becomes one or a few RepOps ops (ops/registry.h)
// whose order of operations docs/numerics.md states. What the importer does not support is refused
// naming the op type, the node and the opset.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "onnx/onnx_model.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace tribunal {

/// Where a lowered node's input comes from.
struct LoweredRef {
  enum class Kind : uint8_t {
    Input,     ///< the data fed to the graph input (LowerOptions::input)
    Param,     ///< trainable parameter `index` (OnnxModel::params() order)
    Constant,  ///< LoweredGraph::constants[index]: a folded or constant tensor the step only reads
    Node,      ///< output `slot` of LoweredGraph::nodes[index]
  };
  Kind kind = Kind::Input;
  uint32_t index = 0;
  uint32_t slot = 0;
};

/// One RepOps node of the lowered graph.
struct LoweredNode {
  OpKind op = OpKind::Count;
  Attrs attrs;
  std::vector<LoweredRef> inputs;
  std::vector<Shape> outputs;  ///< inferred by the op registry
  std::string name;            ///< the ONNX node it comes from, e.g. "/l0/Gemm" (logs, verdicts)
};

struct LoweredGraph {
  std::vector<Tensor> constants;
  std::vector<LoweredNode> nodes;  ///< topological order
  LoweredRef output;               ///< the value the loss reads
  Shape output_shape;
  std::vector<uint32_t> params_used;  ///< indices of initializer_order() read at run time, increasing
};

/// What a lowering is for.
struct LowerOptions {
  std::string input;   ///< the graph input fed with the data; "" = the model's only input
  std::string output;  ///< the graph output the loss reads; "" = the model's only output
  /// The data's shape, [B, …]: B replaces the input's first (batch) dimension. When the rest differs
  /// from the declared shape but holds as many elements (features [B, 784] for an image input
  /// [N, 1, 28, 28]), a Reshape to the declared shape comes first.
  Shape input_shape;
  /// A training step: Dropout nodes become RepOps Dropout with ints {seed, step, site}, site k·shards
  /// + shard for the k-th dropout (engine/model.h ForwardOptions); otherwise they are identities.
  bool training = false;
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t shard = 0, shards = 1;
};

/// Lowers `model` (its params() must be set, see import_onnx) for one input shape. Throws OnnxError
/// for an unsupported op, attribute, input type or a shape that does not fit.
LoweredGraph lower_onnx(const OnnxModel& model, const LowerOptions& options);

/// Parses and checks an ONNX file, then finds its trainable parameters by lowering it once with
/// the declared input shape (a symbolic batch dimension taken as 1): the float initializers that
/// some node reads at run time. Throws OnnxError (onnx/onnx_model.h) for anything it refuses.
std::shared_ptr<const OnnxModel> import_onnx(std::span<const std::byte> bytes, const std::string& source,
                                             const OnnxLimits& limits = {});

/// The model's trainable parameters as tensors, in params() order (the initial state of a job).
std::vector<Tensor> onnx_param_tensors(const OnnxModel& model);

/// The ONNX op types the importer lowers or folds, sorted (docs/onnx.md lists them with their limits).
std::vector<std::string> onnx_supported_ops();

}  // namespace tribunal
