// Float64 elementwise ops: Add, Gelu, GeluBackward, Dropout, DropoutBackward, Scale, BroadcastBinary,
// SumToShape, ReduceMean and ReduceMeanBackward (ops/broadcast.h's geometry, the same element map as the
// float32 reference). One double expression per element; the selects (x > 0, GELU's saturation, the dropout
// mask) are decided as the float32 reference decides them.
#include <algorithm>
#include <cmath>

#include "ops/broadcast.h"
#include "ops/float64/exp.h"
#include "ops/float64/internal.h"
#include "ops/movement.h"
#include "ops/pointwise.h"

namespace tribunal::f64 {
namespace {

constexpr double kGeluC = 0.79788456080286535588;  // √(2/π)
constexpr double kGeluK = 0.044715;

/// 1 + tanh u and 1 − tanh u for the u of GELU at x[0..n), n ≤ kGeluBlock, from e = exp(−2|u|) (this
/// library's exp, ops/float64/exp.h): 2/(1 + e) and e·2/(1 + e), neither computed by cancelling (1 + t at
/// t ≈ −1 would lose the bits that matter for x ≪ 0, and with them any agreement between two libms'
/// last bits). Simple loops over the block, so that the compiler vectorizes them.
constexpr int64_t kGeluBlock = 512;
void one_plus_minus_tanh(const float* x, int64_t n, double* plus, double* minus) {
  double u[kGeluBlock];
  for (int64_t j = 0; j < n; ++j) {
    const double v = x[j];
    u[j] = kGeluC * (v + kGeluK * (v * v * v));
    minus[j] = -2.0 * std::fabs(u[j]);
  }
  exp(minus, minus, static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const double e = minus[j], big = 2.0 / (1.0 + e), small = e * big;
    plus[j] = u[j] < 0.0 ? small : big;
    minus[j] = u[j] < 0.0 ? big : small;
  }
}

/// fn(b, n, plus, minus) for the blocks [b, b + n) of [i0, i1), with one_plus_minus_tanh's values.
template <class F>
void gelu_blocks(const float* x, int64_t i0, int64_t i1, F&& fn) {
  double plus[kGeluBlock], minus[kGeluBlock];
  for (int64_t b = i0; b < i1; b += kGeluBlock) {
    const int64_t n = std::min(kGeluBlock, i1 - b);
    one_plus_minus_tanh(x + b, n, plus, minus);
    fn(b, n, plus, minus);
  }
}

}  // namespace

void add(const Call& c) {
  const float *a = c.in[0]->data(), *b = c.in[1]->data();
  double* y = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = static_cast<double>(a[i]) + static_cast<double>(b[i]);
  });
}

/// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) as h·(1 + t) + 0 with h = 0.5·x (the + 0 makes gelu(−0) = +0,
/// as the reference; gelu(−inf) = −inf·0 = NaN, as the reference).
void gelu(const Call& c) {
  const float* xf = c.in[0]->data();
  double* y = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    gelu_blocks(xf, i0, i1, [&](int64_t b, int64_t n, const double* plus, const double*) {
      for (int64_t j = 0; j < n; ++j) y[b + j] = (0.5 * static_cast<double>(xf[b + j])) * plus[j] + 0.0;
    });
  });
}

/// dy·(½(1 + t) + ½x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²)) with 1 − t² = (1 + t)(1 − t); the second term is
/// skipped where 1 − t² is not > 0 (tanh saturated, ±inf included: keeps 0·inf from giving NaN, as the
/// reference's select).
void gelu_backward(const Call& c) {
  const float *xf = c.in[0]->data(), *dyf = c.in[1]->data();
  double* dx = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    gelu_blocks(xf, i0, i1, [&](int64_t b, int64_t n, const double* plus, const double* minus) {
      for (int64_t j = 0; j < n; ++j) {
        const double x = xf[b + j];
        const double left = 0.5 * plus[j];
        const double sech2 = plus[j] * minus[j];
        const double du = kGeluC * (1.0 + 3.0 * kGeluK * (x * x));
        const double g = sech2 > 0.0 ? (0.5 * x) * sech2 * du + left : left;
        dx[b + j] = static_cast<double>(dyf[b + j]) * g;
      }
    });
  });
}

