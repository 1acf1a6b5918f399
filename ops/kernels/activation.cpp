// GELU, tanh form (Hendrycks & Gimpel, "Gaussian Error Linear Units", 2016; PyTorch
// F.gelu(x, approximate='tanh')), docs/numerics.md "GELU". With c = √(2/π) = 0.7978845608f,
// k = 0.044715f, k3 = 0.134145f (= 3·k, rounded once to float), per element:
//   Gelu:          u = c·fma(k, (x·x)·x, x);  t = tanh32(u);  h = 0.5·x;  y = fma(h, t, h)
//   GeluBackward:  x2 = x·x;  u = c·fma(k, x2·x, x);  t = tanh32(u);
//                  left = fma(0.5, t, 0.5)               (= ½(1 + t))
//                  sech2 = fma(−t, t, 1)                 (= 1 − t²)
//                  du = c·fma(k3, x2, 1)                 (= c·(1 + 3k·x²) = du/dx)
//                  g = sech2 > 0 ? fma((0.5·x)·sech2, du, left) : left
//                  dx = dy·g
// y = fma(h, t, h) rounds h·(1 + t) once instead of twice. The `sech2 > 0` select only matters where
// tanh has saturated to ±1 (|u| ≥ 9.01): the product there is exactly 0 in the formula, and skipping it
// keeps |x| ≥ 2^64 (x2 = inf) and x = ±inf from turning 0·inf into NaN. gelu(−inf) = NaN (−inf·0, as in
// PyTorch); gelu(+inf) = +inf.
//
// Elementwise, so threads split elements freely and each SIMD lane runs the scalar sequence
// (vec_math.h); the result is bitwise identical on every path and thread count.
#include <cstring>

#include "ops/kernels/op_table.h"
#include "ops/kernels/vec_math.h"
#include "ops/math.h"
#include "ops/pointwise.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

/// gelu(x) and dy·gelu'(x): ops/pointwise.h, shared with the CUDA kernels.
inline float gelu_one(float x) {
  return gelu32(x);
}
inline float gelu_grad_one(float x, float dy) {
  return gelu_grad32(x, dy);
}

void gelu_scalar(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_one(x[i]);
}
void gelu_grad_scalar(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu_grad_one(x[i], dy[i]);
}

// The same sequences lane-wise, once per ISA (TRIBUNAL_SIMD_KERNELS in vec_math.h).
#define TRIBUNAL_GELU_KERNELS(NS, TARGET, V)                                                         \
  namespace NS {                                                                                     \
  TARGET inline V::vf gelu_v(V::vf x) {                                                              \
    const V::vf u = V::mul(V::set1(kGeluC), V::fma(V::set1(kGeluK), V::mul(V::mul(x, x), x), x));    \
    const V::vf t = V::tanh(u);                                                                      \
    const V::vf h = V::mul(V::set1(0.5f), x);                                                        \
    return V::fma(h, t, h);                                                                          \
  }                                                                                                  \
  TARGET inline V::vf gelu_grad_v(V::vf x, V::vf dy) {                                               \
    const V::vf x2 = V::mul(x, x);                                                                   \
    const V::vf u = V::mul(V::set1(kGeluC), V::fma(V::set1(kGeluK), V::mul(x2, x), x));              \
    const V::vf t = V::tanh(u);                                                                      \
    const V::vf left = V::fma(V::set1(0.5f), t, V::set1(0.5f));                                      \
    const V::vf sech2 = V::fma(V::neg(t), t, V::set1(1.0f));                                         \
    const V::vf du = V::mul(V::set1(kGeluC), V::fma(V::set1(kGeluK3), x2, V::set1(1.0f)));           \
    const V::vf full = V::fma(V::mul(V::mul(V::set1(0.5f), x), sech2), du, left);                    \
    return V::mul(dy, V::select_pos(sech2, full, left));                                             \
  }                                                                                                  \
  TARGET void gelu(const float* x, float* y, int64_t n) {                                            \
    int64_t i = 0;                                                                                   \
    for (; i + V::W <= n; i += V::W) V::store(y + i, gelu_v(V::load(x + i)));                        \
    if (i < n) {                                                                                     \
      const int c = static_cast<int>(n - i);                                                         \
      V::storen(y + i, gelu_v(V::loadn(x + i, c)), c);                                               \
    }                                                                                                \
  }                                                                                                  \
  TARGET void gelu_grad(const float* x, const float* dy, float* dx, int64_t n) {                     \
    int64_t i = 0;                                                                                   \
    for (; i + V::W <= n; i += V::W) V::store(dx + i, gelu_grad_v(V::load(x + i), V::load(dy + i))); \
    if (i < n) {                                                                                     \
      const int c = static_cast<int>(n - i);                                                         \
      V::storen(dx + i, gelu_grad_v(V::loadn(x + i, c), V::loadn(dy + i, c)), c);                    \
    }                                                                                                \
  }                                                                                                  \
  }
