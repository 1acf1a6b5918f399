// Reshape, SplitHeads and MergeHeads: the layout ops of the transformer. Each output element is a copy
// of one input element (no arithmetic), so every implementation is exact and any split over threads is
// bitwise identical to the reference. The fast kernels split independent output rows over threads and
// copy contiguous runs with memcpy.
#include <concepts>
#include <cstring>
#include <string>

#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

// Elements a thread should copy at least before another thread is worth waking (as split_range).
constexpr int64_t kCopyGrain = int64_t{1} << 14;

/// Rows of `row_len` floats per thread: about kCopyGrain elements, at least one row.
int64_t row_grain(int64_t row_len) {
  return std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(1, row_len));
}

// ---- Reshape: y = x with the shape given by ints (same element count), a copy.

std::vector<Shape> reshape_infer(const Attrs& attrs, std::span<const Shape> in) {
  op_require(attrs.ints.size() <= static_cast<size_t>(kMaxRank), "reshape",
             "the new shape has rank " + std::to_string(attrs.ints.size()) + ", more than " +
                 std::to_string(kMaxRank));
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : attrs.ints) {
    op_require(d >= 0, "reshape", "negative dimension " + std::to_string(d) + " in the new shape");
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  const Shape out(std::span<const int64_t>(attrs.ints));
  op_require(
      !overflow && n == in[0].numel(), "reshape",
      "cannot reshape " + in[0].str() + " (" + std::to_string(in[0].numel()) + " elements) to " + out.str());
  return {out};
}

void reshape_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t i = 0; i < in[0]->numel(); ++i) y[i] = x[i];
}

void reshape_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                  ThreadPool& pool) {
  const float* x = in[0]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        std::memcpy(y + i0, x + i0, static_cast<size_t>(i1 - i0) * sizeof(float));
      },
      kCopyGrain);
}

// dx = dy reshaped back to x's shape.
void reshape_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  const Shape x = g.shape(a.inputs[0]);
  in_grads[0] = g.emit(OpKind::Reshape, {{x.dims().begin(), x.dims().end()}, {}}, {a.out_grads[0]});
}

// ---- SplitHeads / MergeHeads: x[B·T, H·E] ↔ y[B·H, T, E], y[b·H+h, t, e] = x[b·T+t, h·E+e].

struct Heads {
  int64_t b, t, h, e;
};

// Dimensions up to 2³¹ keep every product below 2⁶² (no overflow in the checks and the indexing).
constexpr int64_t kMaxHeadDim = int64_t{1} << 31;

Heads head_attrs(const char* op, const Attrs& attrs) {
  const int64_t b = attrs.ints[0], t = attrs.ints[1], h = attrs.ints[2];
  op_require(b >= 0 && b < kMaxHeadDim && t >= 0 && t < kMaxHeadDim, op,
             "B and T must be in [0, 2^31), got B = " + std::to_string(b) + ", T = " + std::to_string(t));
  op_require(h >= 1 && h < kMaxHeadDim, op, "H must be in [1, 2^31), got " + std::to_string(h));
  return {b, t, h, 0};
}

std::vector<Shape> split_heads_infer(const Attrs& attrs, std::span<const Shape> in) {
  Heads d = head_attrs("split_heads", attrs);
  const Shape& x = in[0];
  op_require(x.rank() == 2 && x[0] == d.b * d.t && x[1] % d.h == 0, "split_heads",
             "needs x[B·T, H·E] = [" + std::to_string(d.b * d.t) + ", " + std::to_string(d.h) + "·E], got " +
                 x.str());
  d.e = x[1] / d.h;
  return {Shape{d.b * d.h, d.t, d.e}};
}

std::vector<Shape> merge_heads_infer(const Attrs& attrs, std::span<const Shape> in) {
  const Heads d = head_attrs("merge_heads", attrs);
  const Shape& x = in[0];
  op_require(x.rank() == 3 && x[0] == d.b * d.h && x[1] == d.t, "merge_heads",
             "needs x[B·H, T, E] = [" + std::to_string(d.b * d.h) + ", " + std::to_string(d.t) +
                 ", E], got " + x.str());
  op_require(x[2] < kMaxHeadDim, "merge_heads", "E must be below 2^31, got " + std::to_string(x[2]));
  return {Shape{d.b * d.t, d.h * x[2]}};
}

