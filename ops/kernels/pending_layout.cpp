// TEMPORARY stubs so the registry links while the layout-ops work (reshape, embedding, heads, dropout) implements these ops; this file is deleted
// when the real definitions land. Every stub refuses to run.
#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {
[[noreturn]] void pending(const char* op) { throw OpError(std::string(op) + ": not implemented yet"); }
}  // namespace

const OpInfo kReshapeOp{"reshape", 1, 1, -1, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("reshape"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("reshape"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("reshape"); },
    nullptr};
const OpInfo kEmbeddingOp{"embedding", 3, 1, 0, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("embedding"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("embedding"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("embedding"); },
    nullptr};
const OpInfo kEmbeddingBackwardOp{"embedding_backward", 2, 1, 1, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("embedding_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("embedding_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("embedding_backward"); },
    nullptr};
const OpInfo kSplitHeadsOp{"split_heads", 1, 1, 3, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("split_heads"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("split_heads"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("split_heads"); },
    nullptr};
const OpInfo kMergeHeadsOp{"merge_heads", 1, 1, 3, 0,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("merge_heads"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("merge_heads"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("merge_heads"); },
    nullptr};
const OpInfo kDropoutOp{"dropout", 1, 1, 3, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("dropout"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("dropout"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("dropout"); },
    nullptr};
const OpInfo kDropoutBackwardOp{"dropout_backward", 1, 1, 3, 1,
    [](const Attrs&, std::span<const Shape>) -> std::vector<Shape> { pending("dropout_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>) { pending("dropout_backward"); },
    [](const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>, ThreadPool&) { pending("dropout_backward"); },
    nullptr};

}  // namespace tribunal
