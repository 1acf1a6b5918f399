// run_float64: validation (the registry's infer_shapes, the output count, the gemm's availability),
// output sizing, and the table of float64 kernels indexed by OpKind.
#include <algorithm>
#include <string>

#include "ops/float64/internal.h"

namespace tribunal {
namespace {

// Ops whose every output value is one of their float32 inputs or +0 (copies, selections, masks): their
// float64 result is the RepOps reference's, widened, so the reference alone defines what they select.
template <OpKind K>
void selected(const f64::Call& c) {
  std::vector<Tensor> y;
  y.reserve(c.out_shapes.size());
  for (const Shape& s : c.out_shapes) y.emplace_back(s);
  std::vector<Tensor*> out;
  for (Tensor& t : y) out.push_back(&t);
  run_reference(K, c.attrs, c.in, out);
  for (size_t i = 0; i < y.size(); ++i) {
    const std::span<const float> v = y[i].values();
    std::copy(v.begin(), v.end(), c.out[i].begin());
  }
}

// Indexed by OpKind, in the enum's order; the static_assert keeps it closed over the enum.
const f64::Kernel kKernels[] = {
    selected<OpKind::Gather>,
    f64::linear,
    f64::matmul,
    f64::sum_rows,
    f64::add,
    selected<OpKind::Relu>,
    selected<OpKind::ReluBackward>,
    f64::softmax_cross_entropy,
    f64::softmax_cross_entropy_backward,
    f64::sgd_momentum,
    f64::adamw,
    selected<OpKind::Reshape>,
    f64::embedding,
    f64::embedding_backward,
    f64::layer_norm,
    f64::layer_norm_backward,
    f64::gelu,
    f64::gelu_backward,
    f64::softmax,
    f64::softmax_backward,
    selected<OpKind::SplitHeads>,
    selected<OpKind::MergeHeads>,
    f64::dropout,  // Dropout
    f64::dropout,  // DropoutBackward: the same map of dy
    f64::conv2d,
    f64::conv2d_backward_input,
    f64::conv2d_backward_weight,
    f64::conv2d_backward_bias,
    selected<OpKind::MaxPool2d>,
    selected<OpKind::MaxPool2dBackward>,
    f64::sum_squares,
    f64::clip_coefficient,
    f64::scale,
};
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == kOpKindCount, "every OpKind needs a float64 kernel");

}  // namespace

void run_float64(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                 std::span<std::vector<double>> out, Float64Gemm gemm) {
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
  for (size_t i = 0; i < out.size(); ++i) out[i].assign(static_cast<size_t>(out_shapes[i].numel()), 0.0);
  kKernels[static_cast<size_t>(kind)](f64::Call{attrs, in, out_shapes, out, gemm});
}

}  // namespace tribunal
