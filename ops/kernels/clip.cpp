// Gradient clipping by global norm, as three ops (docs/numerics.md "Ops"): per gradient tensor
// sum_squares, then one clip_coefficient over all of them, then scale of each gradient. Together they
// are torch.nn.utils.clip_grad_norm_ (norm type 2, error_if_nonfinite = False):
//   sum_squares(x)        = canonical sum (ops/reduce.h) of the products xᵢ·xᵢ (each product rounded,
//                           no fma), i in row-major order; a scalar []
//   clip_coefficient(s…)  = total = canonical sum of s₀ … s_{P−1} in input order; norm = sqrt(total);
//                           c = max_norm / (norm + 1e-6f); result = c > 1 ? 1 : c
//                           (so c < 1 gives c, c ≥ 1 gives 1, and a NaN c stays NaN, as torch.clamp(max=1)
//                           propagates it: a non-finite gradient is not silently left unclipped)
//   scale(x, s)           = xᵢ·s
// None of them has a VJP: they act on gradients between the backward pass and the optimizer.
#include <cmath>

#include "ops/kernels/op_table.h"
#include "ops/reduce.h"

namespace tribunal {
namespace {

// ---- SumSquares ------------------------------------------------------------------------------------

std::vector<Shape> sum_squares_infer(const Attrs&, std::span<const Shape>) {
  return {Shape{}};
}

void sum_squares_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& x = *in[0];
  std::vector<float> sq(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) sq[static_cast<size_t>(i)] = x[i] * x[i];
  (*out[0])[0] = canonical_sum(sq.data(), x.numel());
}

/// The canonical sum of the squares without the temporary: whole rounds of 32 elements update lane j
/// with element 32r + j (lane-wise, so the compiler may vectorize it without reassociating), then the
/// tail, then the fixed tree. One thread: the tensors are parameter gradients (≤ ~10⁵ elements here,
/// tens of microseconds), and splitting the 32 lanes over threads would cost more than it saves.
void sum_squares_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      ThreadPool&) {
  const float* x = in[0]->data();
  const int64_t n = in[0]->numel();
  float lane[kReduceLanes] = {};
  int64_t i = 0;
  for (; i + kReduceLanes <= n; i += kReduceLanes)
    for (int j = 0; j < kReduceLanes; ++j) lane[j] = lane[j] + x[i + j] * x[i + j];
  for (int j = 0; i < n; ++i, ++j) lane[j] = lane[j] + x[i] * x[i];
  for (int w = kReduceLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = lane[j] + lane[j + w];
  (*out[0])[0] = lane[0];
}

// ---- ClipCoefficient -------------------------------------------------------------------------------

std::vector<Shape> clip_infer(const Attrs& a, std::span<const Shape> in) {
  const float max_norm = a.floats[0];
  op_require(std::isfinite(max_norm) && max_norm > 0.0f, "clip_coefficient",
             "max_norm must be finite and > 0, got " + std::to_string(max_norm));
  for (size_t i = 0; i < in.size(); ++i)
    op_require(in[i].rank() == 0, "clip_coefficient",
               "input " + std::to_string(i) + " must be a scalar sum of squares, got " + in[i].str());
  return {Shape{}};
}

void clip_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<float> s;
  for (const Tensor* t : in) s.push_back((*t)[0]);
  const float total = canonical_sum(s.data(), static_cast<int64_t>(s.size()));
  const float norm = std::sqrt(total);  // IEEE correctly rounded
  const float c = a.floats[0] / (norm + 1e-6f);
  (*out[0])[0] = c > 1.0f ? 1.0f : c;
}

void clip_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out, ThreadPool&) {
  clip_reference(a, in, out);  // a handful of scalars: the reference is the fast kernel
}

// ---- Scale -----------------------------------------------------------------------------------------

std::vector<Shape> scale_infer(const Attrs&, std::span<const Shape> in) {
  op_require(in[1].rank() == 0, "scale", "the factor must be a scalar [], got " + in[1].str());
  return {in[0]};
}

void scale_range(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out, int64_t i0,
                 int64_t i1) {
  const float* x = in[0]->data();
  const float s = (*in[1])[0];
  float* y = out[0]->data();
  for (int64_t i = i0; i < i1; ++i) y[i] = x[i] * s;
}

}  // namespace

const OpInfo kSumSquaresOp{.kind = OpKind::SumSquares,
                           .name = "sum_squares",
                           .num_inputs = 1,
                           .num_outputs = 1,
                           .num_ints = 0,
                           .num_floats = 0,
                           .infer = sum_squares_infer,
                           .reference = sum_squares_reference,
                           .fast = sum_squares_fast,
                           .vjp = nullptr,
                           .float64 = f64::sum_squares,
                           .float64_spread = Float64Spread::Libm};
const OpInfo kClipCoefficientOp{.kind = OpKind::ClipCoefficient,
                                .name = "clip_coefficient",
                                .num_inputs = -1,
                                .num_outputs = 1,
                                .num_ints = 0,
                                .num_floats = 1,
                                .infer = clip_infer,
                                .reference = clip_reference,
                                .fast = clip_fast,
                                .vjp = nullptr,
                                .float64 = f64::clip_coefficient,
                                .float64_spread = Float64Spread::Libm};
const OpInfo kScaleOp{.kind = OpKind::Scale,
                      .name = "scale",
                      .num_inputs = 2,
                      .num_outputs = 1,
                      .num_ints = 0,
                      .num_floats = 0,
                      .infer = scale_infer,
                      .reference = whole_range<scale_range>,
                      .fast = split_range<scale_range>,
                      .vjp = nullptr,
                      .float64 = f64::scale,
                      .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
