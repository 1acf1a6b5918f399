// Linear, Matmul and SumRows: the dot-product ops (docs/numerics.md "Dot products") and the bias
// gradient (canonical reduction down a column).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ops/kernels/matmul.h"
#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/reduce.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

std::string dims(const Shape& s) {
  return s.str();
}

// ---- Linear: y[M,N] = x[M,K]·w[K,N] + b[N], each y[i,j] one fma chain over k starting at b[j].
// ints = {} or {trans_b}: trans_b = 1 takes w as [N,K] (PyTorch's nn.Linear weight, ONNX Gemm with
// transB = 1) and reads it transposed, y = x·wᵀ + b, in the same order per element.

/// Whether the node takes w as [N,K]. Attributes already validated (linear_infer).
bool linear_trans_b(const Attrs& attrs) {
  return !attrs.ints.empty() && attrs.ints[0] != 0;
}

std::vector<Shape> linear_infer(const Attrs& attrs, std::span<const Shape> in) {
  op_require(attrs.ints.size() <= 1, "linear",
             "expects no integer attribute or {trans_b}, got " + std::to_string(attrs.ints.size()));
  if (!attrs.ints.empty())
    op_require(attrs.ints[0] == 0 || attrs.ints[0] == 1, "linear",
               "trans_b must be 0 or 1, got " + std::to_string(attrs.ints[0]));
  const bool tb = linear_trans_b(attrs);
  const Shape &x = in[0], &w = in[1], &b = in[2];
  const char* want = tb ? "needs x[M,K], w[N,K] (trans_b), b[N]; got " : "needs x[M,K], w[K,N], b[N]; got ";
  op_require(x.rank() == 2 && w.rank() == 2 && b.rank() == 1, "linear",
             want + dims(x) + ", " + dims(w) + ", " + dims(b));
  const int64_t wk = tb ? w[1] : w[0], wn = tb ? w[0] : w[1];
  op_require(x[1] == wk && wn == b[0], "linear",
             "inner sizes disagree: x " + dims(x) + ", w " + dims(w) + (tb ? "ᵀ" : "") + ", b " + dims(b));
  return {Shape{x[0], wn}};
}

MatmulArgs linear_args(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor &x = *in[0], &w = *in[1], &b = *in[2];
  const bool tb = linear_trans_b(attrs);
  return {x.data(),     w.data(), b.data(), out[0]->data(), x.shape()[0], w.shape()[tb ? 0 : 1],
          x.shape()[1], false,    tb};
}

void linear_reference(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  matmul_reference(linear_args(attrs, in, out));
}

void linear_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                 ThreadPool& pool) {
  matmul(linear_args(attrs, in, out), pool);
}

// w[K,N]: dx = dy·wᵀ, dw = xᵀ·dy. trans_b (w[N,K]): dx = dy·w, dw = dyᵀ·x, which is [N,K] like w and
// holds the same fma chains as the first form's dw (operands swapped in each exact product).
void linear_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  const ValueRef x = a.inputs[0], w = a.inputs[1], dy = a.out_grads[0];
  const int64_t tb = linear_trans_b(a.attrs) ? 1 : 0;
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::Matmul, {{0, 1 - tb}, {}}, {dy, w});
  if (a.needs_grad[1])
    in_grads[1] =
        tb ? g.emit(OpKind::Matmul, {{1, 0}, {}}, {dy, x}) : g.emit(OpKind::Matmul, {{1, 0}, {}}, {x, dy});
  if (a.needs_grad[2]) in_grads[2] = g.emit(OpKind::SumRows, {}, {dy});
}

// ---- Matmul: c = op(a)·op(b), ints = {trans_a, trans_b}, no bias. Rank 2, or rank 3 for a batch of
// independent products a[Bt, …]·b[Bt, …] → c[Bt, M, N] (the same batch on both sides, no broadcasting;
// the transposes apply to the last two axes of each element).

std::vector<Shape> matmul_infer(const Attrs& attrs, std::span<const Shape> in) {
  const Shape &a = in[0], &b = in[1];
  for (int64_t t : attrs.ints) op_require(t == 0 || t == 1, "matmul", "transpose flags must be 0 or 1");
  op_require((a.rank() == 2 || a.rank() == 3) && b.rank() == a.rank(), "matmul",
             "needs two rank-2 or two rank-3 inputs, got " + dims(a) + ", " + dims(b));
  const int r = a.rank() - 2;  // first matrix axis
  op_require(r == 0 || a[0] == b[0], "matmul", "batch sizes disagree: " + dims(a) + ", " + dims(b));
  const bool ta = attrs.ints[0], tb = attrs.ints[1];
  const int64_t m = ta ? a[r + 1] : a[r], ka = ta ? a[r] : a[r + 1];
  const int64_t kb = tb ? b[r + 1] : b[r], n = tb ? b[r] : b[r + 1];
  op_require(ka == kb, "matmul",
             "inner sizes disagree: " + dims(a) + (ta ? "ᵀ" : "") + " · " + dims(b) + (tb ? "ᵀ" : ""));
  if (r == 0) return {Shape{m, n}};
  return {Shape{a[0], m, n}};
}

