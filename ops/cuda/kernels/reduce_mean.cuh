// Kernels of reduce_mean (one warp per output element: lane l accumulates the CPU's lane l of the
// canonical sum along the axis, the canonical warp fold, then one division by float(N)),
// reduce_mean_backward and expand (one thread per output element: one division, or a bit copy through
// ops/broadcast.h's element map). Orders: docs/numerics.md "Mean over an axis; expand".
#pragma once

#include "ops/broadcast.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

TRIBUNAL_KERNEL void reduce_mean_kernel(const float* x, float* y, int64_t dim, int64_t inner, int64_t rows) {
  const int64_t row = warp_row();
  if (row >= rows) return;  // the whole warp leaves together
  const int64_t base = (row / inner) * dim * inner + row % inner;
  const float s = warp_sum(dim, [=](int64_t k) { return x[base + k * inner]; });
  if (simt::thread_idx().x == 0) y[row] = s / static_cast<float>(dim);
}

TRIBUNAL_KERNEL void reduce_mean_backward_kernel(const float* dy, float* dx, int64_t dim, int64_t inner,
                                                 int64_t n) {
  TRIBUNAL_GRID_STRIDE(e, n) {
    dx[e] = dy[(e / (dim * inner)) * inner + e % inner] / static_cast<float>(dim);
  }
}

TRIBUNAL_KERNEL void expand_kernel(const float* x, float* y, BinaryGeom g, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    y[i] = x[broadcast_offset(g.dims, g.sa, i)];
  }
}

}  // namespace

void launch_reduce_mean(const float* x, float* y, int64_t dim, int64_t inner, int64_t rows) {
  if (rows == 0) return;
  TRIBUNAL_LAUNCH(reduce_mean_kernel, row_grid(rows), row_block(), x, y, dim, inner, rows);
}

void launch_reduce_mean_backward(const float* dy, float* dx, int64_t dim, int64_t inner, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(reduce_mean_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), dy, dx, dim, inner,
                  n);
}

void launch_expand(const float* x, float* y, const BinaryGeom& g, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(expand_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, g, n);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
