// run_float64: validation (the registry's infer_shapes, the output count, the gemm's availability),
// output sizing, and the call of the op's float64 kernel (its descriptor's OpInfo::float64).
#include <string>

#include "ops/float64/internal.h"

namespace tribunal {
namespace {

/// The ops whose float64 kernel stores every value of every output (checked kernel by kernel: linear
/// stores the bias first, matmul's gemm runs with accumulate = false, the selected copies copy whole
/// tensors, softmax and its backward store +0 at the masked entries, layer norm's backward zeroes dγ and
/// dβ before summing into them), so run_float64 need not zero their outputs first. Any op not listed
/// gets zeros, so a kernel that accumulates stays correct.
bool writes_every_value(OpKind kind) {
  switch (kind) {
    case OpKind::Linear:
    case OpKind::Matmul:
    case OpKind::Add:
    case OpKind::Gelu:
    case OpKind::GeluBackward:
    case OpKind::Dropout:
    case OpKind::DropoutBackward:
    case OpKind::Scale:
    case OpKind::Softmax:
    case OpKind::SoftmaxBackward:
    case OpKind::LayerNorm:
    case OpKind::LayerNormBackward:  // zeroes its two sums itself
    case OpKind::AdamW:
    case OpKind::Relu:
    case OpKind::ReluBackward:
    case OpKind::Gather:
    case OpKind::Reshape:
    case OpKind::SplitHeads:
    case OpKind::MergeHeads:
      return true;
    default:
      return false;
  }
}

}  // namespace

void run_float64(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                 std::span<std::vector<double>> out, Float64Gemm gemm, ThreadPool* pool) {
  if (static_cast<size_t>(kind) >= kOpKindCount)
    throw OpError("run_float64: op kind " + std::to_string(static_cast<int>(kind)) + " does not exist");
  const OpInfo& info = op_info(kind);
  const std::string op = std::string(info.name) + " (float64)";
  if (gemm != Float64Gemm::OpenBlas && gemm != Float64Gemm::Naive)
    throw OpError(op + ": unknown float64 gemm " + std::to_string(static_cast<int>(gemm)));
  if (!float64_gemm_built(gemm))
    throw OpError(op + ": this build has no OpenBLAS (float64 gemm '" + float64_gemm_name(gemm) + "')");
  if (out.size() != static_cast<size_t>(info.num_outputs))
    throw OpError(op + ": expects " + std::to_string(info.num_outputs) + " outputs, got " +
                  std::to_string(out.size()));
  std::vector<Shape> in_shapes;
  in_shapes.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == nullptr) throw OpError(op + ": input " + std::to_string(i) + " is null");
    in_shapes.push_back(in[i]->shape());
  }
  const std::vector<Shape> out_shapes = infer_shapes(kind, attrs, in_shapes);
  // Every value +0, as Float64Call promises the kernels, except for the ops whose kernel writes every
  // output value itself: the bulk of a step, where zeroing first would cost a pass over ~600 MB (GPT).
  const bool fill = !writes_every_value(kind);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto n = static_cast<size_t>(out_shapes[i].numel());
    if (fill)
      out[i].assign(n, 0.0);
    else
      out[i].resize(n);
  }
  info.float64(f64::Call{attrs, in, out_shapes, out, gemm, pool ? *pool : f64::serial_pool()});
}

}  // namespace tribunal
