// Optimizer updates (docs/numerics.md "Optimizers"). Elementwise, so threads split elements freely.
//
// SgdMomentum (PyTorch torch.optim.SGD semantics), floats = {lr, μ, wd}:
//   g' = wd ≠ 0 ? fma(wd, p, g) : g;  v' = fma(μ, v, g');  p' = fma(−lr, v', p)
// AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019; PyTorch AdamW),
// floats = {lr, β1, β2, ε, wd}, ints = {t ≥ 1, the 1-based update count}. Per node, once:
//   bc1 = 1 − powi(β1, t);  bc2 = 1 − powi(β2, t)   (powi: square-and-multiply, bits of t from the lowest)
//   step = lr / bc1;  sbc2 = sqrt(bc2);  decay = 1 − lr·wd
// Per element:
//   p1 = p·decay;  m' = fma(β1, m, (1−β1)·g);  v' = fma(β2, v, (1−β2)·(g·g))
//   p' = fma(−step, m' / (sqrt(v') / sbc2 + ε), p1)
//
// The fast kernels run the same sequence lane-wise (vec_math.h: every operation is IEEE and correctly
// rounded in its vector form, sqrt included), so they equal the scalar reference bit for bit; the scalar
// std::fma would be a libm call per element on x86-64, which made AdamW a tenth of a GPT step's
// non-product time and most of a referee's re-execution of an optimizer node.
//
// −lr and −step are computed once, into the constants, never written as `fma(-x, …)` per element: on
// arm64 the compiler turns that into FMSUB/FMLS, which negate one multiplicand, and which one is its
// choice; negating a NaN flips its sign, so a NaN update (v' < 0 under sqrt) came out −NaN from the
// scalar loop and +NaN from the NEON one. With no negation left to fold, both propagate the same NaN.
#include <cmath>

#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

std::vector<Shape> update_infer(const char* op, std::span<const Shape> in, int outputs) {
  for (const Shape& s : in)
    op_require(
        s == in[0], op,
        "parameter, gradient and state must have equal shapes, got " + in[0].str() + " and " + s.str());
  return std::vector<Shape>(static_cast<size_t>(outputs), in[0]);
}

std::vector<Shape> sgd_infer(const Attrs&, std::span<const Shape> in) {
  return update_infer("sgd_momentum", in, 2);
}

std::vector<Shape> adamw_infer(const Attrs& attrs, std::span<const Shape> in) {
  op_require(attrs.ints[0] >= 1, "adamw",
             "the update count t must be ≥ 1, got " + std::to_string(attrs.ints[0]));
  return update_infer("adamw", in, 3);
}

struct SgdConstants {
  float neg_lr, mu, wd;  // −lr: the file comment says why
  explicit SgdConstants(const Attrs& a) : neg_lr(-a.floats[0]), mu(a.floats[1]), wd(a.floats[2]) {}
};

void sgd_scalar(const SgdConstants& c, const float* p, const float* g, const float* v, float* p2, float* v2,
                int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = c.wd != 0.0f ? fma32(c.wd, p[i], g[i]) : g[i];
    const float vi = fma32(c.mu, v[i], gi);
    v2[i] = vi;
    p2[i] = fma32(c.neg_lr, vi, p[i]);
  }
}

/// b^t by square-and-multiply over the bits of t from the lowest (a fixed sequence of roundings).
float powi(float b, int64_t t) {
  float result = 1.0f;
  for (float base = b; t > 0; t >>= 1) {
    if (t & 1) result = result * base;
    base = base * base;
  }
  return result;
}

