// Transpose, Slice, SliceBackward and Concat: the data-movement ops of exported graphs (ONNX Transpose,
// Slice and Split, Concat; docs/onnx.md). Each output element is a copy of one input element or +0 (no
// arithmetic), so every implementation is exact and any split over threads is bitwise identical to the
// reference (docs/numerics.md "Data movement: transpose, slice, concat"). The references index by
// coordinates, as the contract is written; the fast kernels run ops/movement.h's strided copies split
// over threads, innermost runs that are contiguous on both sides moved with memcpy.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/movement.h"

namespace tribunal {
namespace {

// Elements a thread should copy at least before another thread is worth waking (as split_range).
constexpr int64_t kCopyGrain = int64_t{1} << 14;

std::string str(int64_t v) {
  return std::to_string(v);
}

/// The ops take ranks 1 to 4 (what ops/movement.h's rank-4 geometry holds; a rank-0 tensor has no axis).
void require_rank(const char* op, const Shape& s, const char* what) {
  op_require(s.rank() >= 1 && s.rank() <= kMaxRank, op,
             std::string(what) + " must have rank 1 to " + str(kMaxRank) + ", got " + s.str());
}

void require_axis(const char* op, int64_t axis, const Shape& s) {
  op_require(axis >= 0 && axis < s.rank(), op,
             "axis " + str(axis) + " is not an axis of " + s.str() + " (0 ≤ axis < " + str(s.rank()) + ")");
}

/// `dims` with dim `axis` replaced by `d`.
Shape with_dim(const Shape& s, int axis, int64_t d) {
  std::vector<int64_t> dims(s.dims().begin(), s.dims().end());
  dims[static_cast<size_t>(axis)] = d;
  return Shape(std::span<const int64_t>(dims));
}

// ---- Coordinates (the references) ---------------------------------------------------------------------

/// Row-major coordinates of flat index i over `s`.
void unravel(int64_t i, const Shape& s, int64_t* c) {
  for (int d = s.rank() - 1; d >= 0; --d) {
    c[d] = i % s[d];
    i /= s[d];
  }
}

/// Row-major flat index of coordinates c over `s`.
int64_t ravel(const int64_t* c, const Shape& s) {
  int64_t i = 0;
  for (int d = 0; d < s.rank(); ++d) i = i * s[d] + c[d];
  return i;
}

// ---- The fast copy -------------------------------------------------------------------------------------

/// dst[copy_dst_offset(g, i)] = src[copy_src_offset(g, i)] for every i of the coalesced geometry, its
/// elements split over threads in static ranges of flat index; within a range, each piece of an
/// innermost row is one memcpy where it is contiguous in both src and dst (so one long row, a rank-1
/// slice or concat, splits as well as many short ones).
void strided_copy(const CopyGeom& geom, const float* src, float* dst, ThreadPool& pool) {
  const CopyGeom g = coalesce(geom);
  const int64_t len = g.dims[3], n = g.dims[0] * g.dims[1] * g.dims[2] * len;
  if (n == 0) return;
  const int64_t ss = g.src_strides[3], ds = g.dst_strides[3];
  pool.parallel_for(
      n,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1;) {
          const int64_t j = i % len, piece = std::min(len - j, i1 - i);
          const float* s = src + copy_src_offset(g, i - j) + j * ss;
          float* d = dst + copy_dst_offset(g, i - j) + j * ds;
          if (ss == 1 && ds == 1)
            std::memcpy(d, s, static_cast<size_t>(piece) * sizeof(float));
          else
            for (int64_t k = 0; k < piece; ++k) d[k * ds] = s[k * ss];
          i += piece;
        }
      },
      kCopyGrain);
}

// ---- Transpose: y[i₀…] = x[the same coordinates permuted], y.shape[d] = x.shape[perm[d]] -------------

std::vector<Shape> transpose_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "transpose";
  const Shape& x = in[0];
  require_rank(op, x, "x");
  op_require(attrs.ints.size() == static_cast<size_t>(x.rank()), op,
             "perm must have one entry per axis of x " + x.str() + " (" + str(x.rank()) + "), got " +
                 str(static_cast<int64_t>(attrs.ints.size())));
  bool seen[kMaxRank] = {};
  std::vector<int64_t> dims;
  for (int64_t p : attrs.ints) {
    op_require(p >= 0 && p < x.rank() && !seen[p], op,
               "perm must be a permutation of 0.." + str(x.rank() - 1) + ", got entry " + str(p) +
                   (p >= 0 && p < x.rank() ? " twice" : " out of range"));
    seen[p] = true;
    dims.push_back(x[static_cast<int>(p)]);
  }
  return {Shape(std::span<const int64_t>(dims))};
}

