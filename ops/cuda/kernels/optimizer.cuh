// Kernels of the optimizers sgd_momentum and adamw (docs/numerics.md "SGD with momentum", "AdamW"):
// one thread per element, the reference's operation sequence, fma32 exactly where it writes fma.
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

TRIBUNAL_KERNEL void sgd_momentum_kernel(const float* p, const float* g, const float* v, float* p2, float* v2,
                                         int64_t n, float lr, float mu, float wd) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    const float gi = wd != 0.0f ? fma32(wd, p[i], g[i]) : g[i];
    const float vi = fma32(mu, v[i], gi);
    v2[i] = vi;
    p2[i] = fma32(-lr, vi, p[i]);
  }
}

/// b^t by square-and-multiply over the bits of t from the lowest (optimizer.cpp's powi).
TRIBUNAL_DEVICE float powi(float b, int64_t t) {
  float result = 1.0f;
  for (float base = b; t > 0; t >>= 1) {
    if (t & 1) result = result * base;
    base = base * base;
  }
  return result;
}

TRIBUNAL_KERNEL void adamw_kernel(const float* p, const float* g, const float* m, const float* v, float* p2,
                                  float* m2, float* v2, int64_t n, float lr, float b1, float b2, float eps,
                                  float wd, int64_t t) {
  // The per-node scalars, recomputed by every thread with the CPU's operations (cheap, no sync).
  const float bc1 = 1.0f - powi(b1, t), bc2 = 1.0f - powi(b2, t);
  const float step = lr / bc1, sbc2 = sqrtf(bc2), decay = 1.0f - lr * wd;
  const float omb1 = 1.0f - b1, omb2 = 1.0f - b2;
  TRIBUNAL_GRID_STRIDE(i, n) {
    const float p1 = p[i] * decay;
    const float mi = fma32(b1, m[i], omb1 * g[i]);
    const float vi = fma32(b2, v[i], omb2 * (g[i] * g[i]));
    m2[i] = mi;
    v2[i] = vi;
    p2[i] = fma32(-step, mi / (sqrtf(vi) / sbc2 + eps), p1);
  }
}

}  // namespace

void launch_sgd_momentum(const float* p, const float* g, const float* v, float* p2, float* v2, int64_t n,
                         float lr, float mu, float wd) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(sgd_momentum_kernel, elementwise_grid(n), simt::Dim3(kBlock), p, g, v, p2, v2, n, lr, mu,
                  wd);
}

void launch_adamw(const float* p, const float* g, const float* m, const float* v, float* p2, float* m2,
                  float* v2, int64_t n, float lr, float b1, float b2, float eps, float wd, int64_t t) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(adamw_kernel, elementwise_grid(n), simt::Dim3(kBlock), p, g, m, v, p2, m2, v2, n, lr, b1,
                  b2, eps, wd, t);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