/// AdamW's per-node values (the file comment), computed once for every path.
struct AdamWConstants {
  float b1, b2, eps, neg_step, sbc2, decay, omb1, omb2;  // −step: the file comment says why
  explicit AdamWConstants(const Attrs& a) {
    const float lr = a.floats[0], wd = a.floats[4];
    b1 = a.floats[1];
    b2 = a.floats[2];
    eps = a.floats[3];
    const int64_t t = a.ints[0];
    const float bc1 = 1.0f - powi(b1, t), bc2 = 1.0f - powi(b2, t);
    neg_step = -(lr / bc1);
    sbc2 = std::sqrt(bc2);
    decay = 1.0f - lr * wd;
    omb1 = 1.0f - b1;
    omb2 = 1.0f - b2;
  }
};

void adamw_scalar(const AdamWConstants& c, const float* p, const float* g, const float* m, const float* v,
                  float* p2, float* m2, float* v2, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float p1 = p[i] * c.decay;
    const float mi = fma32(c.b1, m[i], c.omb1 * g[i]);
    const float vi = fma32(c.b2, v[i], c.omb2 * (g[i] * g[i]));
    m2[i] = mi;
    v2[i] = vi;
    p2[i] = fma32(c.neg_step, mi / (std::sqrt(vi) / c.sbc2 + c.eps), p1);
  }
}

// The same sequences lane-wise, once per ISA (TRIBUNAL_SIMD_KERNELS in vec_math.h). A partial last
// vector computes on +0 padding lanes and stores only its own.
#define TRIBUNAL_OPTIMIZER_KERNELS(NS, TARGET, V)                                                            \
  namespace NS {                                                                                             \
  TARGET inline void sgd_v(const SgdConstants& c, V::vf p, V::vf g, V::vf v, V::vf& p2, V::vf& v2) {         \
    const V::vf gi = c.wd != 0.0f ? V::fma(V::set1(c.wd), p, g) : g;                                         \
    v2 = V::fma(V::set1(c.mu), v, gi);                                                                       \
    p2 = V::fma(V::set1(c.neg_lr), v2, p);                                                                   \
  }                                                                                                          \
  TARGET void sgd(const SgdConstants& c, const float* p, const float* g, const float* v, float* p2,          \
                  float* v2, int64_t n) {                                                                    \
    V::vf pv, vv;                                                                                            \
    int64_t i = 0;                                                                                           \
    for (; i + V::W <= n; i += V::W) {                                                                       \
      sgd_v(c, V::load(p + i), V::load(g + i), V::load(v + i), pv, vv);                                      \
      V::store(v2 + i, vv);                                                                                  \
      V::store(p2 + i, pv);                                                                                  \
    }                                                                                                        \
    if (i < n) {                                                                                             \
      const int k = static_cast<int>(n - i);                                                                 \
      sgd_v(c, V::loadn(p + i, k), V::loadn(g + i, k), V::loadn(v + i, k), pv, vv);                          \
      V::storen(v2 + i, vv, k);                                                                              \
      V::storen(p2 + i, pv, k);                                                                              \
    }                                                                                                        \
  }                                                                                                          \
  TARGET inline void adamw_v(const AdamWConstants& c, V::vf p, V::vf g, V::vf m, V::vf v, V::vf& p2,         \
                             V::vf& m2, V::vf& v2) {                                                         \
    const V::vf p1 = V::mul(p, V::set1(c.decay));                                                            \
    m2 = V::fma(V::set1(c.b1), m, V::mul(V::set1(c.omb1), g));                                               \
    v2 = V::fma(V::set1(c.b2), v, V::mul(V::set1(c.omb2), V::mul(g, g)));                                    \
    const V::vf denom = V::add(V::div(V::sqrt(v2), V::set1(c.sbc2)), V::set1(c.eps));                        \
    p2 = V::fma(V::set1(c.neg_step), V::div(m2, denom), p1);                                                 \
  }                                                                                                          \
  TARGET void adamw(const AdamWConstants& c, const float* p, const float* g, const float* m, const float* v, \
                    float* p2, float* m2, float* v2, int64_t n) {                                            \
    V::vf pv, mv, vv;                                                                                        \
    int64_t i = 0;                                                                                           \
    for (; i + V::W <= n; i += V::W) {                                                                       \
      adamw_v(c, V::load(p + i), V::load(g + i), V::load(m + i), V::load(v + i), pv, mv, vv);                \
      V::store(m2 + i, mv);                                                                                  \
      V::store(v2 + i, vv);                                                                                  \
      V::store(p2 + i, pv);                                                                                  \
    }                                                                                                        \
    if (i < n) {                                                                                             \
      const int k = static_cast<int>(n - i);                                                                 \
      adamw_v(c, V::loadn(p + i, k), V::loadn(g + i, k), V::loadn(m + i, k), V::loadn(v + i, k), pv, mv,     \
              vv);                                                                                           \
      V::storen(m2 + i, mv, k);                                                                              \
      V::storen(v2 + i, vv, k);                                                                              \
      V::storen(p2 + i, pv, k);                                                                              \
    }                                                                                                        \
  }                                                                                                          \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_OPTIMIZER_KERNELS)
