// TEMPORARY stubs so the registry links while the math-ops work (layer norm, gelu, softmax) implements these ops; this file is deleted
// when the real definitions land. Every stub refuses to run.
#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {
[[noreturn]] void pending(const char* op) { throw OpError(std::string(op) + ": not implemented yet"); }
}  // namespace

const OpInfo kLayerNormOp{"layer_norm", 3, 1, 0, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("layer_norm"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("layer_norm"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("layer_norm"); },
    nullptr};
const OpInfo kLayerNormBackwardOp{"layer_norm_backward", 3, 3, 0, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("layer_norm_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("layer_norm_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("layer_norm_backward"); },
    nullptr};
const OpInfo kGeluOp{"gelu", 1, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("gelu"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("gelu"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("gelu"); },
    nullptr};
const OpInfo kGeluBackwardOp{"gelu_backward", 2, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("gelu_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("gelu_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("gelu_backward"); },
    nullptr};
const OpInfo kSoftmaxOp{"softmax", 1, 1, 1, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("softmax"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("softmax"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("softmax"); },
    nullptr};
const OpInfo kSoftmaxBackwardOp{"softmax_backward", 2, 1, 1, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("softmax_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("softmax_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("softmax_backward"); },
    nullptr};

}  // namespace tribunal
