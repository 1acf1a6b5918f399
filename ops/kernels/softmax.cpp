// Softmax over the last axis with an optional causal mask (docs/numerics.md "Softmax"), the attention
// probabilities of a transformer. x[…, R, N]; ints = {causal ∈ {0, 1}}; floats = {scale}. Each row has
// an index r ∈ [0, R) within its R×N block; its valid columns are n < nv with nv = causal ? min(r + 1, N)
// : N (so row r sees columns 0..r, all of them once r ≥ N − 1). Per row:
//   m    = scale·x[0];  for n = 1 .. nv−1:  z = scale·x[n];  m = z > m ? z : m
//   e[n] = exp32(scale·x[n] − m)                      for n < nv
//   s    = canonical_sum(e[0 .. nv))                  (n order, ops/reduce.h)
//   y[n] = e[n] / s  for n < nv;   y[n] = +0  for n ≥ nv
// Backward (y = the forward output, dy; the same attrs):
//   d     = canonical_sum(y[n]·dy[n] for n < nv)
//   dx[n] = scale·(y[n]·(dy[n] − d))  for n < nv;   dx[n] = +0  for n ≥ nv
//
// Special values: a NaN among a row's valid entries makes the whole row NaN (its e is NaN, hence s);
// +inf among them too (inf − inf), and a row of −inf (−inf − −inf), as in PyTorch. The maximum is exact,
// so the fast kernels may take it in any order: only its NaN and ±0 behaviour could differ, and neither
// changes a non-NaN result (exp32(z − (+0)) and exp32(z − (−0)) are equal for every z).
//
// Threads split rows (independent outputs); SIMD lanes run exp32 per column and keep the canonical
// sum's 32 lanes in registers (vec_math.h), so every path and thread count gives the same bits.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

/// Elements per thread at least (rows are grouped so one range has about this many).
constexpr int64_t kGrainElements = 4096;

// ---- Scalar: the contract, literally ------------------------------------------------------------

/// One row of n columns, nv of them valid (1 ≤ nv ≤ n).
void softmax_row_scalar(const float* x, float* y, int64_t n, int64_t nv, float scale) {
  float m = scale * x[0];
  for (int64_t j = 1; j < nv; ++j) {
    const float z = scale * x[j];
    m = z > m ? z : m;
  }
  for (int64_t j = 0; j < nv; ++j) y[j] = exp32(scale * x[j] - m);
  const float s = canonical_sum(y, nv);
  for (int64_t j = 0; j < nv; ++j) y[j] = y[j] / s;
  for (int64_t j = nv; j < n; ++j) y[j] = 0.0f;
}

/// One row of the backward; `tmp` holds at least nv floats.
void softmax_grad_row_scalar(const float* y, const float* dy, float* dx, int64_t n, int64_t nv, float scale,
                             float* tmp) {
  for (int64_t j = 0; j < nv; ++j) tmp[j] = y[j] * dy[j];
  const float d = canonical_sum(tmp, nv);
  for (int64_t j = 0; j < nv; ++j) dx[j] = scale * (y[j] * (dy[j] - d));
  for (int64_t j = nv; j < n; ++j) dx[j] = 0.0f;
}

// ---- SIMD: the same sequences, columns in lanes --------------------------------------------------