#undef TRIBUNAL_OPTIMIZER_KERNELS

/// Elements per thread at least: a chunk should outweigh a wake-up.
constexpr int64_t kGrain = int64_t{1} << 14;

void sgd_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  sgd_scalar(SgdConstants(a), in[0]->data(), in[1]->data(), in[2]->data(), out[0]->data(), out[1]->data(),
             in[0]->numel());
}

void sgd_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
              ThreadPool& pool) {
  const SgdConstants c(a);
  const SimdPath path = active_simd_path();
  const float *p = in[0]->data(), *g = in[1]->data(), *v = in[2]->data();
  float *p2 = out[0]->data(), *v2 = out[1]->data();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::sgd(c, p + i0, g + i0, v + i0, p2 + i0, v2 + i0, i1 - i0))
          case SimdPath::Scalar:
            sgd_scalar(c, p + i0, g + i0, v + i0, p2 + i0, v2 + i0, i1 - i0);
            break;
        }
      },
      kGrain);
}

void adamw_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  adamw_scalar(AdamWConstants(a), in[0]->data(), in[1]->data(), in[2]->data(), in[3]->data(), out[0]->data(),
               out[1]->data(), out[2]->data(), in[0]->numel());
}

void adamw_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                ThreadPool& pool) {
  const AdamWConstants c(a);
  const SimdPath path = active_simd_path();
  const float *p = in[0]->data(), *g = in[1]->data(), *m = in[2]->data(), *v = in[3]->data();
  float *p2 = out[0]->data(), *m2 = out[1]->data(), *v2 = out[2]->data();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(
              isa::adamw(c, p + i0, g + i0, m + i0, v + i0, p2 + i0, m2 + i0, v2 + i0, i1 - i0))
          case SimdPath::Scalar:
            adamw_scalar(c, p + i0, g + i0, m + i0, v + i0, p2 + i0, m2 + i0, v2 + i0, i1 - i0);
            break;
        }
      },
      kGrain);
}

}  // namespace

const OpInfo kSgdMomentumOp{.kind = OpKind::SgdMomentum,
                            .name = "sgd_momentum",
                            .num_inputs = 3,
                            .num_outputs = 2,
                            .num_ints = 0,
                            .num_floats = 3,
                            .infer = sgd_infer,
                            .reference = sgd_reference,
                            .fast = sgd_fast,
                            .vjp = nullptr,
                            .float64 = f64::sgd_momentum,
                            .float64_spread = Float64Spread::Libm,
                            .in_place = {0, 2, -1}};
const OpInfo kAdamWOp{.kind = OpKind::AdamW,
                      .name = "adamw",
                      .num_inputs = 4,
                      .num_outputs = 3,
                      .num_ints = 1,
                      .num_floats = 5,
                      .infer = adamw_infer,
                      .reference = adamw_reference,
                      .fast = adamw_fast,
                      .vjp = nullptr,
                      .float64 = f64::adamw,
                      .float64_spread = Float64Spread::Libm,
                      .in_place = {0, 2, 3}};

}  // namespace tribunal
