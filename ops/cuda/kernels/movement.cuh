// Kernels of the data-movement ops (transpose, slice, slice_backward, concat): one thread per element
// of the copy, moving it between the offsets of ops/movement.h's geometry, shared with the CPU's fast
// kernels. Pure copies: bitwise the CPU reference's (docs/numerics.md "Data movement: transpose, slice,
// concat").
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"
#include "ops/movement.h"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

TRIBUNAL_KERNEL void strided_copy_kernel(const float* src, float* dst, CopyGeom g, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) dst[copy_dst_offset(g, i)] = src[copy_src_offset(g, i)];
}

/// One thread per dx element: its dy element, or +0 where the slice skipped the position.
TRIBUNAL_KERNEL void slice_backward_kernel(const float* dy, float* dx, SliceBackGeom g, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    const int64_t src = slice_backward_source(g, i);
    dx[i] = src < 0 ? 0.0f : dy[src];
  }
}

}  // namespace

void launch_strided_copy(const float* src, float* dst, const CopyGeom& g) {
  const CopyGeom c = coalesce(g);
  const int64_t n = c.dims[0] * c.dims[1] * c.dims[2] * c.dims[3];
  if (n == 0) return;
  TRIBUNAL_LAUNCH(strided_copy_kernel, elementwise_grid(n), simt::Dim3(kBlock), src, dst, c, n);
}

void launch_slice_backward(const float* dy, float* dx, const SliceBackGeom& g) {
  const int64_t n = g.outer * g.full * g.inner;
  if (n == 0) return;
  TRIBUNAL_LAUNCH(slice_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), dy, dx, g, n);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
