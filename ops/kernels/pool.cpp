// Max pooling and its gradient (docs/numerics.md "Ops", max_pool2d*). NCHW. ints = {}: the 2×2 window with
// stride 2 of the built-in CNN; ints = {kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom,
// pad_right}: a general window (ONNX MaxPool, floor mode), padding never chosen (PoolGeom, ops/pointwise.h).
//
// A maximum involves no rounding, so the contract only has to fix which element is *chosen*, which
// decides both the forward value's bits (−0 vs +0, NaN payloads) and where the gradient goes:
//   scan the window in order (0,0), (0,1), (1,0), (1,1); the chosen element is the first NaN if
//   there is one, else the first element equal to the maximum (a later equal element, e.g. +0 after
//   −0, does not replace it).
//   max_pool2d:          y = the chosen element (a copy: its sign and NaN payload are kept)
//   max_pool2d_backward: dx[chosen] = dy of the window (a copy), every other element of x gets +0
// A general window is scanned row by row, left to right, with the same rule (so {2,2,2,2,0,0,0,0}
// chooses what {} chooses). Windows may overlap (stride < kernel): an element chosen by several windows
// gets the first one's dy copied and each later one's added, in increasing window order (pool_grad_at).
// PyTorch's CPU max_pool2d also propagates NaN and keeps the first maximum; the order is ours.
// Windows are independent, so the fast kernels (the same per-window code over a static partition of
// the N·C planes) are bitwise identical to the references by construction.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/kernels/op_table.h"
#include "ops/pointwise.h"

namespace tribunal {
namespace {

/// Checks x[N,C,H,W] with H, W even and ≥ 2.
void check_pool_input(const char* op, const Shape& x) {
  op_require(x.rank() == 4, op, "needs x[N,C,H,W], got " + x.str());
  op_require(x[0] >= 1 && x[1] >= 1 && x[2] >= 2 && x[3] >= 2 && x[2] % 2 == 0 && x[3] % 2 == 0, op,
             "needs N, C ≥ 1 and even H, W ≥ 2, got " + x.str());
}

constexpr int64_t kMaxPoolSide = 8;

bool is_general(const Attrs& a) {
  return !a.ints.empty();
}

/// Checks a general pooling's ints against x[N,C,H,W] and returns its geometry.
PoolGeom general_geom(const char* op, const Attrs& a, const Shape& x) {
  op_require(a.ints.size() == 8, op,
             "needs ints {} (2x2, stride 2) or {kh, kw, stride_h, stride_w, pad_top, pad_left, pad_bottom, "
             "pad_right}, got " +
                 std::to_string(a.ints.size()) + " ints");
  op_require(x.rank() == 4, op, "needs x[N,C,H,W], got " + x.str());
  op_require(x[0] >= 1 && x[1] >= 1 && x[2] >= 1 && x[3] >= 1, op, "needs N, C, H, W ≥ 1, got " + x.str());
  const auto& v = a.ints;
  // Sides ≤ 8 bound a node's work by its size (the dispute cost counts elements, engine/cost.cpp): a
  // forward output scans ≤ 64 elements, a gradient element ≤ 64 windows of ≤ 64.
  op_require(v[0] >= 1 && v[1] >= 1 && v[0] <= kMaxPoolSide && v[1] <= kMaxPoolSide, op,
             "kernel sides must be in [1, 8], got " + std::to_string(v[0]) + "x" + std::to_string(v[1]));
  op_require(v[2] >= 1 && v[3] >= 1, op,
             "strides must be ≥ 1, got " + std::to_string(v[2]) + ", " + std::to_string(v[3]));
  op_require(v[4] >= 0 && v[5] >= 0 && v[6] >= 0 && v[7] >= 0 && v[4] < v[0] && v[6] < v[0] && v[5] < v[1] &&
                 v[7] < v[1],
             op, "pads must be ≥ 0 and smaller than the kernel side they pad");
  op_require(x[2] + v[4] + v[6] >= v[0] && x[3] + v[5] + v[7] >= v[1], op,
             "the padded image " + x.str() + " is smaller than the " + std::to_string(v[0]) + "x" +
                 std::to_string(v[1]) + " window");
  PoolGeom g;
  g.h = x[2];
  g.w = x[3];
  g.kh = v[0];
  g.kw = v[1];
  g.sh = v[2];
  g.sw = v[3];
  g.pt = v[4];
  g.pl = v[5];
  g.oh = (g.h + v[4] + v[6] - g.kh) / g.sh + 1;
  g.ow = (g.w + v[5] + v[7] - g.kw) / g.sw + 1;
  return g;
}

/// The pooled shape of x under attrs a (either form).
Shape pooled_shape(const char* op, const Attrs& a, const Shape& x) {
  if (!is_general(a)) {
    check_pool_input(op, x);
    return Shape{x[0], x[1], x[2] / 2, x[3] / 2};
  }
  const PoolGeom g = general_geom(op, a, x);
  return Shape{x[0], x[1], g.oh, g.ow};
}

/// The chosen element of a window: pool_choice (ops/pointwise.h, shared with the CUDA kernels).
inline int chosen(const float v[4]) {
  return pool_choice(v);
}

/// The window of output (r, s): pool_window (ops/pointwise.h, shared with the CUDA kernels).
inline void window(const float* plane, int64_t w, int64_t r, int64_t s, float v[4]) {
  pool_window(plane, w, r, s, v);
}

std::vector<Shape> pool_infer(const Attrs& a, std::span<const Shape> in) {
  return {pooled_shape("max_pool2d", a, in[0])};
}

/// Planes [pl0, pl1) of a general pooling.
void general_pool_planes(const PoolGeom& g, const Tensor& x, Tensor& y, int64_t pl0, int64_t pl1) {
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* plane = x.data() + pl * g.h * g.w;
    float* out = y.data() + pl * g.oh * g.ow;
    for (int64_t r = 0; r < g.oh; ++r)
      for (int64_t s = 0; s < g.ow; ++s) out[r * g.ow + s] = plane[pool_choice_at(plane, g, r, s)];
  }
}

/// Planes [pl0, pl1) of the N·C planes.
void pool_planes(const Tensor& x, Tensor& y, int64_t pl0, int64_t pl1) {
  const int64_t h = x.shape()[2], w = x.shape()[3], oh = h / 2, ow = w / 2;
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* plane = x.data() + pl * h * w;
    float* out = y.data() + pl * oh * ow;
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t s = 0; s < ow; ++s) {
        float v[4];
        window(plane, w, r, s, v);
        out[r * ow + s] = v[chosen(v)];
      }
  }
}