#define TRIBUNAL_SOFTMAX_KERNELS(NS, TARGET, V)                                                        \
  namespace NS {                                                                                       \
  TARGET void softmax_row(const float* x, float* y, int64_t n, int64_t nv, float scale) {              \
    const V::vf vs = V::set1(scale);                                                                   \
    V::vf mv = V::set1(scale * x[0]);                                                                  \
    for (int64_t j = 0; j < nv; j += V::W) {                                                           \
      const int c = static_cast<int>(std::min<int64_t>(V::W, nv - j));                                 \
      mv = c == V::W ? V::max(V::mul(vs, V::load(x + j)), mv)                                          \
                     : V::max_n(V::mul(vs, V::loadn(x + j, c)), mv, c);                                \
    }                                                                                                  \
    const V::vf vm = V::set1(V::hmax(mv));                                                             \
    V::Acc32 acc = V::acc_zero();                                                                      \
    for (int64_t j = 0; j < nv; j += kReduceLanes) {                                                   \
      for (int p = 0; p < V::Acc32::kParts; ++p) {                                                     \
        const int64_t o = j + p * V::W;                                                                \
        if (o >= nv) break;                                                                            \
        const int c = static_cast<int>(std::min<int64_t>(V::W, nv - o));                               \
        const V::vf xv = c == V::W ? V::load(x + o) : V::loadn(x + o, c);                              \
        const V::vf e = V::exp(V::sub(V::mul(vs, xv), vm));                                            \
        if (c == V::W)                                                                                 \
          V::store(y + o, e);                                                                          \
        else                                                                                           \
          V::storen(y + o, e, c);                                                                      \
        V::acc_add(acc, p, e, c);                                                                      \
      }                                                                                                \
    }                                                                                                  \
    const V::vf vsum = V::set1(V::acc_fold(acc));                                                      \
    for (int64_t j = 0; j < nv; j += V::W) {                                                           \
      const int c = static_cast<int>(std::min<int64_t>(V::W, nv - j));                                 \
      if (c == V::W)                                                                                   \
        V::store(y + j, V::div(V::load(y + j), vsum));                                                 \
      else                                                                                             \
        V::storen(y + j, V::div(V::loadn(y + j, c), vsum), c);                                         \
    }                                                                                                  \
    if (nv < n) std::memset(y + nv, 0, static_cast<size_t>(n - nv) * sizeof(float));                   \
  }                                                                                                    \
  TARGET void softmax_grad_row(const float* y, const float* dy, float* dx, int64_t n, int64_t nv,      \
                               float scale) {                                                          \
    V::Acc32 acc = V::acc_zero();                                                                      \
    for (int64_t j = 0; j < nv; j += kReduceLanes) {                                                   \
      for (int p = 0; p < V::Acc32::kParts; ++p) {                                                     \
        const int64_t o = j + p * V::W;                                                                \
        if (o >= nv) break;                                                                            \
        const int c = static_cast<int>(std::min<int64_t>(V::W, nv - o));                               \
        const V::vf prod = c == V::W ? V::mul(V::load(y + o), V::load(dy + o))                         \
                                     : V::mul(V::loadn(y + o, c), V::loadn(dy + o, c));                \
        V::acc_add(acc, p, prod, c);                                                                   \
      }                                                                                                \
    }                                                                                                  \
    const V::vf vd = V::set1(V::acc_fold(acc)), vs = V::set1(scale);                                   \
    for (int64_t j = 0; j < nv; j += V::W) {                                                           \
      const int c = static_cast<int>(std::min<int64_t>(V::W, nv - j));                                 \
      if (c == V::W)                                                                                   \
        V::store(dx + j, V::mul(vs, V::mul(V::load(y + j), V::sub(V::load(dy + j), vd))));             \
      else                                                                                             \
        V::storen(dx + j, V::mul(vs, V::mul(V::loadn(y + j, c), V::sub(V::loadn(dy + j, c), vd))), c); \
    }                                                                                                  \
    if (nv < n) std::memset(dx + nv, 0, static_cast<size_t>(n - nv) * sizeof(float));                  \
  }                                                                                                    \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_SOFTMAX_KERNELS)
#undef TRIBUNAL_SOFTMAX_KERNELS

// ---- Shapes and dispatch -------------------------------------------------------------------------

/// Rows of the last axis and the geometry that gives each row its valid count.
struct Rows {
  int64_t count, n, r_per_block;
  bool causal;
  float scale;
  int64_t valid(int64_t row) const { return causal ? std::min(row % r_per_block + 1, n) : n; }
};

Rows rows_of(const Attrs& a, const Shape& s) {
  const int64_t n = s[s.rank() - 1], r = s[s.rank() - 2];
  return {n ? s.numel() / n : 0, n, r, a.ints[0] != 0, a.floats[0]};
}

void check_attrs(const char* op, const Attrs& a, const Shape& s) {
  op_require(s.rank() >= 2, op, "input must have rank ≥ 2 ([…, R, N]), got " + s.str());
  op_require(s[s.rank() - 1] >= 1, op, "the last axis must not be empty, got " + s.str());
  op_require(a.ints[0] == 0 || a.ints[0] == 1, op, "causal must be 0 or 1, got " + std::to_string(a.ints[0]));
  op_require(std::isfinite(a.floats[0]), op, "scale must be finite, got " + std::to_string(a.floats[0]));
}

