// libFuzzer target: an ONNX model file a job names (onnx/lower.h import_onnx), which every party
// parses, checks and lowers: peer input (issue 31 item 5). On arbitrary bytes import_onnx under its
// default limits either refuses with OnnxError or returns a model, which is then lowered again as a
// job would, its declared float inputs at a batch of 2; none of it may crash, hang, allocate past the
// limits or read out of bounds. The seed corpus: a few of ONNX's node-test models (a training-mode
// BatchNormalization among them) and a small MLP and CNN shaped like tests/fixtures/onnx's (scripts/fuzz.sh
// caps inputs at 4 KiB).
#include <cstddef>
#include <cstdint>
#include <span>

#include "onnx/lower.h"

using namespace tribunal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::shared_ptr<const OnnxModel> model;
  try {
    model = import_onnx(std::as_bytes(std::span(data, size)), "fuzz");
  } catch (const OnnxError&) {
    return 0;
  }
  LowerOptions options;
  for (const OnnxValueInfo& in : model->inputs()) {
    if (in.elem_type != 1 || in.dims.empty() || in.dims.size() > static_cast<size_t>(kMaxRank)) continue;
    std::vector<int64_t> dims = in.dims;
    for (int64_t& d : dims)
      if (d < 0) d = 1;
    dims[0] = 2;
    options.inputs.push_back({in.name, Shape(std::span<const int64_t>(dims))});
  }
  options.training = true;  // Dropout nodes lowered as in a step
  try {
    (void)lower_onnx(*model, options);
  } catch (const OnnxError&) {
  }
  return 0;
}