void pool_reference(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Shape& x = in[0]->shape();
  if (is_general(a))
    general_pool_planes(general_geom("max_pool2d", a, x), *in[0], *out[0], 0, x[0] * x[1]);
  else
    pool_planes(*in[0], *out[0], 0, x[0] * x[1]);
}

/// Planes per thread: at least 2^16 input elements (~100 µs), more than a parallel_for round trip
/// costs (25-55 µs, see matmul.cpp), so a small pooling stays on the caller.
int64_t plane_grain(const Shape& x) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / (x[2] * x[3]));
}

void pool_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
               ThreadPool& pool) {
  const Shape& s = in[0]->shape();
  if (is_general(a)) {
    const PoolGeom g = general_geom("max_pool2d", a, s);
    pool.parallel_for(
        s[0] * s[1], [&](int64_t p0, int64_t p1) { general_pool_planes(g, *in[0], *out[0], p0, p1); },
        plane_grain(s));
    return;
  }
  pool.parallel_for(
      s[0] * s[1], [&](int64_t p0, int64_t p1) { pool_planes(*in[0], *out[0], p0, p1); }, plane_grain(s));
}

void pool_vjp(VjpBuilder& g, const VjpArgs& a, std::span<ValueRef> in_grads) {
  if (a.needs_grad[0])
    in_grads[0] = g.emit(OpKind::MaxPool2dBackward, a.attrs, {a.inputs[0], a.out_grads[0]});
}

// ---- MaxPool2dBackward -------------------------------------------------------------------------------

std::vector<Shape> pool_backward_infer(const Attrs& a, std::span<const Shape> in) {
  const char* op = "max_pool2d_backward";
  const Shape& x = in[0];
  const Shape want = pooled_shape(op, a, x);
  op_require(in[1] == want, op, "dy must be " + want.str() + " for x " + x.str() + ", got " + in[1].str());
  return {x};
}

void pool_backward_planes(const Tensor& x, const Tensor& dy, Tensor& dx, int64_t pl0, int64_t pl1) {
  const int64_t h = x.shape()[2], w = x.shape()[3], oh = h / 2, ow = w / 2;
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* plane = x.data() + pl * h * w;
    const float* g = dy.data() + pl * oh * ow;
    float* d = dx.data() + pl * h * w;
    for (int64_t r = 0; r < oh; ++r)
      for (int64_t s = 0; s < ow; ++s) {
        float v[4];
        window(plane, w, r, s, v);
        const int k = chosen(v);
        float* p = d + 2 * r * w + 2 * s;
        p[0] = p[1] = p[w] = p[w + 1] = 0.0f;
        p[(k >> 1) * w + (k & 1)] = g[r * ow + s];
      }
  }
}

