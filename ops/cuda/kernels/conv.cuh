// Kernels of conv2d (groups, dilation, per-axis strides and pads), its three gradients and 2×2 max pooling
// (docs/numerics.md "Convolution", "Max pooling"). Direct kernels, one thread per output element, each
// running the contract's chain in its order with the padded taps as +0 terms (not im2col + GEMM: simpler, the
// same bits, slower). Windows of the pooling: pool_window and pool_choice, and for a general window
// pool_choice_at and pool_grad_at (ops/pointwise.h), shared with the CPU. Global average pooling: one warp
// per plane.
#pragma once

#include "ops/conv_elements.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"
#include "ops/pointwise.h"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

// The chains themselves are ops/conv_elements.h's, shared with the CPU reference kernels.

TRIBUNAL_KERNEL void conv2d_kernel(const float* x, const float* w, const float* b, float* y, ConvGeom g) {
  TRIBUNAL_GRID_STRIDE(i, g.n * g.o * g.oh * g.ow) {
    const int64_t ow = i % g.ow, oh = (i / g.ow) % g.oh, o = (i / (g.ow * g.oh)) % g.o,
                  n = i / (g.ow * g.oh * g.o);
    y[i] = conv2d_output(x, w, b, g, n, o, oh, ow);
  }
}

TRIBUNAL_KERNEL void conv2d_backward_input_kernel(const float* w, const float* dy, float* dx, ConvGeom g) {
  TRIBUNAL_GRID_STRIDE(i, g.n * g.c * g.h * g.w) {
    const int64_t ww = i % g.w, h = (i / g.w) % g.h, c = (i / (g.w * g.h)) % g.c, n = i / (g.w * g.h * g.c);
    dx[i] = conv2d_input_grad(w, dy, g, n, c, h, ww);
  }
}

TRIBUNAL_KERNEL void conv2d_backward_weight_kernel(const float* x, const float* dy, float* dw, ConvGeom g) {
  TRIBUNAL_GRID_STRIDE(i, g.o * g.cg() * g.kh * g.kw) {  // dw[O, C/G, KH, KW]
    const int64_t kw = i % g.kw, kh = (i / g.kw) % g.kh, c = (i / (g.kw * g.kh)) % g.cg(),
                  o = i / (g.kw * g.kh * g.cg());
    dw[i] = conv2d_weight_grad(x, dy, g, o, c, kh, kw);
  }
}

/// db[o] = canonical sum of dy[n,o,q] over the sequence i = n·P + q: one warp per channel.
TRIBUNAL_KERNEL void conv2d_backward_bias_kernel(const float* dy, float* db, int64_t n, int64_t o,
                                                 int64_t p) {
  const int64_t oc = warp_row();
  if (oc >= o) return;
  const float total = warp_sum(n * p, [=](int64_t i) { return dy[((i / p) * o + oc) * p + i % p]; });
  if (simt::thread_idx().x == 0) db[oc] = total;
}

// ---- Max pooling --------------------------------------------------------------------------------------

TRIBUNAL_KERNEL void max_pool2d_kernel(const float* x, float* y, int64_t planes, int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  TRIBUNAL_GRID_STRIDE(i, planes * oh * ow) {
    const int64_t s = i % ow, r = (i / ow) % oh, pl = i / (ow * oh);
    float v[4];
    pool_window(x + pl * h * w, w, r, s, v);
    y[i] = v[pool_choice(v)];
  }
}

/// One thread per element of dx: dy of its window if it is the window's chosen element, else +0.
TRIBUNAL_KERNEL void max_pool2d_backward_kernel(const float* x, const float* dy, float* dx, int64_t planes,
                                                int64_t h, int64_t w) {
  const int64_t oh = h / 2, ow = w / 2;
  TRIBUNAL_GRID_STRIDE(i, planes * h * w) {
    const int64_t col = i % w, row = (i / w) % h, pl = i / (w * h);
    float v[4];
    pool_window(x + pl * h * w, w, row / 2, col / 2, v);
    const int k = pool_choice(v);
    dx[i] = k == static_cast<int>((row % 2) * 2 + col % 2) ? dy[(pl * oh + row / 2) * ow + col / 2] : 0.0f;
  }
}

