// Where, WhereBackward and GatherRows: the selections of exported transformer graphs (ONNX Where for
// torch's masked_fill, ONNX Gather on axis 0 for embeddings; docs/onnx.md). Every output element is a
// bit copy of one input element or +0, decided per element by the same code whichever thread owns it,
// so the fast kernels (a static split over output elements or rows) are bitwise equal to the references.
// Semantics and the VJPs' order of accumulation: docs/numerics.md "Selection: where, gather_rows".
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/ids.h"
#include "ops/kernels/op_table.h"

namespace tribunal {
namespace {

constexpr int64_t kGrain = int64_t{1} << 14;

/// The NumPy broadcast of `shapes` (each rank ≤ 4): aligned at their last dims, in each dim the sizes
/// equal or 1. Throws OpError naming every shape and the first dim that disagrees.
Shape broadcast_all(const char* op, std::initializer_list<const Shape*> shapes, const char* names) {
  int rank = 0;
  for (const Shape* s : shapes) rank = std::max(rank, s->rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
  for (int d = 0; d < rank; ++d)
    for (const Shape* s : shapes) {
      const int i = s->rank() - rank + d;
      const int64_t v = i >= 0 ? (*s)[i] : 1;
      int64_t& have = dims[static_cast<size_t>(d)];
      if (v == 1 || v == have) continue;
      if (have != 1) {
        std::string all;
        for (const Shape* t : shapes) all += (all.empty() ? "" : ", ") + t->str();
        throw OpError(std::string(op) + ": shapes " + all + " (" + names + ") do not broadcast (dim " +
                      std::to_string(d) + " of the aligned shapes: " + std::to_string(have) + " vs " +
                      std::to_string(v) + ")");
      }
      have = v;
    }
  return Shape(std::span<const int64_t>(dims));
}

// ---- Where -----------------------------------------------------------------------------------------

std::vector<Shape> where_infer(const Attrs&, std::span<const Shape> in) {
  return {broadcast_all("where", {&in[0], &in[1], &in[2]}, "cond, a, b")};
}

TernaryGeom where_geom_of(std::span<const Tensor* const> in, const Shape& y) {
  const Shape &c = in[0]->shape(), &a = in[1]->shape(), &b = in[2]->shape();
  return ternary_geom(c.dims().data(), c.rank(), a.dims().data(), a.rank(), b.dims().data(), b.rank(),
                      y.dims().data(), y.rank());
}

void where_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const TernaryGeom g = where_geom_of(in, out[0]->shape());
  const float *c = in[0]->data(), *a = in[1]->data(), *b = in[2]->data();
  float* y = out[0]->data();
  for (int64_t i = 0; i < out[0]->numel(); ++i)
    y[i] = where_true(c[broadcast_offset(g.dims, g.sc, i)]) ? a[broadcast_offset(g.dims, g.sa, i)]
                                                            : b[broadcast_offset(g.dims, g.sb, i)];
}

/// Output rows (of the padded last dim) [r0, r1): the row's three source offsets computed once, then
/// the innermost stride (0 or 1) stepped, so the inner loop vectorizes to a blend — the same selection.
void where_rows(const TernaryGeom& g, const float* c, const float* a, const float* b, float* y, int64_t r0,
                int64_t r1) {
  const int64_t len = g.dims[kBroadcastRank - 1];
  const int64_t tc = g.sc[kBroadcastRank - 1], ta = g.sa[kBroadcastRank - 1], tb = g.sb[kBroadcastRank - 1];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t i = r * len;
    const float* __restrict cr = c + broadcast_offset(g.dims, g.sc, i);
    const float* __restrict ar = a + broadcast_offset(g.dims, g.sa, i);
    const float* __restrict br = b + broadcast_offset(g.dims, g.sb, i);
    float* __restrict yr = y + i;
    for (int64_t j = 0; j < len; ++j) yr[j] = where_true(cr[j * tc]) ? ar[j * ta] : br[j * tb];
  }
}

void where_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                ThreadPool& pool) {
  const int64_t n = out[0]->numel();
  if (n == 0) return;
  const TernaryGeom g = where_geom_of(in, out[0]->shape());
  const int64_t len = g.dims[kBroadcastRank - 1], rows = n / len;
  pool.parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        where_rows(g, in[0]->data(), in[1]->data(), in[2]->data(), out[0]->data(), r0, r1);
      },
      std::max<int64_t>(1, kGrain / len));
}