/// The contract of a general pooling's gradient, element by element (pool_grad_at, as the CUDA kernel).
void general_backward_reference(const PoolGeom& g, const Tensor& x, const Tensor& dy, Tensor& dx,
                                int64_t planes) {
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x.data() + pl * g.h * g.w;
    const float* gp = dy.data() + pl * g.oh * g.ow;
    float* d = dx.data() + pl * g.h * g.w;
    for (int64_t i = 0; i < g.h; ++i)
      for (int64_t j = 0; j < g.w; ++j) d[i * g.w + j] = pool_grad_at(plane, gp, g, i, j);
  }
}

/// Planes [pl0, pl1) of a general pooling's gradient as a scatter: windows in increasing order, each
/// dy copied to its chosen element the first time that element is chosen and added after, which is
/// pool_grad_at's sequence of operations for every element.
void general_backward_planes(const PoolGeom& g, const Tensor& x, const Tensor& dy, Tensor& dx, int64_t pl0,
                             int64_t pl1) {
  std::vector<uint8_t> seen(static_cast<size_t>(g.h * g.w));
  for (int64_t pl = pl0; pl < pl1; ++pl) {
    const float* plane = x.data() + pl * g.h * g.w;
    const float* gp = dy.data() + pl * g.oh * g.ow;
    float* d = dx.data() + pl * g.h * g.w;
    std::fill(d, d + g.h * g.w, 0.0f);
    std::fill(seen.begin(), seen.end(), uint8_t{0});
    for (int64_t r = 0; r < g.oh; ++r)
      for (int64_t s = 0; s < g.ow; ++s) {
        const int64_t k = pool_choice_at(plane, g, r, s);
        const float v = gp[r * g.ow + s];
        d[k] = seen[static_cast<size_t>(k)] ? d[k] + v : v;
        seen[static_cast<size_t>(k)] = 1;
      }
  }
}

void pool_backward_reference(const Attrs& a, std::span<const Tensor* const> in,
                             std::span<Tensor* const> out) {
  const Shape& x = in[0]->shape();
  if (is_general(a))
    general_backward_reference(general_geom("max_pool2d_backward", a, x), *in[0], *in[1], *out[0],
                               x[0] * x[1]);
  else
    pool_backward_planes(*in[0], *in[1], *out[0], 0, x[0] * x[1]);
}

void pool_backward_fast(const Attrs& a, std::span<const Tensor* const> in, std::span<Tensor* const> out,
                        ThreadPool& pool) {
  const Shape& s = in[0]->shape();
  if (is_general(a)) {
    const PoolGeom g = general_geom("max_pool2d_backward", a, s);
    pool.parallel_for(
        s[0] * s[1],
        [&](int64_t p0, int64_t p1) { general_backward_planes(g, *in[0], *in[1], *out[0], p0, p1); },
        plane_grain(s));
    return;
  }
  pool.parallel_for(
      s[0] * s[1], [&](int64_t p0, int64_t p1) { pool_backward_planes(*in[0], *in[1], *out[0], p0, p1); },
      plane_grain(s));
}

}  // namespace

const OpInfo kMaxPool2dOp{.kind = OpKind::MaxPool2d,
                          .name = "max_pool2d",
                          .num_inputs = 1,
                          .num_outputs = 1,
                          .num_ints = -1,
                          .num_floats = 0,
                          .infer = pool_infer,
                          .reference = pool_reference,
                          .fast = pool_fast,
                          .vjp = pool_vjp,
                          .float64 = f64::selected<OpKind::MaxPool2d>,
                          .float64_spread = Float64Spread::Exact};
const OpInfo kMaxPool2dBackwardOp{.kind = OpKind::MaxPool2dBackward,
                                  .name = "max_pool2d_backward",
                                  .num_inputs = 2,
                                  .num_outputs = 1,
                                  .num_ints = -1,
                                  .num_floats = 0,
                                  .infer = pool_backward_infer,
                                  .reference = pool_backward_reference,
                                  .fast = pool_backward_fast,
                                  .vjp = nullptr,
                                  .float64 = f64::max_pool2d_backward,
                                  .float64_spread = Float64Spread::Exact};

}  // namespace tribunal
