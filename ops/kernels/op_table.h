// Internal: the OpInfo (descriptor) of each op, defined next to its kernels, collected by
// ops/registry.cpp; the float64 kernels and quanta they point to are ops/float64/internal.h's.
#pragma once

#include <string>

#include "ops/float64/internal.h"
#include "ops/registry.h"

namespace tribunal {

extern const OpInfo kGatherOp, kLinearOp, kMatmulOp, kSumRowsOp, kAddOp, kReluOp, kReluBackwardOp,
    kSoftmaxCrossEntropyOp, kSoftmaxCrossEntropyBackwardOp, kSgdMomentumOp, kAdamWOp;
// Transformer ops (ops/kernels/embedding.cpp, layer_norm.cpp, activation.cpp, softmax.cpp, heads.cpp,
// dropout.cpp).
extern const OpInfo kReshapeOp, kEmbeddingOp, kEmbeddingBackwardOp, kLayerNormOp, kLayerNormBackwardOp,
    kGeluOp, kGeluBackwardOp, kSoftmaxOp, kSoftmaxBackwardOp, kSplitHeadsOp, kMergeHeadsOp, kDropoutOp,
    kDropoutBackwardOp;
// CNN and gradient-clipping ops (ops/kernels/conv.cpp, pool.cpp, clip.cpp).
extern const OpInfo kConv2dOp, kConv2dBackwardInputOp, kConv2dBackwardWeightOp, kConv2dBackwardBiasOp,
    kMaxPool2dOp, kMaxPool2dBackwardOp, kSumSquaresOp, kClipCoefficientOp, kScaleOp;
// Broadcasting arithmetic (ops/kernels/broadcast.cpp).
extern const OpInfo kBroadcastBinaryOp, kSumToShapeOp;
// Global average pooling (ops/kernels/global_pool.cpp).
extern const OpInfo kGlobalAvgPoolOp, kGlobalAvgPoolBackwardOp;
// Selection (ops/kernels/select.cpp).
extern const OpInfo kWhereOp, kWhereBackwardOp, kGatherRowsOp;

/// The VJP's reduction of a broadcast gradient (ops/kernels/broadcast.cpp): SumToShape(g → shape of v,
/// sign), or g itself when v's shape is already g's and sign is +1 (the sum of one element would only
/// turn −0 into +0; docs/numerics.md "Broadcasting arithmetic"). Shared by broadcast_binary and where.
ValueRef reduce_to(VjpBuilder& b, ValueRef g, ValueRef v, float sign);
// Elementwise functions (ops/kernels/unary.cpp).
extern const OpInfo kUnaryOp, kUnaryBackwardOp;
// Data movement (ops/kernels/movement.cpp).
extern const OpInfo kTransposeOp, kSliceOp, kSliceBackwardOp, kConcatOp;
// Mean over an axis and expand (ops/kernels/reduce_mean.cpp).
extern const OpInfo kReduceMeanOp, kReduceMeanBackwardOp, kExpandOp;
// Batch normalization (ops/kernels/batch_norm.cpp).
extern const OpInfo kBatchNormOp, kBatchNormBackwardOp, kBatchNormRunningOp, kBatchNormInferenceOp;

/// Throws OpError("<op>: <what>") unless cond holds. Used by shape rules and kernels.
inline void op_require(bool cond, const char* op, const std::string& what) {
  if (!cond) throw OpError(std::string(op) + ": " + what);
}

/// An elementwise kernel over elements [i0, i1) of its first input's numel.
using RangeKernel = void (*)(const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>,
                             int64_t i0, int64_t i1);

/// Reference form of a range kernel: one pass over all elements.
template <RangeKernel Range>
void whole_range(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  Range(a, in, out, 0, in[0]->numel());
}

/// Fast form: the same per-element code over a static partition (bitwise equal by construction).
template <RangeKernel Range>
void split_range(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                 ThreadPool& pool) {
  pool.parallel_for(
      in[0]->numel(), [&](int64_t i0, int64_t i1) { Range(a, in, out, i0, i1); }, int64_t{1} << 14);
}

}  // namespace tribunal
