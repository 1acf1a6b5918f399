// Softmax cross-entropy with integer labels, mean over the batch (docs/numerics.md "Softmax
// cross-entropy"). Per row b of logits z[b, 0..C):
//   m    = running max over j in order (z[j] > m ? z[j] : m)
//   e[j] = exp32(z[j] − m);  s = canonical_sum(e)
//   nll  = log32(s) − (z[y] − m)
//   loss = canonical_sum(nll over rows) / B
// Backward: dz[j] = (e[j] / s − [j == y]) · (dloss / B).
//
// The fast kernels split rows over threads (each row's nll or dz row is independent) and, on the SIMD
// paths, run each row's max, exp32 and canonical sum in vector lanes (vec_math.h), so every path and
// thread count gives the reference's bits; the batch mean stays the reference's canonical_sum over the
// per-row nll, taken on the calling thread after all rows are done.
#include <algorithm>
#include <vector>

#include "ops/ids.h"
#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

std::vector<Shape> sce_infer_common(const char* op, std::span<const Shape> in) {
  const Shape &z = in[0], &y = in[1];
  op_require(z.rank() == 2 && z[0] >= 1 && z[1] >= 1, op, "logits must be [B ≥ 1, C ≥ 1], got " + z.str());
  op_require(y.rank() == 1 && y[0] == z[0], op,
             "labels must be [" + std::to_string(z[0]) + "], got " + y.str());
  return {z};
}

std::vector<Shape> sce_infer(const Attrs&, std::span<const Shape> in) {
  sce_infer_common("softmax_cross_entropy", in);
  return {Shape{}};
}

std::vector<Shape> sce_backward_infer(const Attrs&, std::span<const Shape> in) {
  op_require(in[2].rank() == 0, "softmax_cross_entropy_backward",
             "dloss must be a scalar, got " + in[2].str());
  return sce_infer_common("softmax_cross_entropy_backward", in);
}

// Validates the label of row b (a class id stored as float) and returns it (ops/ids.h).
int64_t label_of(const Tensor& labels, int64_t b, int64_t classes, const char* op) {
  return class_id(labels, b, classes, op);
}

// e[0..C) = exp(z − max); returns (max, canonical sum of e).
std::pair<float, float> softmax_row(const float* z, int64_t classes, float* e) {
  float m = z[0];
  for (int64_t j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
  for (int64_t j = 0; j < classes; ++j) e[j] = exp32(z[j] - m);
  return {m, canonical_sum(e, classes)};
}

void nll_rows(const Tensor& z, const Tensor& labels, float* nll, int64_t b0, int64_t b1) {
  const int64_t classes = z.shape()[1];
  std::vector<float> e(static_cast<size_t>(classes));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t y = label_of(labels, b, classes, "softmax_cross_entropy");
    const float* row = z.data() + b * classes;
    auto [m, s] = softmax_row(row, classes, e.data());
    nll[b] = log32(s) - (row[y] - m);
  }
}

void sce_run(std::span<const Tensor* const> in, std::span<Tensor* const> out, ThreadPool* pool) {
  const int64_t batch = in[0]->shape()[0];
  std::vector<float> nll(static_cast<size_t>(batch));
  auto rows = [&](int64_t b0, int64_t b1) { nll_rows(*in[0], *in[1], nll.data(), b0, b1); };
  if (pool)
    pool->parallel_for(batch, rows, 16);
  else
    rows(0, batch);
  (*out[0])[0] = canonical_sum(nll.data(), batch) / static_cast<float>(batch);
}

void dlogit_rows(std::span<const Tensor* const> in, Tensor& dz, int64_t b0, int64_t b1) {
  const Tensor &z = *in[0], &labels = *in[1];
  const int64_t batch = z.shape()[0], classes = z.shape()[1];
  const float scale = (*in[2])[0] / static_cast<float>(batch);
  std::vector<float> e(static_cast<size_t>(classes));
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t y = label_of(labels, b, classes, "softmax_cross_entropy_backward");
    auto [m, s] = softmax_row(z.data() + b * classes, classes, e.data());
    (void)m;
    for (int64_t j = 0; j < classes; ++j) dz[b * classes + j] = (e[j] / s - (j == y ? 1.0f : 0.0f)) * scale;
  }
}

// ---- Fast kernels --------------------------------------------------------------------------------

/// Rows per thread range at least (about 4096 elements, as the other row kernels).
int64_t row_grain(int64_t classes) {
  return std::max<int64_t>(1, 4096 / classes);
}

/// label_of's check without building its message: the message (std::to_string and concatenations)
/// cost more than the row's arithmetic, so the fast kernels build it only when the label is bad, by
/// calling label_of itself, which then throws the reference's OpError.
int64_t label_fast(const Tensor& labels, int64_t b, int64_t classes, const char* op) {
  const float l = labels[b];
  if (!(l >= 0.0f && l < static_cast<float>(classes) && static_cast<float>(static_cast<int64_t>(l)) == l))
    return label_of(labels, b, classes, op);
  return static_cast<int64_t>(l);
}