TRIBUNAL_KERNEL void max_pool2d_general_kernel(const float* x, float* y, int64_t planes, PoolGeom g) {
  TRIBUNAL_GRID_STRIDE(i, planes * g.oh * g.ow) {
    const int64_t s = i % g.ow, r = (i / g.ow) % g.oh, pl = i / (g.ow * g.oh);
    const float* plane = x + pl * g.h * g.w;
    y[i] = plane[pool_choice_at(plane, g, r, s)];
  }
}

/// One thread per element of dx: pool_grad_at, the windows that chose it in increasing order.
TRIBUNAL_KERNEL void max_pool2d_general_backward_kernel(const float* x, const float* dy, float* dx,
                                                        int64_t planes, PoolGeom g) {
  TRIBUNAL_GRID_STRIDE(i, planes * g.h * g.w) {
    const int64_t j = i % g.w, r = (i / g.w) % g.h, pl = i / (g.w * g.h);
    dx[i] = pool_grad_at(x + pl * g.h * g.w, dy + pl * g.oh * g.ow, g, r, j);
  }
}

// ---- Global average pooling ----------------------------------------------------------------------------

/// y[pl] = canonical sum of plane pl (warp_sum: the canonical sum's lanes and tree) / float(hw).
TRIBUNAL_KERNEL void global_avg_pool_kernel(const float* x, float* y, int64_t planes, int64_t hw) {
  const int64_t pl = warp_row();
  if (pl >= planes) return;
  const float* p = x + pl * hw;
  const float total = warp_sum(hw, [=](int64_t i) { return p[i]; });
  if (simt::thread_idx().x == 0) y[pl] = total / static_cast<float>(hw);
}

TRIBUNAL_KERNEL void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t planes, int64_t hw) {
  TRIBUNAL_GRID_STRIDE(i, planes * hw) {
    dx[i] = dy[i / hw] / static_cast<float>(hw);
  }
}

}  // namespace

void launch_max_pool2d_general(const float* x, float* y, int64_t planes, const PoolGeom& g) {
  const int64_t n = planes * g.oh * g.ow;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(max_pool2d_general_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, planes, g);
}

void launch_max_pool2d_general_backward(const float* x, const float* dy, float* dx, int64_t planes,
                                        const PoolGeom& g) {
  const int64_t n = planes * g.h * g.w;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(max_pool2d_general_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, dy, dx,
                  planes, g);
}

void launch_global_avg_pool(const float* x, float* y, int64_t planes, int64_t hw) {
  if (planes == 0) return;
  TRIBUNAL_LAUNCH(global_avg_pool_kernel, row_grid(planes), row_block(), x, y, planes, hw);
}

void launch_global_avg_pool_backward(const float* dy, float* dx, int64_t planes, int64_t hw) {
  const int64_t n = planes * hw;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(global_avg_pool_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), dy, dx, planes,
                  hw);
}

void launch_conv2d(const float* x, const float* w, const float* b, float* y, const ConvGeom& g) {
  const int64_t n = g.n * g.o * g.oh * g.ow;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(conv2d_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, w, b, y, g);
}

void launch_conv2d_backward_input(const float* w, const float* dy, float* dx, const ConvGeom& g) {
  const int64_t n = g.n * g.c * g.h * g.w;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(conv2d_backward_input_kernel, elementwise_grid(n), simt::Dim3(kBlock), w, dy, dx, g);
}

void launch_conv2d_backward_weight(const float* x, const float* dy, float* dw, const ConvGeom& g) {
  const int64_t n = g.o * g.cg() * g.kh * g.kw;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(conv2d_backward_weight_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, dy, dw, g);
}

void launch_conv2d_backward_bias(const float* dy, float* db, int64_t n, int64_t o, int64_t p) {
  if (o == 0) return;
  TRIBUNAL_LAUNCH(conv2d_backward_bias_kernel, row_grid(o), row_block(), dy, db, n, o, p);
}

void launch_max_pool2d(const float* x, float* y, int64_t planes, int64_t h, int64_t w) {
  const int64_t n = planes * (h / 2) * (w / 2);
  if (n == 0) return;
  TRIBUNAL_LAUNCH(max_pool2d_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, planes, h, w);
}

void launch_max_pool2d_backward(const float* x, const float* dy, float* dx, int64_t planes, int64_t h,
                                int64_t w) {
  const int64_t n = planes * h * w;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(max_pool2d_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, dy, dx, planes, h,
                  w);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