/// The split's dimensions from the (already inferred) tensors: E from the head-major side.
Heads split_dims(const Attrs& attrs, const Tensor& heads_major) {
  return {attrs.ints[0], attrs.ints[1], attrs.ints[2], heads_major.shape()[2]};
}

void split_heads_reference(const Attrs& attrs, std::span<const Tensor* const> in,
                           std::span<Tensor* const> out) {
  const Heads d = split_dims(attrs, *out[0]);
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t h = 0; h < d.h; ++h)
      for (int64_t t = 0; t < d.t; ++t)
        for (int64_t e = 0; e < d.e; ++e)
          y[((b * d.h + h) * d.t + t) * d.e + e] = x[(b * d.t + t) * d.h * d.e + h * d.e + e];
}

// One output row (b·H+h, t) per unit: E contiguous floats from row b·T+t of x.
void split_heads_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      ThreadPool& pool) {
  const Heads d = split_dims(attrs, *out[0]);
  const float* x = in[0]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      d.b * d.h * d.t,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t t = r % d.t, bh = r / d.t, h = bh % d.h, b = bh / d.h;
          std::memcpy(y + r * d.e, x + (b * d.t + t) * d.h * d.e + h * d.e,
                      static_cast<size_t>(d.e) * sizeof(float));
        }
      },
      row_grain(d.e));
}

void merge_heads_reference(const Attrs& attrs, std::span<const Tensor* const> in,
                           std::span<Tensor* const> out) {
  const Heads d = split_dims(attrs, *in[0]);
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t b = 0; b < d.b; ++b)
    for (int64_t t = 0; t < d.t; ++t)
      for (int64_t h = 0; h < d.h; ++h)
        for (int64_t e = 0; e < d.e; ++e)
          y[(b * d.t + t) * d.h * d.e + h * d.e + e] = x[((b * d.h + h) * d.t + t) * d.e + e];
}

// One output row b·T+t per unit: H runs of E floats, one from each head.
void merge_heads_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      ThreadPool& pool) {
  const Heads d = split_dims(attrs, *in[0]);
  const float* x = in[0]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      d.b * d.t,
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t t = r % d.t, b = r / d.t;
          for (int64_t h = 0; h < d.h; ++h)
            std::memcpy(y + r * d.h * d.e + h * d.e, x + ((b * d.h + h) * d.t + t) * d.e,
                        static_cast<size_t>(d.e) * sizeof(float));
        }
      },
      row_grain(d.h * d.e));
}

// The two layouts are inverse permutations, so each one's VJP is the other with the same attributes.
void split_heads_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::MergeHeads, a.attrs, {a.out_grads[0]});
}

void merge_heads_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::SplitHeads, a.attrs, {a.out_grads[0]});
}

}  // namespace

const OpInfo kReshapeOp{.kind = OpKind::Reshape,
                        .name = "reshape",
                        .num_inputs = 1,
                        .num_outputs = 1,
                        .num_ints = -1,
                        .num_floats = 0,
                        .infer = reshape_infer,
                        .reference = reshape_reference,
                        .fast = reshape_fast,
                        .vjp = reshape_vjp,
                        .float64 = f64::selected<OpKind::Reshape>,
                        .float64_spread = Float64Spread::Exact};
const OpInfo kSplitHeadsOp{.kind = OpKind::SplitHeads,
                           .name = "split_heads",
                           .num_inputs = 1,
                           .num_outputs = 1,
                           .num_ints = 3,
                           .num_floats = 0,
                           .infer = split_heads_infer,
                           .reference = split_heads_reference,
                           .fast = split_heads_fast,
                           .vjp = split_heads_vjp,
                           .float64 = f64::selected<OpKind::SplitHeads>,
                           .float64_spread = Float64Spread::Exact};
const OpInfo kMergeHeadsOp{.kind = OpKind::MergeHeads,
                           .name = "merge_heads",
                           .num_inputs = 1,
                           .num_outputs = 1,
                           .num_ints = 3,
                           .num_floats = 0,
                           .infer = merge_heads_infer,
                           .reference = merge_heads_reference,
                           .fast = merge_heads_fast,
                           .vjp = merge_heads_vjp,
                           .float64 = f64::selected<OpKind::MergeHeads>,
                           .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
