// Kernels of where and where_backward: one thread per output element, a bit copy of the source the
// element selects (or +0), decided by where_true on the condition's bits. The element maps are
// ops/broadcast.h's, shared with the CPU. gather_rows runs on dense.cuh's gather kernel (its ids checked
// on the host). Semantics: docs/numerics.md "Selection: where, gather_rows".
#pragma once

#include "ops/broadcast.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

TRIBUNAL_KERNEL void where_kernel(const float* c, const float* a, const float* b, float* y, TernaryGeom g,
                                  int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    y[i] = where_true(c[broadcast_offset(g.dims, g.sc, i)]) ? a[broadcast_offset(g.dims, g.sa, i)]
                                                            : b[broadcast_offset(g.dims, g.sb, i)];
  }
}

TRIBUNAL_KERNEL void where_backward_kernel(const float* c, const float* dy, float* dx, BinaryGeom g,
                                           bool branch, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    dx[i] = where_true(c[broadcast_offset(g.dims, g.sa, i)]) == branch ? dy[i] : 0.0f;
  }
}

}  // namespace

void launch_where(const float* c, const float* a, const float* b, float* y, const TernaryGeom& g, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(where_kernel, elementwise_grid(n), simt::Dim3(kBlock), c, a, b, y, g, n);
}

void launch_where_backward(const float* c, const float* dy, float* dx, const BinaryGeom& g, bool branch,
                           int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(where_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), c, dy, dx, g, branch, n);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
