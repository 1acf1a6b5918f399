// Kernels of broadcast_binary (one thread per output element: one float32 operation on its two sources)
// and sum_to_shape (one warp per output element: lane l accumulates the CPU's lane l of the canonical sum
// over the element's sources in increasing flat index of x, then the canonical warp fold). The element
// maps are ops/broadcast.h's, shared with the CPU. Orders: docs/numerics.md "Broadcasting arithmetic".
#pragma once

#include "ops/broadcast.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

TRIBUNAL_KERNEL void broadcast_binary_kernel(const float* a, const float* b, float* y, BinaryGeom g, int code,
                                             int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    const float x = a[broadcast_offset(g.dims, g.sa, i)], z = b[broadcast_offset(g.dims, g.sb, i)];
    y[i] = code == 0 ? x + z : code == 1 ? x - z : code == 2 ? x * z : x / z;
  }
}

TRIBUNAL_KERNEL void sum_to_shape_kernel(const float* x, float* y, SumGeom g, bool negate, int64_t rows) {
  const int64_t row = warp_row();
  if (row >= rows) return;  // the whole warp leaves together
  const int64_t base = broadcast_offset(g.out_dims, g.out_strides, row);
  const float s =
      warp_sum(g.n, [=](int64_t i) { return x[base + broadcast_offset(g.red_dims, g.red_strides, i)]; });
  if (simt::thread_idx().x == 0) y[row] = negate ? -s : s;
}

}  // namespace

void launch_broadcast_binary(const float* a, const float* b, float* y, const BinaryGeom& g, int code,
                             int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(broadcast_binary_kernel, elementwise_grid(n), simt::Dim3(kBlock), a, b, y, g, code, n);
}

void launch_sum_to_shape(const float* x, float* y, const SumGeom& g, bool negate, int64_t rows) {
  if (rows == 0) return;
  TRIBUNAL_LAUNCH(sum_to_shape_kernel, row_grid(rows), row_block(), x, y, g, negate, rows);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
