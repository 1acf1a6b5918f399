#include "ops/registry.h"

#include <cassert>
#include <cstring>

#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

// Indexed by OpKind; the static_assert keeps it closed over the enum.
const OpInfo* const kTable[] = {
    &kGatherOp,
    &kLinearOp,
    &kMatmulOp,
    &kSumRowsOp,
    &kAddOp,
    &kReluOp,
    &kReluBackwardOp,
    &kSoftmaxCrossEntropyOp,
    &kSoftmaxCrossEntropyBackwardOp,
    &kSgdMomentumOp,
    &kAdamWOp,
    &kReshapeOp,
    &kEmbeddingOp,
    &kEmbeddingBackwardOp,
    &kLayerNormOp,
    &kLayerNormBackwardOp,
    &kGeluOp,
    &kGeluBackwardOp,
    &kSoftmaxOp,
    &kSoftmaxBackwardOp,
    &kSplitHeadsOp,
    &kMergeHeadsOp,
    &kDropoutOp,
    &kDropoutBackwardOp,
    &kConv2dOp,
    &kConv2dBackwardInputOp,
    &kConv2dBackwardWeightOp,
    &kConv2dBackwardBiasOp,
    &kMaxPool2dOp,
    &kMaxPool2dBackwardOp,
    &kSumSquaresOp,
    &kClipCoefficientOp,
    &kScaleOp,
};
static_assert(sizeof(kTable) / sizeof(kTable[0]) == kOpKindCount, "every OpKind needs a registry entry");

void put_u32(std::vector<std::byte>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>(v >> (8 * i)));
}

void check_inputs(const OpInfo& info, size_t n_in) {
  if (info.num_inputs < 0) {
    op_require(n_in >= 1, info.name, "expects at least one input, got none");
    return;
  }
  op_require(n_in == static_cast<size_t>(info.num_inputs), info.name,
             "expects " + std::to_string(info.num_inputs) + " inputs, got " + std::to_string(n_in));
}

void check_arity(const OpInfo& info, size_t n_in, size_t n_out) {
  check_inputs(info, n_in);
  op_require(n_out == static_cast<size_t>(info.num_outputs), info.name,
             "expects " + std::to_string(info.num_outputs) + " outputs, got " + std::to_string(n_out));
}

}  // namespace

std::vector<std::byte> encode_attrs(const Attrs& attrs) {
  std::vector<std::byte> out;
  out.reserve(8 + attrs.ints.size() * 8 + attrs.floats.size() * 4);
  put_u32(out, static_cast<uint32_t>(attrs.ints.size()));
  for (int64_t v : attrs.ints)
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>(static_cast<uint64_t>(v) >> (8 * i)));
  put_u32(out, static_cast<uint32_t>(attrs.floats.size()));
  for (float f : attrs.floats) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put_u32(out, bits);
  }
  return out;
}

const OpInfo& op_info(OpKind kind) {
  assert(static_cast<size_t>(kind) < kOpKindCount);
  return *kTable[static_cast<size_t>(kind)];
}

const char* op_name(OpKind kind) {
  return op_info(kind).name;
}

std::vector<Shape> infer_shapes(OpKind kind, const Attrs& attrs, std::span<const Shape> inputs) {
  const OpInfo& info = op_info(kind);
  check_inputs(info, inputs.size());
  op_require(info.num_ints < 0 || attrs.ints.size() == static_cast<size_t>(info.num_ints), info.name,
             "expects " + std::to_string(info.num_ints) + " integer attributes, got " +
                 std::to_string(attrs.ints.size()));
  op_require(attrs.floats.size() == static_cast<size_t>(info.num_floats), info.name,
             "expects " + std::to_string(info.num_floats) + " float attributes, got " +
                 std::to_string(attrs.floats.size()));
  return info.infer(attrs, inputs);
}

void run_reference(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                   std::span<Tensor* const> out) {
  const OpInfo& info = op_info(kind);
  check_arity(info, in.size(), out.size());
  info.reference(attrs, in, out);
}

void run_fast(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
              std::span<Tensor* const> out, ThreadPool& pool) {
  const OpInfo& info = op_info(kind);
  check_arity(info, in.size(), out.size());
  info.fast(attrs, in, out, pool);
}

}  // namespace tribunal