/// keepᵢ ? xᵢ/(1 − p) : +0, keepᵢ from Philox exactly as the reference (dropout_keep with the float p);
/// the backward maps dy the same way. The mask comes from the fast float32 kernel's output (its SIMD
/// Philox): there keepᵢ ⇔ yᵢ ≠ 0, since xᵢ·s with s ≥ 1 is never 0 for xᵢ ≠ 0 (NaN ≠ 0 included);
/// only where xᵢ = ±0 is the mask not readable from yᵢ, and only −0 needs it (kept: −0, dropped: +0).
void dropout(const Call& c) {
  const auto seed = static_cast<uint64_t>(c.attrs.ints[0]);
  const auto step = static_cast<uint32_t>(c.attrs.ints[1]), site = static_cast<uint32_t>(c.attrs.ints[2]);
  const float p = c.attrs.floats[0];
  const double s = 1.0 / (1.0 - static_cast<double>(p));
  const float* x = c.in[0]->data();
  const float* y32 = fast_outputs(OpKind::Dropout, c)[0].data();  // Dropout's map is DropoutBackward's
  double* y = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const bool keep =
          y32[i] != 0.0f || (std::signbit(x[i]) && x[i] == 0.0f && dropout_keep(seed, step, site, p, i));
      y[i] = keep ? static_cast<double>(x[i]) * s : 0.0;
    }
  });
}

void scale(const Call& c) {
  const float* x = c.in[0]->data();
  const double s = (*c.in[1])[0];
  double* y = c.out[0].data();
  for_each_range(c, static_cast<int64_t>(c.out[0].size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) y[i] = static_cast<double>(x[i]) * s;
  });
}

/// a op b in double on the broadcast sources (exact for add, sub and mul of floats; div rounds once).
void broadcast_binary(const Call& c) {
  const Shape &a = c.in[0]->shape(), &b = c.in[1]->shape(), &y = c.out_shapes[0];
  const BinaryGeom g =
      binary_geom(a.dims().data(), a.rank(), b.dims().data(), b.rank(), y.dims().data(), y.rank());
  const float *af = c.in[0]->data(), *bf = c.in[1]->data();
  const int64_t code = c.attrs.ints[0];
  double* out = c.out[0].data();
  for (size_t i = 0; i < c.out[0].size(); ++i) {
    const double x = af[broadcast_offset(g.dims, g.sa, static_cast<int64_t>(i))];
    const double z = bf[broadcast_offset(g.dims, g.sb, static_cast<int64_t>(i))];
    out[i] = code == 0 ? x + z : code == 1 ? x - z : code == 2 ? x * z : x / z;
  }
}

/// sign · Σ of the broadcast sources in increasing flat index of x, in double.
void sum_to_shape(const Call& c) {
  const Shape &x = c.in[0]->shape(), &t = c.out_shapes[0];
  const SumGeom g = sum_geom(x.dims().data(), x.rank(), t.dims().data(), t.rank());
  const float* xf = c.in[0]->data();
  const double sign = c.attrs.floats[0];
  double* out = c.out[0].data();
  for (size_t j = 0; j < c.out[0].size(); ++j) {
    const int64_t base = broadcast_offset(g.out_dims, g.out_strides, static_cast<int64_t>(j));
    double s = 0.0;
    for (int64_t i = 0; i < g.n; ++i) s += xf[base + broadcast_offset(g.red_dims, g.red_strides, i)];
    out[j] = sign * s;
  }
}

/// Σ of the N elements along the axis in double, in increasing index, then one division by N.
void reduce_mean(const Call& c) {
  const Shape& x = c.in[0]->shape();
  const AxisView v = axis_view(x.dims().data(), x.rank(), static_cast<int>(c.attrs.ints[0]));
  const float* xf = c.in[0]->data();
  double* out = c.out[0].data();
  for (size_t j = 0; j < c.out[0].size(); ++j) {
    const int64_t o = static_cast<int64_t>(j) / v.inner, i = static_cast<int64_t>(j) % v.inner;
    double s = 0.0;
    for (int64_t k = 0; k < v.dim; ++k) s += xf[(o * v.dim + k) * v.inner + i];
    out[j] = s / static_cast<double>(v.dim);
  }
}

/// dx[o, k, i] = dy[o, i] / N in double.
void reduce_mean_backward(const Call& c) {
  const Shape& dx = c.out_shapes[0];
  const AxisView v = axis_view(dx.dims().data(), dx.rank(), static_cast<int>(c.attrs.ints[0]));
  const float* dy = c.in[0]->data();
  double* out = c.out[0].data();
  for (size_t e = 0; e < c.out[0].size(); ++e) {
    const int64_t k = static_cast<int64_t>(e);
    out[e] =
        static_cast<double>(dy[(k / (v.dim * v.inner)) * v.inner + k % v.inner]) / static_cast<double>(v.dim);
  }
}

}  // namespace tribunal::f64