TRIBUNAL_SIMD_KERNELS(TRIBUNAL_GELU_KERNELS)
#undef TRIBUNAL_GELU_KERNELS

/// Elements per thread at least: one element costs ~1 ns scalar, a chunk should outweigh a wake-up.
constexpr int64_t kGrain = 4096;

std::vector<Shape> gelu_infer(const Attrs&, std::span<const Shape> in) {
  return {in[0]};
}

std::vector<Shape> gelu_backward_infer(const Attrs&, std::span<const Shape> in) {
  op_require(in[0] == in[1], "gelu_backward",
             "x and dy must have equal shapes, got " + in[0].str() + " and " + in[1].str());
  return {in[0]};
}

void gelu_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  gelu_scalar(in[0]->data(), out[0]->data(), in[0]->numel());
}

void gelu_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
               ThreadPool& pool) {
  const SimdPath path = active_simd_path();
  const float* x = in[0]->data();
  float* y = out[0]->data();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::gelu(x + i0, y + i0, i1 - i0))
          case SimdPath::Scalar:
            gelu_scalar(x + i0, y + i0, i1 - i0);
            break;
        }
      },
      kGrain);
}

void gelu_backward_reference(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  gelu_grad_scalar(in[0]->data(), in[1]->data(), out[0]->data(), in[0]->numel());
}

void gelu_backward_fast(const Attrs&, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                        ThreadPool& pool) {
  const SimdPath path = active_simd_path();
  const float *x = in[0]->data(), *dy = in[1]->data();
  float* dx = out[0]->data();
  pool.parallel_for(
      in[0]->numel(),
      [&](int64_t i0, int64_t i1) {
        switch (path) {
          TRIBUNAL_SIMD_CASES(isa::gelu_grad(x + i0, dy + i0, dx + i0, i1 - i0))
          case SimdPath::Scalar:
            gelu_grad_scalar(x + i0, dy + i0, dx + i0, i1 - i0);
            break;
        }
      },
      kGrain);
}

void gelu_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0]) in_grads[0] = g.emit(OpKind::GeluBackward, {}, {a.inputs[0], a.out_grads[0]});
}

}  // namespace

/// Gelu: x (any shape) → y = gelu(x), tanh form (Hendrycks & Gimpel 2016). No attributes.
const OpInfo kGeluOp{.kind = OpKind::Gelu,
                     .name = "gelu",
                     .num_inputs = 1,
                     .num_outputs = 1,
                     .num_ints = 0,
                     .num_floats = 0,
                     .infer = gelu_infer,
                     .reference = gelu_reference,
                     .fast = gelu_fast,
                     .vjp = gelu_vjp,
                     .float64 = f64::gelu,
                     .float64_spread = Float64Spread::Libm};
/// GeluBackward: x, dy (equal shapes; OpError otherwise) → dx = dy·gelu'(x).
const OpInfo kGeluBackwardOp{.kind = OpKind::GeluBackward,
                             .name = "gelu_backward",
                             .num_inputs = 2,
                             .num_outputs = 1,
                             .num_ints = 0,
                             .num_floats = 0,
                             .infer = gelu_backward_infer,
                             .reference = gelu_backward_reference,
                             .fast = gelu_backward_fast,
                             .vjp = nullptr,
                             .float64 = f64::gelu_backward,
                             .float64_spread = Float64Spread::Libm};

}  // namespace tribunal
