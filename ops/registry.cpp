#include "ops/registry.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

// The one map from OpKind to descriptor. A switch with no default: a kind added to the enum without
// a case here fails to compile (-Wswitch made an error for this function), so there is no list kept
// in enum order to fall out of step.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"
const OpInfo* entry_of(OpKind kind) {
  switch (kind) {
    case OpKind::Gather:
      return &kGatherOp;
    case OpKind::Linear:
      return &kLinearOp;
    case OpKind::Matmul:
      return &kMatmulOp;
    case OpKind::SumRows:
      return &kSumRowsOp;
    case OpKind::Add:
      return &kAddOp;
    case OpKind::Relu:
      return &kReluOp;
    case OpKind::ReluBackward:
      return &kReluBackwardOp;
    case OpKind::SoftmaxCrossEntropy:
      return &kSoftmaxCrossEntropyOp;
    case OpKind::SoftmaxCrossEntropyBackward:
      return &kSoftmaxCrossEntropyBackwardOp;
    case OpKind::SgdMomentum:
      return &kSgdMomentumOp;
    case OpKind::AdamW:
      return &kAdamWOp;
    case OpKind::Reshape:
      return &kReshapeOp;
    case OpKind::Embedding:
      return &kEmbeddingOp;
    case OpKind::EmbeddingBackward:
      return &kEmbeddingBackwardOp;
    case OpKind::LayerNorm:
      return &kLayerNormOp;
    case OpKind::LayerNormBackward:
      return &kLayerNormBackwardOp;
    case OpKind::Gelu:
      return &kGeluOp;
    case OpKind::GeluBackward:
      return &kGeluBackwardOp;
    case OpKind::Softmax:
      return &kSoftmaxOp;
    case OpKind::SoftmaxBackward:
      return &kSoftmaxBackwardOp;
    case OpKind::SplitHeads:
      return &kSplitHeadsOp;
    case OpKind::MergeHeads:
      return &kMergeHeadsOp;
    case OpKind::Dropout:
      return &kDropoutOp;
    case OpKind::DropoutBackward:
      return &kDropoutBackwardOp;
    case OpKind::Conv2d:
      return &kConv2dOp;
    case OpKind::Conv2dBackwardInput:
      return &kConv2dBackwardInputOp;
    case OpKind::Conv2dBackwardWeight:
      return &kConv2dBackwardWeightOp;
    case OpKind::Conv2dBackwardBias:
      return &kConv2dBackwardBiasOp;
    case OpKind::MaxPool2d:
      return &kMaxPool2dOp;
    case OpKind::MaxPool2dBackward:
      return &kMaxPool2dBackwardOp;
    case OpKind::SumSquares:
      return &kSumSquaresOp;
    case OpKind::ClipCoefficient:
      return &kClipCoefficientOp;
    case OpKind::Scale:
      return &kScaleOp;
    case OpKind::BroadcastBinary:
      return &kBroadcastBinaryOp;
    case OpKind::SumToShape:
      return &kSumToShapeOp;
    case OpKind::Where:
      return &kWhereOp;
    case OpKind::WhereBackward:
      return &kWhereBackwardOp;
    case OpKind::GatherRows:
      return &kGatherRowsOp;
    case OpKind::Unary:
      return &kUnaryOp;
    case OpKind::UnaryBackward:
      return &kUnaryBackwardOp;
    case OpKind::Transpose:
      return &kTransposeOp;
    case OpKind::Slice:
      return &kSliceOp;
    case OpKind::SliceBackward:
      return &kSliceBackwardOp;
    case OpKind::Concat:
      return &kConcatOp;
    case OpKind::ReduceMean:
      return &kReduceMeanOp;
    case OpKind::ReduceMeanBackward:
      return &kReduceMeanBackwardOp;
    case OpKind::Expand:
      return &kExpandOp;
    case OpKind::GlobalAvgPool:
      return &kGlobalAvgPoolOp;
    case OpKind::GlobalAvgPoolBackward:
      return &kGlobalAvgPoolBackwardOp;
    case OpKind::BatchNorm:
      return &kBatchNormOp;
    case OpKind::BatchNormBackward:
      return &kBatchNormBackwardOp;
    case OpKind::BatchNormRunning:
      return &kBatchNormRunningOp;
    case OpKind::BatchNormInference:
      return &kBatchNormInferenceOp;
    case OpKind::Count:
      return nullptr;
  }
  return nullptr;
}
#pragma GCC diagnostic pop

// The entries by OpKind value, each checked once (op_info_defect); a defect aborts naming the op: a
// registry with a gap is a build that must not run.
struct Table {
  const OpInfo* entries[kOpKindCount];
  Table() {
    for (size_t k = 0; k < kOpKindCount; ++k) {
      const OpKind kind = static_cast<OpKind>(k);
      const OpInfo* info = entry_of(kind);
      std::string defect =
          info ? op_info_defect(kind, *info) : "op kind " + std::to_string(k) + ": no registry entry";
      // Names are what jobs (numerics.tau) and verdicts call ops by: one kind each.
      for (size_t j = 0; j < k && defect.empty(); ++j)
        if (std::strcmp(entries[j]->name, info->name) == 0)
          defect = std::string("op '") + info->name + "' (kind " + std::to_string(k) + "): kind " +
                   std::to_string(j) + " has the same name";
      if (!defect.empty()) {
        std::fprintf(stderr, "tribunal: the op registry is incomplete: %s\n", defect.c_str());
        std::abort();
      }
      entries[k] = info;
    }
  }
};

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

std::string op_info_defect(OpKind kind, const OpInfo& info) {
  const std::string op = std::string("op '") + (info.name ? info.name : "?") + "' (kind " +
                         std::to_string(static_cast<int>(kind)) + ")";
  if (info.kind != kind)
    return op + ": its entry describes kind " + std::to_string(static_cast<int>(info.kind));
  if (info.name == nullptr || *info.name == '\0') return op + ": no name";
  if (info.num_inputs == 0 || info.num_inputs < -1) return op + ": no input count";
  if (info.num_outputs < 1) return op + ": no output count";
  if (info.infer == nullptr) return op + ": no shape rule";
  if (info.reference == nullptr) return op + ": no reference kernel";
  if (info.fast == nullptr) return op + ": no fast kernel";
  if (info.float64 == nullptr) return op + ": no float64 kernel";
  const auto spread = static_cast<uint8_t>(info.float64_spread);
  if (spread < static_cast<uint8_t>(Float64Spread::Exact) ||
      spread > static_cast<uint8_t>(Float64Spread::Libm))
    return op + ": no float64 spread";
  if ((info.fma_chain == nullptr) != (info.quanta == nullptr))
    return op + ": a contraction needs both an fma chain and rounding quanta";
  for (size_t k = 0; k < info.in_place.size(); ++k)
    if (info.in_place[k] >= 0 && (static_cast<int>(k) >= info.num_outputs || info.num_inputs < 0 ||
                                  info.in_place[k] >= info.num_inputs))
      return op + ": in_place names an output or input the op does not have";
  return "";
}

const OpInfo& op_info(OpKind kind) {
  assert(static_cast<size_t>(kind) < kOpKindCount);
  static const Table table;
  return *table.entries[static_cast<size_t>(kind)];
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
