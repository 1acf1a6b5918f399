// TEMPORARY stubs so the registry links while the CNN-ops work implements these ops; this file is deleted
// when the real definitions land. Every stub refuses to run.
#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {
[[noreturn]] void pending(const char* op) { throw OpError(std::string(op) + ": not implemented yet"); }
}  // namespace

const OpInfo kConv2dOp{"conv2d", 3, 1, 2, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("conv2d"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("conv2d"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("conv2d"); },
    nullptr};
const OpInfo kConv2dBackwardInputOp{"conv2d_backward_input", 2, 1, 4, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("conv2d_backward_input"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("conv2d_backward_input"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("conv2d_backward_input"); },
    nullptr};
const OpInfo kConv2dBackwardWeightOp{"conv2d_backward_weight", 2, 1, 4, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("conv2d_backward_weight"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("conv2d_backward_weight"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("conv2d_backward_weight"); },
    nullptr};
const OpInfo kConv2dBackwardBiasOp{"conv2d_backward_bias", 1, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("conv2d_backward_bias"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("conv2d_backward_bias"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("conv2d_backward_bias"); },
    nullptr};
const OpInfo kMaxPool2dOp{"max_pool2d", 1, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("max_pool2d"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("max_pool2d"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("max_pool2d"); },
    nullptr};
const OpInfo kMaxPool2dBackwardOp{"max_pool2d_backward", 2, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("max_pool2d_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("max_pool2d_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("max_pool2d_backward"); },
    nullptr};
const OpInfo kSumSquaresOp{"sum_squares", 1, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("sum_squares"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("sum_squares"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("sum_squares"); },
    nullptr};
const OpInfo kClipCoefficientOp{"clip_coefficient", -1, 1, 0, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("clip_coefficient"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("clip_coefficient"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("clip_coefficient"); },
    nullptr};
const OpInfo kScaleOp{"scale", 2, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("scale"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("scale"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("scale"); },
    nullptr};

}  // namespace tribunal
