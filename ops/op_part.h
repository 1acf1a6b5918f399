// A smaller instance of an op that computes a range of one of its outputs: what a referee needs to
// open and re-execute once a dispute is narrowed below one node, to one 64 KiB chunk of one of its
// outputs (docs/numerics.md, "Parts of an op"). Every op's output element is a fixed function of
// some of its inputs' elements (RepOps: one chain per element, docs/numerics.md); for the ops below a
// contiguous range of each input and a smaller instance of the same op with the same per-element
// chains compute the wanted elements with the full op's bits.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "ops/registry.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// The flat (row-major) elements [first, end) of one tensor.
struct ElementRange {
  int64_t first = 0;
  int64_t end = 0;
  int64_t size() const { return end - first; }
  bool operator==(const ElementRange&) const = default;
};

/// Columns [first, end) of a range viewed as rows of `cols` elements (cols = 0: the whole range).
struct ColumnWindow {
  int64_t cols = 0;
  int64_t first = 0;
  int64_t end = 0;
};

/// A smaller instance of an op: run with `attrs` on inputs of `shapes`, input i being the full
/// input's elements `inputs[i]` (of those, only the columns `columns[i]` when it is set), its output
/// `slot` holds the wanted range from element `offset` on.
struct OpPart {
  std::vector<ElementRange> inputs;   ///< per input: the contiguous flat elements of the full input read
  std::vector<Shape> shapes;          ///< per input: the shape the part runs it with (its numel: the range's
                                      ///< size, or rows × window width)
  std::vector<ColumnWindow> columns;  ///< per input: a window of its columns (a trans_a product's rows of
                                      ///< op(a) are columns of a), or none (cols = 0)
  Attrs attrs;                        ///< the part's attributes (the node's, or its shape attribute resized)
  int64_t offset = 0;                 ///< the wanted range's first element in the part's output
};

/// The part of node (`kind`, `attrs`, input shapes `in`, already valid for the op) that computes
/// elements `out` (0 ≤ first < end ≤ numel) of output `slot`, or nullopt when the op has none (its
/// outputs then need the whole op). Rules, each keeping every output element's chain
/// (docs/numerics.md "Parts of an op"): elementwise ops (add, relu, relu_backward, gelu,
/// gelu_backward, unary, unary_backward, sgd_momentum, adamw, reshape) the same range of every input,
/// run flat; scale the range of x and the scalar; linear and matmul without trans_a the rows of x
/// (a) that hold the range, w (b) and the bias whole; matmul with trans_a a's columns that are the
/// range's rows of op(a), and b whole; a batched matmul the range's batch elements (or
/// the rows of one batch element); layer_norm and the dx of layer_norm_backward the rows; softmax and
/// softmax_backward whole rows (causal: whole R × N blocks). Throws OpError when `out` or `slot` is
/// out of range.
std::optional<OpPart> op_part(OpKind kind, const Attrs& attrs, std::span<const Shape> in, int slot,
                              ElementRange out);

/// Where run_part gets the tensors it copies the inputs into and computes the outputs in, and where it
/// gives them back when done. By default new tensors, freed; a referee passes its re-execution pool
/// (engine/tensor_pool.h), so that its next part touches no fresh page (a product's part copies the
/// whole weight). A taken tensor's old contents never matter: the inputs are copied over and an op
/// writes every element of its outputs.
struct PartBuffers {
  std::function<Tensor(const Shape&)> take;
  std::function<void(Tensor&&)> give;
};

/// Runs `part` of op `kind` with its fast kernel: in[i] holds part.inputs[i].size() floats, the
/// full input's elements part.inputs[i] (copied whole, or only the window's columns); returns `count`
/// elements of output `slot` from
/// part.offset on. The bits of the full op's same elements (tests/ops/test_op_part.cpp). Throws
/// OpError when an input's size is not its range's or the part's shapes do not fit the op.
std::vector<float> run_part(OpKind kind, const OpPart& part, std::span<const std::span<const float>> in,
                            int slot, int64_t count, ThreadPool& pool, const PartBuffers& buffers = {});

}  // namespace tribunal
