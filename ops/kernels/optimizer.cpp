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
#include <cmath>

#include "ops/kernels/op_table.h"
#include "ops/math.h"

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

void sgd_range(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out, int64_t i0,
               int64_t i1) {
  const float lr = a.floats[0], mu = a.floats[1], wd = a.floats[2];
  const float *p = in[0]->data(), *g = in[1]->data(), *v = in[2]->data();
  float *p2 = out[0]->data(), *v2 = out[1]->data();
  for (int64_t i = i0; i < i1; ++i) {
    const float gi = wd != 0.0f ? fma32(wd, p[i], g[i]) : g[i];
    const float vi = fma32(mu, v[i], gi);
    v2[i] = vi;
    p2[i] = fma32(-lr, vi, p[i]);
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

void adamw_range(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out, int64_t i0,
                 int64_t i1) {
  const float lr = a.floats[0], b1 = a.floats[1], b2 = a.floats[2], eps = a.floats[3], wd = a.floats[4];
  const int64_t t = a.ints[0];
  const float bc1 = 1.0f - powi(b1, t), bc2 = 1.0f - powi(b2, t);
  const float step = lr / bc1, sbc2 = std::sqrt(bc2), decay = 1.0f - lr * wd;
  const float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
  const float *p = in[0]->data(), *g = in[1]->data(), *m = in[2]->data(), *v = in[3]->data();
  float *p2 = out[0]->data(), *m2 = out[1]->data(), *v2 = out[2]->data();
  for (int64_t i = i0; i < i1; ++i) {
    const float p1 = p[i] * decay;
    const float mi = fma32(b1, m[i], omb1 * g[i]);
    const float vi = fma32(b2, v[i], omb2 * (g[i] * g[i]));
    m2[i] = mi;
    v2[i] = vi;
    p2[i] = fma32(-step, mi / (std::sqrt(vi) / sbc2 + eps), p1);
  }
}

}  // namespace

const OpInfo kSgdMomentumOp{.kind = OpKind::SgdMomentum,
                            .name = "sgd_momentum",
                            .num_inputs = 3,
                            .num_outputs = 2,
                            .num_ints = 0,
                            .num_floats = 3,
                            .infer = sgd_infer,
                            .reference = whole_range<sgd_range>,
                            .fast = split_range<sgd_range>,
                            .vjp = nullptr,
                            .float64 = f64::sgd_momentum,
                            .float64_spread = Float64Spread::Libm};
const OpInfo kAdamWOp{.kind = OpKind::AdamW,
                      .name = "adamw",
                      .num_inputs = 4,
                      .num_outputs = 3,
                      .num_ints = 1,
                      .num_floats = 5,
                      .infer = adamw_infer,
                      .reference = whole_range<adamw_range>,
                      .fast = split_range<adamw_range>,
                      .vjp = nullptr,
                      .float64 = f64::adamw,
                      .float64_spread = Float64Spread::Libm};

}  // namespace tribunal