// da = reduce_to(where_backward(cond, g; 1), a), db = reduce_to(where_backward(cond, g; 0), b): each
// gradient element is g's or +0, then summed over the dims its input was broadcast along. cond: none.
void where_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const ValueRef cond = a.inputs[0], g = a.out_grads[0];
  for (int i = 1; i <= 2; ++i)
    if (a.needs_grad[static_cast<size_t>(i)]) {
      const int64_t branch = i == 1 ? 1 : 0;
      const ValueRef kept = b.emit(OpKind::WhereBackward, {{branch}, {}}, {cond, g});
      in_grads[static_cast<size_t>(i)] = reduce_to(b, kept, a.inputs[static_cast<size_t>(i)], 1.0f);
    }
}

// ---- WhereBackward ---------------------------------------------------------------------------------

std::vector<Shape> where_backward_infer(const Attrs& attrs, std::span<const Shape> in) {
  const char* op = "where_backward";
  op_require(attrs.ints.size() == 1, op,
             "expects ints = {branch}, got " + std::to_string(attrs.ints.size()) + " ints");
  op_require(attrs.ints[0] == 0 || attrs.ints[0] == 1, op,
             "branch must be 1 (keep dy where cond is true) or 0 (where false), got " +
                 std::to_string(attrs.ints[0]));
  const Shape &cond = in[0], &dy = in[1];
  const Shape y = broadcast_all(op, {&cond, &dy}, "cond, dy");
  op_require(y == dy, op, "cond " + cond.str() + " does not broadcast to dy's shape " + dy.str());
  return {dy};
}

BinaryGeom where_backward_geom_of(std::span<const Tensor* const> in) {
  const Shape &c = in[0]->shape(), &dy = in[1]->shape();
  return binary_geom(c.dims().data(), c.rank(), dy.dims().data(), dy.rank(), dy.dims().data(), dy.rank());
}

/// dx[i] for i in [i0, i1): dy[i] where cond's truth equals the branch, else +0.
void where_backward_range(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                          int64_t i0, int64_t i1) {
  const BinaryGeom g = where_backward_geom_of(in);
  const float *c = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  const bool branch = attrs.ints[0] == 1;
  for (int64_t i = i0; i < i1; ++i)
    dx[i] = where_true(c[broadcast_offset(g.dims, g.sa, i)]) == branch ? dy[i] : 0.0f;
}

void where_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                              std::span<Tensor* const> out) {
  where_backward_range(a, in, out, 0, out[0]->numel());
}

void where_backward_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                         ThreadPool& pool) {
  pool.parallel_for(
      out[0]->numel(), [&](int64_t i0, int64_t i1) { where_backward_range(a, in, out, i0, i1); }, kGrain);
}

// ---- GatherRows ------------------------------------------------------------------------------------

std::vector<Shape> gather_rows_infer(const Attrs&, std::span<const Shape> in) {
  const char* op = "gather_rows";
  const Shape &table = in[0], &ids = in[1];
  op_require(table.rank() >= 1, op, "the table must have rank 1 to 4, got " + table.str());
  op_require(ids.rank() <= 3, op, "ids must have rank 0 to 3, got " + ids.str());
  op_require(ids.rank() + table.rank() - 1 <= kMaxRank, op,
             "the output ids.shape ++ table.shape[1:] of ids " + ids.str() + " and table " + table.str() +
                 " would have rank " + std::to_string(ids.rank() + table.rank() - 1) + ", more than " +
                 std::to_string(kMaxRank));
  std::vector<int64_t> dims(ids.dims().begin(), ids.dims().end());
  dims.insert(dims.end(), table.dims().begin() + 1, table.dims().end());
  return {Shape(std::span<const int64_t>(dims))};
}