std::vector<Shape> softmax_infer(const Attrs& a, std::span<const Shape> in) {
  check_attrs("softmax", a, in[0]);
  return {in[0]};
}

std::vector<Shape> softmax_backward_infer(const Attrs& a, std::span<const Shape> in) {
  check_attrs("softmax_backward", a, in[0]);
  op_require(in[0] == in[1], "softmax_backward",
             "y and dy must have equal shapes, got " + in[0].str() + " and " + in[1].str());
  return {in[0]};
}

int64_t row_grain(const Rows& r) {
  return std::max<int64_t>(1, kGrainElements / r.n);
}

void softmax_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Rows r = rows_of(a, in[0]->shape());
  const float* x = in[0]->data();
  float* y = out[0]->data();
  for (int64_t i = 0; i < r.count; ++i)
    softmax_row_scalar(x + i * r.n, y + i * r.n, r.n, r.valid(i), r.scale);
}

void softmax_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                  ThreadPool& pool) {
  const Rows r = rows_of(a, in[0]->shape());
  const SimdPath path = active_simd_path();
  const float* x = in[0]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      r.count,
      [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1; ++i) {
          const float* xr = x + i * r.n;
          float* yr = y + i * r.n;
          switch (path) {
            TRIBUNAL_SIMD_CASES(isa::softmax_row(xr, yr, r.n, r.valid(i), r.scale))
            case SimdPath::Scalar:
              softmax_row_scalar(xr, yr, r.n, r.valid(i), r.scale);
              break;
          }
        }
      },
      row_grain(r));
}

void softmax_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                                std::span<Tensor* const> out) {
  const Rows r = rows_of(a, in[0]->shape());
  const float *y = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  std::vector<float> tmp(static_cast<size_t>(r.n));
  for (int64_t i = 0; i < r.count; ++i)
    softmax_grad_row_scalar(y + i * r.n, dy + i * r.n, dx + i * r.n, r.n, r.valid(i), r.scale, tmp.data());
}

void softmax_backward_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                           ThreadPool& pool) {
  const Rows r = rows_of(a, in[0]->shape());
  const SimdPath path = active_simd_path();
  const float *y = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  pool.parallel_for(
      r.count,
      [&](int64_t i0, int64_t i1) {
        std::vector<float> tmp(path == SimdPath::Scalar ? static_cast<size_t>(r.n) : 0);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t o = i * r.n;
          switch (path) {
            TRIBUNAL_SIMD_CASES(isa::softmax_grad_row(y + o, dy + o, dx + o, r.n, r.valid(i), r.scale))
            case SimdPath::Scalar:
              softmax_grad_row_scalar(y + o, dy + o, dx + o, r.n, r.valid(i), r.scale, tmp.data());
              break;
          }
        }
      },
      row_grain(r));
}

void softmax_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::SoftmaxBackward, a.attrs, {a.outputs[0], a.out_grads[0]});
}

}  // namespace

/// Softmax: x[…, R, N] (rank ≥ 2, N ≥ 1); ints {causal ∈ {0,1}}; floats {scale, finite} → y, same shape.
/// OpError on a bad rank, an empty last axis or bad attributes.
const OpInfo kSoftmaxOp{.kind = OpKind::Softmax,
                        .name = "softmax",
                        .num_inputs = 1,
                        .num_outputs = 1,
                        .num_ints = 1,
                        .num_floats = 1,
                        .infer = softmax_infer,
                        .reference = softmax_reference,
                        .fast = softmax_fast,
                        .vjp = softmax_vjp,
                        .float64 = f64::softmax,
                        .float64_spread = Float64Spread::Libm};
/// SoftmaxBackward: y (Softmax's output), dy (same shape); the forward's attrs → dx.
const OpInfo kSoftmaxBackwardOp{.kind = OpKind::SoftmaxBackward,
                                .name = "softmax_backward",
                                .num_inputs = 2,
                                .num_outputs = 1,
                                .num_ints = 1,
                                .num_floats = 1,
                                .infer = softmax_backward_infer,
                                .reference = softmax_backward_reference,
                                .fast = softmax_backward_fast,
                                .vjp = nullptr,
                                .float64 = f64::softmax_backward,
                                .float64_spread = Float64Spread::Sum};

}  // namespace tribunal