/// The 2-D product of one batch element (element 0's pointers) and the batch size (1 for rank 2).
std::pair<MatmulArgs, int64_t> matmul_args(const Attrs& attrs, std::span<const Tensor* const> in,
                                           std::span<Tensor* const> out) {
  const bool ta = attrs.ints[0], tb = attrs.ints[1];
  const Shape &a = in[0]->shape(), &c = out[0]->shape();
  const int r = a.rank() - 2;
  const int64_t batch = r == 0 ? 1 : a[0];
  return {
      {in[0]->data(), in[1]->data(), nullptr, out[0]->data(), c[r], c[r + 1], ta ? a[r] : a[r + 1], ta, tb},
      batch};
}

void matmul_op_reference(const Attrs& attrs, std::span<const Tensor* const> in,
                         std::span<Tensor* const> out) {
  const auto [args, batch] = matmul_args(attrs, in, out);
  matmul_batched_reference(args, batch);
}

void matmul_op_fast(const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                    ThreadPool& pool) {
  const auto [args, batch] = matmul_args(attrs, in, out);
  if (in[0]->shape().rank() == 2) {
    matmul(args, pool);  // the rank-2 kernel exactly as before
  } else {
    matmul_batched(args, batch, pool, active_simd_path());
  }
}

// d/da and d/db of op(a)·op(b) for each transpose combination, each again one Matmul; the same rule
// holds per batch element, so it serves rank 3 unchanged (every emitted Matmul keeps the batch axis).
void matmul_vjp(VjpBuilder& g, const VjpArgs& args, std::span<ValueRef> in_grads) {
  const int64_t ta = args.attrs.ints[0], tb = args.attrs.ints[1];
  const ValueRef a = args.inputs[0], b = args.inputs[1], dc = args.out_grads[0];
  if (args.needs_grad[0]) {
    in_grads[0] = ta ? g.emit(OpKind::Matmul, {{tb, 1}, {}}, {b, dc})       // aᵀ: da = op(b)·dcᵀ
                     : g.emit(OpKind::Matmul, {{0, 1 - tb}, {}}, {dc, b});  // da = dc·op(b)ᵀ
  }
  if (args.needs_grad[1]) {
    in_grads[1] = tb ? g.emit(OpKind::Matmul, {{1, ta}, {}}, {dc, a})       // bᵀ: db = dcᵀ·op(a)
                     : g.emit(OpKind::Matmul, {{1 - ta, 0}, {}}, {a, dc});  // db = op(a)ᵀ·dc
  }
}

// ---- SumRows: y[j] = canonical_sum_i x[i,j] (the bias gradient).

std::vector<Shape> sum_rows_infer(const Attrs&, std::span<const Shape> in) {
  op_require(in[0].rank() == 2, "sum_rows", "needs a rank-2 input, got " + dims(in[0]));
  return {Shape{in[0][1]}};
}

void sum_rows_columns(const Tensor& x, Tensor& y, int64_t j0, int64_t j1) {
  const int64_t m = x.shape()[0], n = x.shape()[1];
  for (int64_t j = j0; j < j1; ++j) y[j] = canonical_sum(x.data() + j, m, n);
}

void sum_rows_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  sum_rows_columns(*in[0], *out[0], 0, in[0]->shape()[1]);
}

// The fast kernel keeps the reference's order per column but walks x row by row (the reference walks
// each column down with stride n, one cache line per element): for a block of up to kSumCols columns,
// acc[k][j] is canonical lane k of column j, row i is added to lane i mod 32 in increasing i, then the
// fixed tree w = 16, 8, 4, 2, 1 folds the lanes of every column. Columns are independent outputs, so
// SIMD lanes and threads split columns and never touch a column's order. The 32 × kSumCols lanes
// (16 KiB) stay in L1.
constexpr int64_t kSumCols = 128;
/// Threads split columns in groups of this many (a multiple of every vector width, so a range
/// boundary never leaves a partial vector inside it).
constexpr int64_t kSumGroup = 16;

/// The scalar path: plain per-column adds the compiler may vectorize (lane-wise, so still exact).
void sum_rows_block_scalar(const float* x, int64_t m, int64_t n, int64_t j0, int64_t nc, float* acc,
                           float* y) {
  std::fill(acc, acc + kReduceLanes * kSumCols, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    float* a = acc + (i % kReduceLanes) * kSumCols;
    const float* xr = x + i * n + j0;
    for (int64_t j = 0; j < nc; ++j) a[j] = a[j] + xr[j];
  }
  for (int w = kReduceLanes / 2; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k)
      for (int64_t j = 0; j < nc; ++j)
        acc[k * kSumCols + j] = acc[k * kSumCols + j] + acc[(k + w) * kSumCols + j];
  std::copy(acc, acc + nc, y + j0);
}

