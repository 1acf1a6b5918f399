// Lowering an ONNX graph onto RepOps nodes (docs/onnx.md): every subgraph that only computes shapes or
// constants is folded at import, every other node becomes one or a few RepOps ops (ops/registry.h)
// whose order of operations docs/numerics.md states. What the importer does not support is refused
// naming the op type, the node and the opset.
#pragma once

#include <cstdint>
#include <map>
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
    Input,     ///< run-time graph input `index` (LowerOptions::inputs[index])
    Param,     ///< trainable parameter `index` (OnnxModel::params() order)
    Buffer,    ///< buffer `index` (OnnxModel::buffers() order): state the step updates, not trained
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
  std::vector<LoweredNode> nodes;   ///< topological order
  std::vector<LoweredRef> outputs;  ///< LowerOptions::outputs' values, in that order
  std::vector<Shape> output_shapes;
  std::vector<uint32_t> params_used;  ///< indices into initializer_order() read at run time, increasing
  /// LowerOptions::training only: the next value of each buffer (OnnxModel::buffers() order), the
  /// output 1 (running mean) or 2 (running variance) of the BatchNormalization that reads it.
  std::vector<LoweredRef> buffer_updates;
};

/// A graph input fed at run time, with the shape it is given.
struct LowerInput {
  std::string name;  ///< "" = the model's only input
  /// The data's shape, [B, …]. When the declared shape has fixed dimensions after the first and they
  /// differ from these but hold as many elements (features [B, 784] for an image input [N, 1, 28, 28]),
  /// a Reshape to [B, declared…] comes first.
  Shape shape;
};

/// What a lowering is for.
struct LowerOptions {
  std::vector<LowerInput> inputs;  ///< LoweredRef::Input index i is inputs[i]
  /// Graph inputs given as constants instead (ONNX node tests feed a Reshape's shape this way).
  std::map<std::string, OnnxConstant> constant_inputs;
  std::vector<std::string> outputs;  ///< the graph outputs wanted; empty = every graph output
  /// A training step: Dropout nodes in training mode become RepOps Dropout with ints {seed, step,
  /// site}, site k·shards + shard for the k-th of them (engine/model.h ForwardOptions); otherwise they
  /// are identities.
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

/// The model's buffers as tensors, in buffers() order (their values in the initial state).
std::vector<Tensor> onnx_buffer_tensors(const OnnxModel& model);

/// The ONNX op types the importer lowers or folds, sorted (docs/onnx.md lists them with their limits).
std::vector<std::string> onnx_supported_ops();

}  // namespace tribunal