void transpose_reference(const Attrs& attrs, std::span<const Tensor* const> in,
                         std::span<Tensor* const> out) {
  const Shape &xs = in[0]->shape(), &ys = out[0]->shape();
  const float* x = in[0]->data();
  float* y = out[0]->data();
  int64_t yc[kMaxRank], xc[kMaxRank];
  for (int64_t i = 0; i < ys.numel(); ++i) {
    unravel(i, ys, yc);
    for (int d = 0; d < ys.rank(); ++d) xc[attrs.ints[static_cast<size_t>(d)]] = yc[d];
    y[i] = x[ravel(xc, xs)];
  }
}

void transpose_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                    ThreadPool& pool) {
  const Shape& xs = in[0]->shape();
  if (xs.numel() == 0) return;
  strided_copy(transpose_geom(xs.dims().data(), xs.rank(), attrs.ints.data()), in[0]->data(), out[0]->data(),
               pool);
}

// dx = dy transposed by the inverse permutation.
void transpose_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  std::vector<int64_t> inverse(a.attrs.ints.size());
  for (size_t d = 0; d < inverse.size(); ++d)
    inverse[static_cast<size_t>(a.attrs.ints[d])] = static_cast<int64_t>(d);
  in_grads[0] = b.emit(OpKind::Transpose, {inverse, {}}, {a.out_grads[0]});
}

// ---- Slice: y[…, l, …] = x[…, start + l·step, …], l < ceil((end − start)/step) -------------------------

struct SliceAttrs {
  int axis;
  int64_t start, end, step;
};

SliceAttrs slice_attrs(const Attrs& a) {
  return {static_cast<int>(a.ints[0]), a.ints[1], a.ints[2], a.ints[3]};
}

/// ceil(n / step) without overflow (n ≥ 0, step ≥ 1).
int64_t ceil_div(int64_t n, int64_t step) {
  return n / step + (n % step != 0 ? 1 : 0);
}

std::vector<Shape> slice_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "slice";
  const Shape& x = in[0];
  require_rank(op, x, "x");
  require_axis(op, attrs.ints[0], x);
  const SliceAttrs s = slice_attrs(attrs);
  op_require(s.step >= 1, op, "step must be at least 1, got " + str(s.step));
  op_require(s.start >= 0 && s.start <= s.end && s.end <= x[s.axis], op,
             "needs 0 ≤ start ≤ end ≤ x.shape[" + str(s.axis) + "] = " + str(x[s.axis]) + ", got start " +
                 str(s.start) + ", end " + str(s.end) +
                 " (normalize negative and out-of-range bounds first)");
  return {with_dim(x, s.axis, ceil_div(s.end - s.start, s.step))};
}

void slice_reference(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const SliceAttrs s = slice_attrs(attrs);
  const Shape &xs = in[0]->shape(), &ys = out[0]->shape();
  const float* x = in[0]->data();
  float* y = out[0]->data();
  int64_t c[kMaxRank];
  for (int64_t i = 0; i < ys.numel(); ++i) {
    unravel(i, ys, c);
    c[s.axis] = s.start + c[s.axis] * s.step;
    y[i] = x[ravel(c, xs)];
  }
}

void slice_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                ThreadPool& pool) {
  const SliceAttrs s = slice_attrs(attrs);
  const Shape &xs = in[0]->shape(), &ys = out[0]->shape();
  if (ys.numel() == 0) return;
  // A step matters only between two positions; with one it is taken as 1, so no stride is formed from
  // a step beyond the axis (up to 2⁶³ − 1).
  const int64_t len = ys[s.axis];
  strided_copy(slice_geom(axis_view(xs.dims().data(), xs.rank(), s.axis), s.start, len > 1 ? s.step : 1, len),
               in[0]->data(), out[0]->data(), pool);
}

