// Kernels of gradient clipping: sum_squares and clip_coefficient, one warp each (docs/numerics.md
// "Gradient clipping"); scale is elementwise (dense.cuh).
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

/// out[0] = canonical sum of the rounded products x[i]·x[i].
TRIBUNAL_KERNEL void sum_squares_kernel(const float* x, float* out, int64_t n) {
  const float total = warp_sum(n, [=](int64_t i) { return x[i] * x[i]; });
  if (simt::thread_idx().x == 0) out[0] = total;
}

/// out[0] = min(1, max_norm / (sqrt(canonical sum of s) + 1e-6)), NaN kept (clip.cpp's clip_reference).
TRIBUNAL_KERNEL void clip_coefficient_kernel(const float* s, float* out, int64_t count, float max_norm) {
  const float total = warp_sum(count, [=](int64_t i) { return s[i]; });
  if (simt::thread_idx().x == 0) {
    const float c = max_norm / (sqrtf(total) + 1e-6f);
    out[0] = c > 1.0f ? 1.0f : c;
  }
}

}  // namespace

void launch_sum_squares(const float* x, float* out, int64_t n) {
  TRIBUNAL_LAUNCH(sum_squares_kernel, simt::Dim3(1), simt::Dim3(kWarp), x, out, n);
}

void launch_clip_coefficient(const float* s, float* out, int64_t count, float max_norm) {
  TRIBUNAL_LAUNCH(clip_coefficient_kernel, simt::Dim3(1), simt::Dim3(kWarp), s, out, count, max_norm);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