/// The reference's sequential maximum (z[j] > m ? z[j] : m from m = z[0]).
float row_max_scalar(const float* z, int64_t classes) {
  float m = z[0];
  for (int64_t j = 1; j < classes; ++j) m = z[j] > m ? z[j] : m;
  return m;
}

// The SIMD forms. The maximum is taken lane-wise (vmaxps(x, m) is the scalar `x > m ? x : m`, so a NaN
// x is skipped exactly as the sequential loop skips it) and then across lanes; the maximum of non-NaN
// floats is exact in any order and unique in bits unless it is ±0, so only a zero result (whose sign
// depends on which zero came first) or a NaN one (z[0] NaN) is redone with the sequential loop.
// exp32 and the canonical sum are vec_math.h's, lane i of the 32 holding elements i, i+32, ….
#define TRIBUNAL_SCE_KERNELS(NS, TARGET, V)                                                              \
  namespace NS {                                                                                         \
  TARGET float row_max(const float* z, int64_t classes) {                                                \
    V::vf mv = V::set1(z[0]);                                                                            \
    for (int64_t j = 0; j < classes; j += V::W) {                                                        \
      const int c = static_cast<int>(std::min<int64_t>(V::W, classes - j));                              \
      mv = c == V::W ? V::max(V::load(z + j), mv) : V::max_n(V::loadn(z + j, c), mv, c);                 \
    }                                                                                                    \
    const float m = V::hmax(mv);                                                                         \
    return m != 0.0f && m == m ? m : row_max_scalar(z, classes);                                         \
  }                                                                                                      \
  /* Canonical sum of e[j] = exp32(z[j] − m); stores e to `e` unless it is null. */                    \
  TARGET float exp_sum(const float* z, float m, int64_t classes, float* e) {                             \
    const V::vf vm = V::set1(m);                                                                         \
    V::Acc32 acc = V::acc_zero();                                                                        \
    for (int64_t j = 0; j < classes; j += kReduceLanes) {                                                \
      for (int p = 0; p < V::Acc32::kParts; ++p) {                                                       \
        const int64_t o = j + p * V::W;                                                                  \
        if (o >= classes) break;                                                                         \
        const int c = static_cast<int>(std::min<int64_t>(V::W, classes - o));                            \
        const V::vf ev = V::exp(V::sub(c == V::W ? V::load(z + o) : V::loadn(z + o, c), vm));            \
        if (e) {                                                                                         \
          if (c == V::W)                                                                                 \
            V::store(e + o, ev);                                                                         \
          else                                                                                           \
            V::storen(e + o, ev, c);                                                                     \
        }                                                                                                \
        V::acc_add(acc, p, ev, c);                                                                       \
      }                                                                                                  \
    }                                                                                                    \
    return V::acc_fold(acc);                                                                             \
  }                                                                                                      \
  TARGET void nll_rows(const float* z, const Tensor& labels, int64_t classes, float* nll, int64_t b0,    \
                       int64_t b1) {                                                                     \
    for (int64_t b = b0; b < b1; ++b) {                                                                  \
      const int64_t y = label_fast(labels, b, classes, "softmax_cross_entropy");                         \
      const float* row = z + b * classes;                                                                \
      const float m = row_max(row, classes);                                                             \
      const float s = exp_sum(row, m, classes, nullptr);                                                 \
      nll[b] = log32(s) - (row[y] - m);                                                                  \
    }                                                                                                    \
  }                                                                                                      \
  /* dz[j] = (e[j] / s − 0) · scale for every j (e stored in dz first), then dz[y] with − 1. */     \
  TARGET void dlogit_rows(const float* z, const Tensor& labels, int64_t classes, float scale, float* dz, \
                          int64_t b0, int64_t b1) {                                                      \
    const V::vf vscale = V::set1(scale);                                                                 \
    for (int64_t b = b0; b < b1; ++b) {                                                                  \
      const int64_t y = label_fast(labels, b, classes, "softmax_cross_entropy_backward");                \
      const float* row = z + b * classes;                                                                \
      float* d = dz + b * classes;                                                                       \
      const float s = exp_sum(row, row_max(row, classes), classes, d);                                   \
      const float ey = d[y];                                                                             \
      const V::vf vs = V::set1(s);                                                                       \
      for (int64_t j = 0; j < classes; j += V::W) {                                                      \
        const int c = static_cast<int>(std::min<int64_t>(V::W, classes - j));                            \
        if (c == V::W)                                                                                   \
          V::store(d + j, V::mul(V::sub(V::div(V::load(d + j), vs), V::zero()), vscale));                \
        else                                                                                             \
          V::storen(d + j, V::mul(V::sub(V::div(V::loadn(d + j, c), vs), V::zero()), vscale), c);        \
      }                                                                                                  \
      d[y] = (ey / s - 1.0f) * scale;                                                                    \
    }                                                                                                    \
  }                                                                                                      \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_SCE_KERNELS)
