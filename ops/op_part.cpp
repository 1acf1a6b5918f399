// The smaller instances of ops that compute a range of an output (docs/numerics.md "Parts of an op").
#include "ops/op_part.h"

#include <algorithm>
#include <string>

namespace tribunal {
namespace {

ElementRange whole(const Shape& s) {
  return {0, s.numel()};
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Units [u0, u1) of `unit` elements each that hold `out`.
std::pair<int64_t, int64_t> units_of(ElementRange out, int64_t unit) {
  return {out.first / unit, ceil_div(out.end, unit)};
}

/// Every input read at the output's own positions (their element counts equal the output's).
std::optional<OpPart> elementwise(const Attrs& attrs, std::span<const Shape> in, const Shape& out_shape,
                                  ElementRange out) {
  OpPart part;
  part.attrs = attrs;
  for (const Shape& s : in) {
    if (s.numel() != out_shape.numel()) return std::nullopt;
    part.inputs.push_back(out);
    part.shapes.push_back(Shape{out.size()});
  }
  return part;
}

/// x's rows (of `row_in` elements) that hold the output rows (of `row_out`) covering `out`; every
/// other input whole.
OpPart rows(const Attrs& attrs, std::span<const Shape> in, size_t x, int64_t row_in, int64_t row_out,
            ElementRange out) {
  const auto [r0, r1] = units_of(out, row_out);
  OpPart part;
  part.attrs = attrs;
  for (size_t i = 0; i < in.size(); ++i) {
    part.inputs.push_back(i == x ? ElementRange{r0 * row_in, r1 * row_in} : whole(in[i]));
    part.shapes.push_back(i == x ? Shape{r1 - r0, row_in} : in[i]);
  }
  part.offset = out.first - r0 * row_out;
  return part;
}

/// A batched product's (a[Bt,·,·], b[Bt,·,·] → c[Bt,M,N]) batch elements that hold `out`, or within
/// one batch element the rows of a (without trans_a) that do.
OpPart batched_matmul(const Attrs& attrs, std::span<const Shape> in, const Shape& c, ElementRange out) {
  const Shape &a = in[0], &b = in[1];
  const int64_t per_c = c[1] * c[2], per_a = a[1] * a[2], per_b = b[1] * b[2];
  const auto [b0, b1] = units_of(out, per_c);
  OpPart part;
  part.attrs = attrs;
  if (b1 - b0 == 1 && attrs.ints[0] == 0) {
    const ElementRange in_batch{out.first - b0 * per_c, out.end - b0 * per_c};
    const auto [r0, r1] = units_of(in_batch, c[2]);
    part.inputs = {{b0 * per_a + r0 * a[2], b0 * per_a + r1 * a[2]}, {b0 * per_b, (b0 + 1) * per_b}};
    part.shapes = {Shape{1, r1 - r0, a[2]}, Shape{1, b[1], b[2]}};
    part.offset = in_batch.first - r0 * c[2];
    return part;
  }
  part.inputs = {{b0 * per_a, b1 * per_a}, {b0 * per_b, b1 * per_b}};
  part.shapes = {Shape{b1 - b0, a[1], a[2]}, Shape{b1 - b0, b[1], b[2]}};
  part.offset = out.first - b0 * per_c;
  return part;
}

/// softmax / softmax_backward over x[…, R, N]: whole rows, or whole R × N blocks when causal (the
/// mask depends on a row's index within its block); every input read at the same positions.
OpPart softmax_rows(const Attrs& attrs, std::span<const Shape> in, ElementRange out) {
  const Shape& x = in[0];
  const int64_t n = x[x.rank() - 1], r = x[x.rank() - 2];
  const bool causal = attrs.ints[0] != 0;
  const int64_t unit = causal ? r * n : n;
  const auto [u0, u1] = units_of(out, unit);
  OpPart part;
  part.attrs = attrs;
  for (size_t i = 0; i < in.size(); ++i) {
    part.inputs.push_back({u0 * unit, u1 * unit});
    part.shapes.push_back(causal ? Shape{u1 - u0, r, n} : Shape{u1 - u0, n});
  }
  part.offset = out.first - u0 * unit;
  return part;
}

}  // namespace

std::optional<OpPart> op_part(OpKind kind, const Attrs& attrs, std::span<const Shape> in, int slot,
                              ElementRange out) {
  const std::vector<Shape> outs = infer_shapes(kind, attrs, in);
  if (slot < 0 || static_cast<size_t>(slot) >= outs.size())
    throw OpError(std::string(op_name(kind)) + ": no output " + std::to_string(slot) + " (it has " +
                  std::to_string(outs.size()) + ")");
  const Shape& y = outs[static_cast<size_t>(slot)];
  if (out.first < 0 || out.first >= out.end || out.end > y.numel())
    throw OpError(std::string(op_name(kind)) + ": elements [" + std::to_string(out.first) + ", " +
                  std::to_string(out.end) + ") are not a range of output " + std::to_string(slot) + " " +
                  y.str());
  switch (kind) {
    case OpKind::Add:
    case OpKind::Relu:
    case OpKind::ReluBackward:
    case OpKind::Gelu:
    case OpKind::GeluBackward:
    case OpKind::Unary:
    case OpKind::UnaryBackward:
    case OpKind::SgdMomentum:
    case OpKind::AdamW:
      return elementwise(attrs, in, y, out);
    case OpKind::Reshape: {  // a copy: the same elements, flat
      OpPart part{{out}, {Shape{out.size()}}, {}, Attrs{{out.size()}, {}}, 0};
      return part;
    }
    case OpKind::Scale: {  // x[i]·s, s a scalar
      OpPart part{{out, whole(in[1])}, {Shape{out.size()}, in[1]}, {}, attrs, 0};
      return part;
    }
    case OpKind::Linear:  // x[M,K] · w + b: rows of x
      return rows(attrs, in, 0, in[0][1], y[1], out);
    case OpKind::Matmul:
      if (in[0].rank() == 3) return batched_matmul(attrs, in, y, out);
      if (attrs.ints[0] != 0) {  // a[K,M]: op(a)'s rows are a's columns, a window of every row of a
        const auto [r0, r1] = units_of(out, y[1]);
        OpPart part{{whole(in[0]), whole(in[1])},
                    {Shape{in[0][0], r1 - r0}, in[1]},
                    {ColumnWindow{in[0][1], r0, r1}, {}},
                    attrs,
                    out.first - r0 * y[1]};
        return part;
      }
      return rows(attrs, in, 0, in[0][1], y[1], out);
    case OpKind::LayerNorm:  // x[M,D], γ, β: rows of x
      return rows(attrs, in, 0, in[0][1], y[1], out);
    case OpKind::LayerNormBackward: {  // x[M,D], γ, dy[M,D] → dx (rows); dγ and dβ sum every row
      if (slot != 0) return std::nullopt;
      OpPart part = rows(attrs, in, 0, in[0][1], y[1], out);
      part.inputs[2] = part.inputs[0];
      part.shapes[2] = part.shapes[0];
      return part;
    }
    case OpKind::Softmax:
    case OpKind::SoftmaxBackward:
      return softmax_rows(attrs, in, out);
    default:
      return std::nullopt;
  }
}

std::vector<float> run_part(OpKind kind, const OpPart& part, std::span<const std::span<const float>> in,
                            int slot, int64_t count, ThreadPool& pool, const PartBuffers& buffers) {
  const char* name = op_name(kind);
  if (in.size() != part.inputs.size() || part.shapes.size() != part.inputs.size())
    throw OpError(std::string(name) + ": a part of " + std::to_string(part.inputs.size()) + " inputs given " +
                  std::to_string(in.size()));
  // The elements input i runs with: its range's, or the rows × width of its column window.
  const auto run_size = [&](size_t i) {
    const ColumnWindow w = i < part.columns.size() ? part.columns[i] : ColumnWindow{};
    return w.cols == 0 ? part.inputs[i].size() : part.inputs[i].size() / w.cols * (w.end - w.first);
  };
  for (size_t i = 0; i < in.size(); ++i)
    if (static_cast<int64_t>(in[i].size()) != part.inputs[i].size() || part.shapes[i].numel() != run_size(i))
      throw OpError(std::string(name) + ": part input " + std::to_string(i) + " has " +
                    std::to_string(in[i].size()) + " elements for a range of " +
                    std::to_string(part.inputs[i].size()) + " run as " + part.shapes[i].str());
  const std::vector<Shape> out_shapes = infer_shapes(kind, part.attrs, part.shapes);
  if (slot < 0 || static_cast<size_t>(slot) >= out_shapes.size() || part.offset < 0 || count < 0 ||
      part.offset + count > out_shapes[static_cast<size_t>(slot)].numel())
    throw OpError(std::string(name) + ": a part's output " + std::to_string(slot) + " does not hold " +
                  std::to_string(count) + " elements from " + std::to_string(part.offset));
  // Every tensor taken goes back (or is freed) whatever happens.
  struct Taken {
    const PartBuffers& buffers;
    std::vector<Tensor> inputs, outputs;
    Tensor take(const Shape& s) const { return buffers.take ? buffers.take(s) : Tensor(s); }
    ~Taken() {
      if (!buffers.give) return;
      for (Tensor& t : inputs) buffers.give(std::move(t));
      for (Tensor& t : outputs) buffers.give(std::move(t));
    }
  } taken{buffers, {}, {}};
  std::vector<Tensor>& inputs = taken.inputs;
  std::vector<Tensor>& outputs = taken.outputs;
  inputs.reserve(in.size());
  outputs.reserve(out_shapes.size());
  for (size_t i = 0; i < in.size(); ++i) {
    inputs.push_back(taken.take(part.shapes[i]));
    const ColumnWindow w = i < part.columns.size() ? part.columns[i] : ColumnWindow{};
    float* to = inputs.back().data();
    if (w.cols == 0) {
      std::copy(in[i].begin(), in[i].end(), to);
      continue;
    }
    const int64_t width = w.end - w.first;  // gather the window's columns of every row
    for (int64_t r = 0; r < part.inputs[i].size() / w.cols; ++r, to += width)
      std::copy_n(in[i].begin() + r * w.cols + w.first, width, to);
  }
  for (const Shape& s : out_shapes) outputs.push_back(taken.take(s));
  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor*> out_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(&t);
  for (Tensor& t : outputs) out_ptrs.push_back(&t);
  run_fast(kind, part.attrs, in_ptrs, out_ptrs, pool);
  const std::span<const float> y = outputs[static_cast<size_t>(slot)].values();
  return {y.begin() + part.offset, y.begin() + part.offset + count};
}

}  // namespace tribunal