/// Elements of one table row: the product of the table's dims after the first.
int64_t row_elements(const Shape& table) {
  int64_t r = 1;
  for (int d = 1; d < table.rank(); ++d) r *= table[d];
  return r;
}

void gather_rows_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor &table = *in[0], &ids = *in[1];
  const int64_t rows = table.shape()[0], row = row_elements(table.shape());
  for (int64_t p = 0; p < ids.numel(); ++p) {
    const int64_t id = token_id(ids.data(), p, rows, "gather_rows");
    for (int64_t j = 0; j < row; ++j) (*out[0])[p * row + j] = table[id * row + j];
  }
}

void gather_rows_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                      ThreadPool& pool) {
  const Tensor &table = *in[0], &ids = *in[1];
  const int64_t rows = table.shape()[0], row = row_elements(table.shape());
  const size_t bytes = static_cast<size_t>(row) * sizeof(float);
  // A bad id throws from whichever thread meets it; ThreadPool rethrows it here.
  pool.parallel_for(
      ids.numel(),
      [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t id = token_id(ids.data(), p, rows, "gather_rows");
          if (bytes != 0) std::memcpy(out[0]->data() + p * row, table.data() + id * row, bytes);
        }
      },
      std::max<int64_t>(1, kGrain / std::max<int64_t>(1, row)));
}

// dtable = reshape(embedding_backward(reshape(ids → [1, n]), reshape(dy → [n, D]); {N}) → table's
// shape), D the row's elements: rows of dy added into +0 one by one in increasing position. ids: none.
void gather_rows_vjp(VjpBuilder& b, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (!a.needs_grad[0]) return;
  const ValueRef ids = a.inputs[1], dy = a.out_grads[0];
  const Shape table = b.shape(a.inputs[0]), id_shape = b.shape(ids);
  const int64_t rows = table[0], d = row_elements(table), n = id_shape.numel();
  auto reshape = [&](ValueRef v, const Shape& to) {
    if (b.shape(v) == to) return v;
    return b.emit(OpKind::Reshape, {{to.dims().begin(), to.dims().end()}, {}}, {v});
  };
  const ValueRef dt =
      b.emit(OpKind::EmbeddingBackward, {{rows}, {}}, {reshape(ids, Shape{1, n}), reshape(dy, Shape{n, d})});
  in_grads[0] = reshape(dt, table);
}

}  // namespace

const OpInfo kWhereOp{.kind = OpKind::Where,
                      .name = "where",
                      .num_inputs = 3,
                      .num_outputs = 1,
                      .num_ints = 0,
                      .num_floats = 0,
                      .infer = where_infer,
                      .reference = where_reference,
                      .fast = where_fast,
                      .vjp = where_vjp,
                      .float64 = f64::selected<OpKind::Where>,
                      .float64_spread = Float64Spread::Exact};
const OpInfo kWhereBackwardOp{.kind = OpKind::WhereBackward,
                              .name = "where_backward",
                              .num_inputs = 2,
                              .num_outputs = 1,
                              .num_ints = 1,
                              .num_floats = 0,
                              .infer = where_backward_infer,
                              .reference = where_backward_reference,
                              .fast = where_backward_fast,
                              .vjp = nullptr,
                              .float64 = f64::selected<OpKind::WhereBackward>,
                              .float64_spread = Float64Spread::Exact};
const OpInfo kGatherRowsOp{.kind = OpKind::GatherRows,
                           .name = "gather_rows",
                           .num_inputs = 2,
                           .num_outputs = 1,
                           .num_ints = 0,
                           .num_floats = 0,
                           .infer = gather_rows_infer,
                           .reference = gather_rows_reference,
                           .fast = gather_rows_fast,
                           .vjp = gather_rows_vjp,
                           .float64 = f64::selected<OpKind::GatherRows>,
                           .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
