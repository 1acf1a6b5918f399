// Kernels of unary and unary_backward: one thread per element running ops/unary.h's formula, the same
// code the CPU kernels run (the project's own float32 functions of ops/math.h; sqrt is __fsqrt_rn, the
// correctly rounded IEEE square root). Orders: docs/numerics.md "Elementwise functions".
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"
#include "ops/unary.h"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

TRIBUNAL_KERNEL void unary_kernel(const float* x, float* y, int64_t fn, float p, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = unary32(fn, x[i], p);
}

TRIBUNAL_KERNEL void unary_backward_kernel(const float* x, const float* y, const float* dy, float* dx,
                                           int64_t fn, float p, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) dx[i] = unary_grad32(fn, x[i], y[i], dy[i], p);
}

}  // namespace

void launch_unary(const float* x, float* y, int64_t fn, float p, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(unary_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, fn, p, n);
}

void launch_unary_backward(const float* x, const float* y, const float* dy, float* dx, int64_t fn, float p,
                           int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(unary_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, dy, dx, fn, p, n);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