// The SIMD form of the same block: columns in lanes; a partial last vector loads +0 past the block's
// end (loadn), which only feeds padding lanes of acc that are never stored to y.
#define TRIBUNAL_SUM_ROWS_KERNELS(NS, TARGET, V)                                                         \
  namespace NS {                                                                                         \
  TARGET void sum_rows_block(const float* x, int64_t m, int64_t n, int64_t j0, int64_t nc, float* acc,   \
                             float* y) {                                                                 \
    for (int64_t t = 0; t < kReduceLanes * kSumCols; t += V::W) V::store(acc + t, V::zero());            \
    const int64_t full = nc / V::W * V::W;                                                               \
    const int tail = static_cast<int>(nc - full);                                                        \
    for (int64_t i = 0; i < m; ++i) {                                                                    \
      float* a = acc + (i % kReduceLanes) * kSumCols;                                                    \
      const float* xr = x + i * n + j0;                                                                  \
      for (int64_t j = 0; j < full; j += V::W) V::store(a + j, V::add(V::load(a + j), V::load(xr + j))); \
      if (tail) V::store(a + full, V::add(V::load(a + full), V::loadn(xr + full, tail)));                \
    }                                                                                                    \
    for (int w = kReduceLanes / 2; w >= 1; w /= 2)                                                       \
      for (int k = 0; k < w; ++k)                                                                        \
        for (int64_t j = 0; j < nc; j += V::W)                                                           \
          V::store(acc + k * kSumCols + j,                                                               \
                   V::add(V::load(acc + k * kSumCols + j), V::load(acc + (k + w) * kSumCols + j)));      \
    for (int64_t j = 0; j < full; j += V::W) V::store(y + j0 + j, V::load(acc + j));                     \
    if (tail) V::storen(y + j0 + full, V::load(acc + full), tail);                                       \
  }                                                                                                      \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_SUM_ROWS_KERNELS)
#undef TRIBUNAL_SUM_ROWS_KERNELS

void sum_rows_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                   ThreadPool& pool) {
  const int64_t m = in[0]->shape()[0], n = in[0]->shape()[1];
  const SimdPath path = active_simd_path();
  const float* x = in[0]->data();
  float* y = out[0]->data();
  const int64_t groups = (n + kSumGroup - 1) / kSumGroup;
  // A range should carry about 16K adds to be worth a thread.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, m * kSumGroup));
  pool.parallel_for(
      groups,
      [&](int64_t g0, int64_t g1) {
        std::vector<float> acc(static_cast<size_t>(kReduceLanes * kSumCols));
        const int64_t end = std::min(n, g1 * kSumGroup);
        for (int64_t j0 = g0 * kSumGroup; j0 < end; j0 += kSumCols) {
          const int64_t nc = std::min(kSumCols, end - j0);
          switch (path) {
            TRIBUNAL_SIMD_CASES(isa::sum_rows_block(x, m, n, j0, nc, acc.data(), y))
            case SimdPath::Scalar:
              sum_rows_block_scalar(x, m, n, j0, nc, acc.data(), y);
              break;
          }
        }
      },
      grain);
}

// The dispute cost's fma chain per output element (OpInfo::fma_chain): K of w[K,N] (w[N,K] with
// trans_b); op(a)'s columns.
uint64_t linear_fma_chain(const Attrs& attrs, std::span<const Shape> in) {
  return static_cast<uint64_t>(in[1][linear_trans_b(attrs) ? 1 : 0]);
}
uint64_t matmul_fma_chain(const Attrs& attrs, std::span<const Shape> in) {
  const Shape& a = in[0];
  return static_cast<uint64_t>(attrs.ints[0] != 0 ? a[a.rank() - 2] : a[a.rank() - 1]);
}

}  // namespace

const OpInfo kLinearOp{.kind = OpKind::Linear,
                       .name = "linear",
                       .num_inputs = 3,
                       .num_outputs = 1,
                       .num_ints = -1,  // {} or {trans_b}: linear_infer checks
                       .num_floats = 0,
                       .infer = linear_infer,
                       .reference = linear_reference,
                       .fast = linear_fast,
                       .vjp = linear_vjp,
                       .float64 = f64::linear,
                       .float64_spread = Float64Spread::Sum,
                       .fma_chain = linear_fma_chain,
                       .quanta = f64::linear_quanta};
const OpInfo kMatmulOp{.kind = OpKind::Matmul,
                       .name = "matmul",
                       .num_inputs = 2,
                       .num_outputs = 1,
                       .num_ints = 2,
                       .num_floats = 0,
                       .infer = matmul_infer,
                       .reference = matmul_op_reference,
                       .fast = matmul_op_fast,
                       .vjp = matmul_vjp,
                       .float64 = f64::matmul,
                       .float64_spread = Float64Spread::Sum,
                       .fma_chain = matmul_fma_chain,
                       .quanta = f64::matmul_quanta};
const OpInfo kSumRowsOp{.kind = OpKind::SumRows,
                        .name = "sum_rows",
                        .num_inputs = 1,
                        .num_outputs = 1,
                        .num_ints = 0,
                        .num_floats = 0,
                        .infer = sum_rows_infer,
                        .reference = sum_rows_reference,
                        .fast = sum_rows_fast,
                        .vjp = nullptr,
                        .float64 = f64::sum_rows,
                        .float64_spread = Float64Spread::Sum};

}  // namespace tribunal
