// Kernels of batch normalization in training mode, its backward and the running statistics' update
// (docs/numerics.md "Batch normalization"): one warp per channel, whose lane l accumulates the CPU's lane l
// of each canonical sum over the channel's M = N·S elements in the order k = n·S + s, folded by the canonical
// warp tree; the elementwise outputs are written by the warp's lanes, k = lane, lane + 32, …. The inference
// form runs one thread per element.
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

/// The flat index of element k of channel ch in x[n, c, s].
TRIBUNAL_DEVICE int64_t bn_index(int64_t ch, int64_t k, int64_t c, int64_t s) {
  return ((k / s) * c + ch) * s + k % s;
}

/// mean and Σ(x − mean)² of channel ch in every lane of the calling warp (batch_norm.cpp's channel_stats).
TRIBUNAL_DEVICE void warp_channel_stats(const float* x, int64_t ch, int64_t c, int64_t s, int64_t m,
                                        float& mean, float& sum_sq) {
  const float mf = static_cast<float>(m);
  const float mu = warp_sum(m, [=](int64_t k) { return x[bn_index(ch, k, c, s)]; }) / mf;
  sum_sq = warp_sum(m, [=](int64_t k) {
    const float d = x[bn_index(ch, k, c, s)] - mu;
    return d * d;
  });
  mean = mu;
}

TRIBUNAL_KERNEL void batch_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                       int64_t c, int64_t s, int64_t m, float eps) {
  const int64_t ch = warp_row();
  if (ch >= c) return;  // uniform over the warp
  float mean, sum_sq;
  warp_channel_stats(x, ch, c, s, m, mean, sum_sq);
  const float rstd = 1.0f / sqrtf(sum_sq / static_cast<float>(m) + eps);
  for (int64_t k = simt::thread_idx().x; k < m; k += kWarp) {
    const int64_t i = bn_index(ch, k, c, s);
    y[i] = fma32((x[i] - mean) * rstd, gamma[ch], beta[ch]);
  }
}

TRIBUNAL_KERNEL void batch_norm_backward_kernel(const float* x, const float* gamma, const float* dy,
                                                float* dx, float* dgamma, float* dbeta, int64_t c, int64_t s,
                                                int64_t m, float eps) {
  const int64_t ch = warp_row();
  if (ch >= c) return;
  float mean, sum_sq;
  warp_channel_stats(x, ch, c, s, m, mean, sum_sq);
  const float mf = static_cast<float>(m);
  const float rstd = 1.0f / sqrtf(sum_sq / mf + eps);
  const float gm = gamma[ch];
  const float a = warp_sum(m, [=](int64_t k) { return dy[bn_index(ch, k, c, s)] * gm; }) / mf;
  const float b = warp_sum(m,
                           [=](int64_t k) {
                             const int64_t i = bn_index(ch, k, c, s);
                             return (dy[i] * gm) * ((x[i] - mean) * rstd);
                           }) /
                  mf;
  for (int64_t k = simt::thread_idx().x; k < m; k += kWarp) {
    const int64_t i = bn_index(ch, k, c, s);
    dx[i] = rstd * ((dy[i] * gm - a) - ((x[i] - mean) * rstd) * b);
  }
  const float dg = warp_sum(m, [=](int64_t k) {
    const int64_t i = bn_index(ch, k, c, s);
    return dy[i] * ((x[i] - mean) * rstd);
  });
  const float db = warp_sum(m, [=](int64_t k) { return dy[bn_index(ch, k, c, s)]; });
  if (simt::thread_idx().x == 0) {
    dgamma[ch] = dg;
    dbeta[ch] = db;
  }
}

/// running'[ch] = running[ch]·momentum + stat·(1 − momentum) (batch_norm.cpp's running_channel).
TRIBUNAL_KERNEL void batch_norm_running_kernel(const float* running, const float* x, float* out, int64_t c,
                                               int64_t s, int64_t m, int64_t stat, float momentum) {
  const int64_t ch = warp_row();
  if (ch >= c) return;
  float mean, sum_sq;
  warp_channel_stats(x, ch, c, s, m, mean, sum_sq);
  const float v = stat == 0   ? mean
                  : stat == 1 ? sum_sq / static_cast<float>(m)
                              : sum_sq / static_cast<float>(m - 1);
  const float take = 1.0f - momentum;
  if (simt::thread_idx().x == 0) out[ch] = running[ch] * momentum + v * take;
}

TRIBUNAL_KERNEL void batch_norm_inference_kernel(const float* x, const float* gamma, const float* beta,
                                                 const float* mean, const float* var, float* y, int64_t c,
                                                 int64_t s, int64_t n, float eps) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    const int64_t ch = (i / s) % c;
    const float rstd = 1.0f / sqrtf(var[ch] + eps);
    y[i] = fma32((x[i] - mean[ch]) * rstd, gamma[ch], beta[ch]);
  }
}

}  // namespace

void launch_batch_norm_running(const float* running, const float* x, float* out, int64_t c, int64_t s,
                               int64_t m, int64_t stat, float momentum) {
  if (c == 0 || m == 0) return;
  TRIBUNAL_LAUNCH(batch_norm_running_kernel, row_grid(c), row_block(), running, x, out, c, s, m, stat,
                  momentum);
}

void launch_batch_norm_inference(const float* x, const float* gamma, const float* beta, const float* mean,
                                 const float* var, float* y, int64_t c, int64_t s, int64_t n, float eps) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(batch_norm_inference_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, gamma, beta, mean,
                  var, y, c, s, n, eps);
}

void launch_batch_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t c, int64_t s,
                       int64_t m, float eps) {
  if (c == 0 || m == 0) return;
  TRIBUNAL_LAUNCH(batch_norm_kernel, row_grid(c), row_block(), x, gamma, beta, y, c, s, m, eps);
}

void launch_batch_norm_backward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                                float* dbeta, int64_t c, int64_t s, int64_t m, float eps) {
  if (c == 0 || m == 0) return;
  TRIBUNAL_LAUNCH(batch_norm_backward_kernel, row_grid(c), row_block(), x, gamma, dy, dx, dgamma, dbeta, c, s,
                  m, eps);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
