// ONNX's own backend node tests as test oracles: Debian's libonnx-testdata installs one directory per
// test under /usr/share/libonnx-testdata/data/node/<test>/, holding model.onnx (a graph of one node,
// or its expansion into a function body) and test_data_set_<N>/input_<K>.pb, output_<K>.pb (serialized
// onnx.TensorProto, the K-th graph input and output). Source: onnx/backend/test/ (ONNX 1.12), whose
// runner compares outputs with rtol 1e-3, atol 1e-7.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "onnx/lower.h"
#include "onnx/onnx_model.h"
#include "ops/tensor.h"

namespace tribunal::testing {

/// Where libonnx-testdata installs the node tests.
inline const std::filesystem::path kOnnxNodeTests = "/usr/share/libonnx-testdata/data/node";

/// A TensorProto read from a .pb file: its name and values.
struct OnnxTestTensor {
  std::string name;
  OnnxConstant value;
};

/// Reads a serialized onnx.TensorProto. Float32 and int64 as they are; int32, int8, uint8 and bool
/// widened to int64 (as OnnxModel::parse reads them). Returns nullopt for a tensor of another element
/// type (double, float16, string…), which OnnxConstant cannot hold. Throws std::runtime_error naming
/// the file when it cannot be read or does not parse, or holds external or too few data.
std::optional<OnnxTestTensor> read_tensor_pb(const std::filesystem::path& file);

/// One data set of a node test: the .pb files of its inputs and expected outputs, in index order.
struct OnnxNodeTestData {
  std::filesystem::path dir;  ///< <test>/test_data_set_<N>
  std::vector<std::filesystem::path> inputs, outputs;
};

/// The data sets of the node test in `test_dir`, in order (test_data_set_0, 1, …). Throws
/// std::runtime_error when the directory has no data set.
std::vector<OnnxNodeTestData> list_node_test(const std::filesystem::path& test_dir);

/// The node test's model.onnx parsed by OnnxModel::parse under `limits` (throws OnnxError as it does).
/// Some tests are stamped with the opset their op was last defined in (e.g. Range 11, Not 1), which is
/// still the op's definition at opset 17: such tests need a lower `limits.min_opset`.
OnnxModel read_node_test_model(const std::filesystem::path& test_dir, const OnnxLimits& limits = {});

/// Runs `g` on the CPU reference kernels (ops/registry.h run_reference): Input i is inputs[i], Param i
/// is params[i], Buffer i is buffers[i]. Returns the graph's outputs, then its buffer updates.
std::vector<Tensor> execute(const LoweredGraph& g, const std::vector<Tensor>& inputs,
                            const std::vector<Tensor>& params, const std::vector<Tensor>& buffers = {});

}  // namespace tribunal::testing