// dx = dy scattered back to the sliced positions, +0 elsewhere.
void slice_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  const SliceAttrs s = slice_attrs(a.attrs);
  const Shape x = b.shape(a.inputs[0]);
  in_grads[0] = b.emit(OpKind::SliceBackward, {{s.axis, s.start, s.step, x[s.axis]}, {}}, {a.out_grads[0]});
}

// ---- SliceBackward: dx[…, start + l·step, …] = dy[…, l, …], every other dx element +0 ------------------

struct SliceBackAttrs {
  int axis;
  int64_t start, step, full;
};

SliceBackAttrs slice_back_attrs(const Attrs& a) {
  return {static_cast<int>(a.ints[0]), a.ints[1], a.ints[2], a.ints[3]};
}

std::vector<Shape> slice_backward_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "slice_backward";
  const Shape& dy = in[0];
  require_rank(op, dy, "dy");
  require_axis(op, attrs.ints[0], dy);
  const SliceBackAttrs s = slice_back_attrs(attrs);
  op_require(s.step >= 1, op, "step must be at least 1, got " + str(s.step));
  op_require(s.start >= 0 && s.full >= 0, op,
             "start and full_dim must be ≥ 0, got start " + str(s.start) + ", full_dim " + str(s.full));
  const int64_t len = dy[s.axis];
  // The last sliced position start + (len − 1)·step must lie in [0, full_dim) (for len = 0: start ≤
  // full_dim, as Slice's bounds); computed without overflow.
  int64_t last = 0;
  const bool fits = len == 0 ? s.start <= s.full
                             : !__builtin_mul_overflow(len - 1, s.step, &last) &&
                                   !__builtin_add_overflow(last, s.start, &last) && last < s.full;
  op_require(fits, op,
             "dy has " + str(len) + " positions along axis " + str(s.axis) + " from start " + str(s.start) +
                 " by step " + str(s.step) + ": they do not fit in full_dim " + str(s.full));
  const Shape dx = with_dim(dy, s.axis, s.full);
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dx.dims()) overflow = overflow || __builtin_mul_overflow(n, d, &n);
  op_require(!overflow, op, "dx " + dx.str() + " has more elements than an int64 counts");
  return {dx};
}

void slice_backward_reference(const Attrs& attrs, std::span<const Tensor* const> in,
                              std::span<Tensor* const> out) {
  const SliceBackAttrs s = slice_back_attrs(attrs);
  const Shape &dys = in[0]->shape(), &dxs = out[0]->shape();
  const float* dy = in[0]->data();
  float* dx = out[0]->data();
  for (int64_t j = 0; j < dxs.numel(); ++j) dx[j] = 0.0f;
  int64_t c[kMaxRank];
  for (int64_t i = 0; i < dys.numel(); ++i) {
    unravel(i, dys, c);
    c[s.axis] = s.start + c[s.axis] * s.step;
    dx[ravel(c, dxs)] = dy[i];
  }
}

// dx zeroed by ranges of elements, then dy copied into its positions (ops/movement.h's scatter):
// two passes, each split over threads into disjoint writes, the second after the first has finished.
void slice_backward_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                         ThreadPool& pool) {
  const SliceBackAttrs s = slice_back_attrs(attrs);
  const Shape &dys = in[0]->shape(), &dxs = out[0]->shape();
  float* dx = out[0]->data();
  pool.parallel_for(
      dxs.numel(),
      [&](int64_t i0, int64_t i1) {
        std::memset(dx + i0, 0, static_cast<size_t>(i1 - i0) * sizeof(float));  // all-zero bytes: +0
      },
      kCopyGrain);
  if (dys.numel() == 0) return;
  strided_copy(
      slice_scatter_geom(axis_view(dxs.dims().data(), dxs.rank(), s.axis), s.start, s.step, dys[s.axis]),
      in[0]->data(), dx, pool);
}

// SliceBackward is linear: its VJP slices the same positions back out of ddx.
void slice_backward_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  const SliceBackAttrs s = slice_back_attrs(a.attrs);
  const int64_t len = b.shape(a.inputs[0])[s.axis];
  const int64_t end = len == 0 ? s.start : s.start + (len - 1) * s.step + 1;
  in_grads[0] = b.emit(OpKind::Slice, {{s.axis, s.start, end, s.step}, {}}, {a.out_grads[0]});
}

// ---- Concat: y = the inputs one after another along the axis -------------------------------------------