#undef TRIBUNAL_SCE_KERNELS

/// The scalar path: the reference's sequence with e kept in dz (no per-range buffer) and the label
/// message built only on failure.
void dlogit_rows_scalar(const float* z, const Tensor& labels, int64_t classes, float scale, float* dz,
                        int64_t b0, int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t y = label_fast(labels, b, classes, "softmax_cross_entropy_backward");
    const float* row = z + b * classes;
    float* d = dz + b * classes;
    const float m = row_max_scalar(row, classes);
    for (int64_t j = 0; j < classes; ++j) d[j] = exp32(row[j] - m);
    const float s = canonical_sum(d, classes);
    for (int64_t j = 0; j < classes; ++j) d[j] = (d[j] / s - (j == y ? 1.0f : 0.0f)) * scale;
  }
}

void nll_rows_scalar(const float* z, const Tensor& labels, int64_t classes, float* nll, float* e, int64_t b0,
                     int64_t b1) {
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t y = label_fast(labels, b, classes, "softmax_cross_entropy");
    const float* row = z + b * classes;
    const float m = row_max_scalar(row, classes);
    for (int64_t j = 0; j < classes; ++j) e[j] = exp32(row[j] - m);
    nll[b] = log32(canonical_sum(e, classes)) - (row[y] - m);
  }
}

void sce_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  sce_run(in, out, nullptr);
}
void sce_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
              ThreadPool& pool) {
  const Tensor &z = *in[0], &labels = *in[1];
  const int64_t batch = z.shape()[0], classes = z.shape()[1];
  const SimdPath path = active_simd_path();
  std::vector<float> nll(static_cast<size_t>(batch));
  pool.parallel_for(
      batch,
      [&](int64_t b0, int64_t b1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::nll_rows(z.data(), labels, classes, nll.data(), b0, b1))
          case SimdPath::Scalar: {
            std::vector<float> e(static_cast<size_t>(classes));
            nll_rows_scalar(z.data(), labels, classes, nll.data(), e.data(), b0, b1);
            break;
          }
        }
      },
      row_grain(classes));
  (*out[0])[0] = canonical_sum(nll.data(), batch) / static_cast<float>(batch);
}
void sce_backward_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  dlogit_rows(in, *out[0], 0, in[0]->shape()[0]);
}
void sce_backward_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                       ThreadPool& pool) {
  const Tensor &z = *in[0], &labels = *in[1];
  const int64_t batch = z.shape()[0], classes = z.shape()[1];
  const float scale = (*in[2])[0] / static_cast<float>(batch);
  const SimdPath path = active_simd_path();
  float* dz = out[0]->data();
  pool.parallel_for(
      batch,
      [&](int64_t b0, int64_t b1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::dlogit_rows(z.data(), labels, classes, scale, dz, b0, b1))
          case SimdPath::Scalar:
            dlogit_rows_scalar(z.data(), labels, classes, scale, dz, b0, b1);
            break;
        }
      },
      row_grain(classes));
}

void sce_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0])
    in_grads[0] = g.emit(OpKind::SoftmaxCrossEntropyBackward, {}, {a.inputs[0], a.inputs[1], a.out_grads[0]});
  // Labels are class ids: they have no gradient.
}

}  // namespace

const OpInfo kSoftmaxCrossEntropyOp{.kind = OpKind::SoftmaxCrossEntropy,
                                    .name = "softmax_cross_entropy",
                                    .num_inputs = 2,
                                    .num_outputs = 1,
                                    .num_ints = 0,
                                    .num_floats = 0,
                                    .infer = sce_infer,
                                    .reference = sce_reference,
                                    .fast = sce_fast,
                                    .vjp = sce_vjp,
                                    .float64 = f64::softmax_cross_entropy,
                                    .float64_spread = Float64Spread::Libm};
const OpInfo kSoftmaxCrossEntropyBackwardOp{.kind = OpKind::SoftmaxCrossEntropyBackward,
                                            .name = "softmax_cross_entropy_backward",
                                            .num_inputs = 3,
                                            .num_outputs = 1,
                                            .num_ints = 0,
                                            .num_floats = 0,
                                            .infer = sce_backward_infer,
                                            .reference = sce_backward_reference,
                                            .fast = sce_backward_fast,
                                            .vjp = nullptr,
                                            .float64 = f64::softmax_cross_entropy_backward,
                                            .float64_spread = Float64Spread::Libm};

}  // namespace tribunal