std::vector<Shape> concat_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "concat";
  const Shape& first = in[0];
  require_rank(op, first, "input 0");
  require_axis(op, attrs.ints[0], first);
  const int axis = static_cast<int>(attrs.ints[0]);
  int64_t total = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    const Shape& x = in[k];
    bool same = x.rank() == first.rank();
    for (int d = 0; same && d < x.rank(); ++d) same = d == axis || x[d] == first[d];
    op_require(same, op,
               "input " + str(static_cast<int64_t>(k)) + " " + x.str() + " differs from input 0 " +
                   first.str() + " on an axis other than " + str(axis) + " (or in rank)");
    op_require(!__builtin_add_overflow(total, x[axis], &total), op, "the concatenated axis overflows int64");
  }
  return {with_dim(first, axis, total)};
}

void concat_reference(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const int axis = static_cast<int>(attrs.ints[0]);
  const Shape& ys = out[0]->shape();
  float* y = out[0]->data();
  int64_t offset = 0, c[kMaxRank];
  for (const Tensor* t : in) {
    const Shape& xs = t->shape();
    for (int64_t i = 0; i < xs.numel(); ++i) {
      unravel(i, xs, c);
      c[axis] += offset;
      y[ravel(c, ys)] = (*t)[i];
    }
    offset += xs[axis];
  }
}

void concat_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                 ThreadPool& pool) {
  const int axis = static_cast<int>(attrs.ints[0]);
  const Shape& ys = out[0]->shape();
  int64_t offset = 0;
  for (const Tensor* t : in) {
    const Shape& xs = t->shape();
    if (xs.numel() != 0)
      strided_copy(concat_geom(axis_view(xs.dims().data(), xs.rank(), axis), offset, ys[axis]), t->data(),
                   out[0]->data(), pool);
    offset += xs[axis];
  }
}

// Each input's gradient is its range of dy along the axis: Slice(dy, {axis, offset, offset + a, 1}).
void concat_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const int64_t axis = a.attrs.ints[0];
  int64_t offset = 0;
  for (size_t k = 0; k < a.inputs.size(); ++k) {
    const int64_t len = b.shape(a.inputs[k])[static_cast<int>(axis)];
    if (a.needs_grad[k])
      in_grads[k] = b.emit(OpKind::Slice, {{axis, offset, offset + len, 1}, {}}, {a.out_grads[0]});
    offset += len;
  }
}

}  // namespace

const OpInfo kTransposeOp{.kind = OpKind::Transpose,
                          .name = "transpose",
                          .num_inputs = 1,
                          .num_outputs = 1,
                          .num_ints = -1,
                          .num_floats = 0,
                          .infer = transpose_infer,
                          .reference = transpose_reference,
                          .fast = transpose_fast,
                          .vjp = transpose_vjp,
                          .float64 = f64::selected<OpKind::Transpose>,
                          .float64_spread = Float64Spread::Exact};
const OpInfo kSliceOp{.kind = OpKind::Slice,
                      .name = "slice",
                      .num_inputs = 1,
                      .num_outputs = 1,
                      .num_ints = 4,
                      .num_floats = 0,
                      .infer = slice_infer,
                      .reference = slice_reference,
                      .fast = slice_fast,
                      .vjp = slice_vjp,
                      .float64 = f64::selected<OpKind::Slice>,
                      .float64_spread = Float64Spread::Exact};
const OpInfo kSliceBackwardOp{.kind = OpKind::SliceBackward,
                              .name = "slice_backward",
                              .num_inputs = 1,
                              .num_outputs = 1,
                              .num_ints = 4,
                              .num_floats = 0,
                              .infer = slice_backward_infer,
                              .reference = slice_backward_reference,
                              .fast = slice_backward_fast,
                              .vjp = slice_backward_vjp,
                              .float64 = f64::selected<OpKind::SliceBackward>,
                              .float64_spread = Float64Spread::Exact};
const OpInfo kConcatOp{.kind = OpKind::Concat,
                       .name = "concat",
                       .num_inputs = -1,
                       .num_outputs = 1,
                       .num_ints = 1,
                       .num_floats = 0,
                       .infer = concat_infer,
                       .reference = concat_reference,
                       .fast = concat_fast,
                       .vjp = concat_vjp,
                       .float64 = f64::selected<OpKind::Concat>,
                       .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
