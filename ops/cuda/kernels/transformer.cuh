// Kernels of the transformer ops: embedding and its backward, layer_norm and its backward, gelu and its
// backward, the attention softmax (causal mask) and its backward, dropout and its backward
// (docs/numerics.md, one section each). Row reductions run one warp per row; column reductions one
// column per warp of a 32 × 32 block, as sum_rows.
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"
#include "ops/pointwise.h"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

// ---- Embedding ------------------------------------------------------------------------------------

/// y[p, d] = tok[ids[p], d] + pos[p mod T, d]; ids validated by the host (run_cuda).
TRIBUNAL_KERNEL void embedding_kernel(const float* tok, const float* pos, const int64_t* ids, float* y,
                                      int64_t rows, int64_t t, int64_t d) {
  TRIBUNAL_GRID_STRIDE(i, rows * d) {
    const int64_t p = i / d, j = i % d;
    y[i] = tok[ids[p] * d + j] + pos[(p % t) * d + j];
  }
}

/// dtok[v, j] = +0, then + dy[p, j] for every p with ids[p] = v in increasing p: one thread per element,
/// each scanning the ids in order (the contract's sequence, no atomics).
TRIBUNAL_KERNEL void embedding_backward_kernel(const int64_t* ids, const float* dy, float* dtok,
                                               int64_t vocab, int64_t rows, int64_t d) {
  TRIBUNAL_GRID_STRIDE(i, vocab * d) {
    const int64_t v = i / d, j = i % d;
    float acc = 0.0f;
    for (int64_t p = 0; p < rows; ++p)
      if (ids[p] == v) acc = acc + dy[p * d + j];
    dtok[i] = acc;
  }
}

// ---- LayerNorm --------------------------------------------------------------------------------------

/// mean and rstd of one row in every lane of the calling warp (layer_norm.cpp's stats_scalar):
/// mean = Σx/Df; rstd = 1/sqrt(Σ(x−mean)²/Df + ε), both sums canonical.
TRIBUNAL_DEVICE void warp_row_stats(const float* x, int64_t d, float eps, float& mean, float& rstd) {
  const float df = static_cast<float>(d);
  const float mu = warp_sum(d, [=](int64_t i) { return x[i]; }) / df;
  const float ss = warp_sum(d, [=](int64_t i) {
    const float di = x[i] - mu;
    return di * di;
  });
  mean = mu;
  rstd = 1.0f / sqrtf(ss / df + eps);
}

TRIBUNAL_KERNEL void layer_norm_kernel(const float* x, const float* gamma, const float* beta, float* y,
                                       int64_t m, int64_t d, float eps) {
  const int64_t r = warp_row();
  if (r >= m) return;  // uniform over the warp
  const float* xr = x + r * d;
  float mean, rstd;
  warp_row_stats(xr, d, eps, mean, rstd);
  for (int64_t i = simt::thread_idx().x; i < d; i += kWarp)
    y[r * d + i] = fma32((xr[i] - mean) * rstd, gamma[i], beta[i]);
}

/// dx of each row and its statistics (stats[2r] = mean, stats[2r+1] = rstd) for the column kernel.
TRIBUNAL_KERNEL void layer_norm_dx_kernel(const float* x, const float* gamma, const float* dy, float* dx,
                                          float* stats, int64_t m, int64_t d, float eps) {
  const int64_t r = warp_row();
  if (r >= m) return;
  const float *xr = x + r * d, *dyr = dy + r * d;
  float mean, rstd;
  warp_row_stats(xr, d, eps, mean, rstd);
  const float df = static_cast<float>(d);
  const float a = warp_sum(d, [=](int64_t i) { return dyr[i] * gamma[i]; }) / df;
  const float b = warp_sum(d, [=](int64_t i) { return (dyr[i] * gamma[i]) * ((xr[i] - mean) * rstd); }) / df;
  for (int64_t i = simt::thread_idx().x; i < d; i += kWarp) {
    const float g = dyr[i] * gamma[i];
    dx[r * d + i] = rstd * ((g - a) - ((xr[i] - mean) * rstd) * b);
  }
  if (simt::thread_idx().x == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = rstd;
  }
}

/// dγ[j] = canonical sum over rows of dy·x̂, dβ[j] = canonical sum over rows of dy: block = 32 columns ×
/// 32 lanes, lane partials through shared memory, folded by warp w for column col0 + w (as sum_rows).
TRIBUNAL_KERNEL void layer_norm_columns_kernel(const float* x, const float* dy, const float* stats,
                                               float* dgamma, float* dbeta, int64_t m, int64_t d) {
  TRIBUNAL_SHARED float part_g[kWarp][kWarp + 1];
  TRIBUNAL_SHARED float part_b[kWarp][kWarp + 1];
  const int cx = static_cast<int>(simt::thread_idx().x), lane = static_cast<int>(simt::thread_idx().y);
  const int64_t col0 = int64_t{simt::block_idx().x} * kWarp, j = col0 + cx;
  float pg = 0.0f, pb = 0.0f;
  if (j < d) {
    pg = lane_partial_sum(m, lane, [=](int64_t r) {
      return dy[r * d + j] * ((x[r * d + j] - stats[2 * r]) * stats[2 * r + 1]);
    });
    pb = lane_partial_sum(m, lane, [=](int64_t r) { return dy[r * d + j]; });
  }
  part_g[lane][cx] = pg;
  part_b[lane][cx] = pb;
  simt::sync_threads();
  const int w = lane, l = cx;
  const float tg = warp_fold_sum(part_g[l][w]), tb = warp_fold_sum(part_b[l][w]);
  if (l == 0 && col0 + w < d) {
    dgamma[col0 + w] = tg;
    dbeta[col0 + w] = tb;
  }
}

// ---- GELU -------------------------------------------------------------------------------------------

TRIBUNAL_KERNEL void gelu_kernel(const float* x, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = gelu32(x[i]);
}

TRIBUNAL_KERNEL void gelu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) dx[i] = gelu_grad32(x[i], dy[i]);
}

// ---- Softmax (attention) ----------------------------------------------------------------------------

/// Valid columns of row `row` (global row index) of an R×N block: n ≤ r when causal.
TRIBUNAL_DEVICE int64_t valid_columns(int64_t row, int64_t r_, int64_t n, bool causal) {
  const int64_t r = row % r_;
  return causal ? (r + 1 < n ? r + 1 : n) : n;
}

TRIBUNAL_KERNEL void softmax_kernel(const float* x, float* y, int64_t rows, int64_t r_, int64_t n,
                                    bool causal, float scale) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int64_t nv = valid_columns(row, r_, n, causal);
  const float* xr = x + row * n;
  const float m = warp_row_max(nv, [=](int64_t j) { return scale * xr[j]; });
  const float s = warp_sum(nv, [=](int64_t j) { return exp32(scale * xr[j] - m); });
  for (int64_t j = simt::thread_idx().x; j < n; j += kWarp)
    y[row * n + j] = j < nv ? exp32(scale * xr[j] - m) / s : 0.0f;  // exp32 is pure: the bits the sum used
}

TRIBUNAL_KERNEL void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t rows,
                                             int64_t r_, int64_t n, bool causal, float scale) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int64_t nv = valid_columns(row, r_, n, causal);
  const float *yr = y + row * n, *dyr = dy + row * n;
  const float d = warp_sum(nv, [=](int64_t j) { return yr[j] * dyr[j]; });
  for (int64_t j = simt::thread_idx().x; j < n; j += kWarp)
    dx[row * n + j] = j < nv ? scale * (yr[j] * (dyr[j] - d)) : 0.0f;
}

// ---- Dropout ----------------------------------------------------------------------------------------

/// y = keep ? x·s : +0 with s = 1/(1 − p) (rounded once, recomputed by every thread with the CPU's
/// operations); the mask is Philox of the element index (ops/pointwise.h), so forward and backward agree.
TRIBUNAL_KERNEL void dropout_kernel(const float* x, float* y, int64_t n, uint64_t seed, uint32_t step,
                                    uint32_t site, float p) {
  const float s = 1.0f / (1.0f - p);
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = dropout_keep(seed, step, site, p, i) ? x[i] * s : 0.0f;
}

}  // namespace

void launch_embedding(const float* tok, const float* pos, const int64_t* ids, float* y, int64_t rows,
                      int64_t t, int64_t d) {
  if (rows * d == 0) return;
  TRIBUNAL_LAUNCH(embedding_kernel, elementwise_grid(rows * d), simt::Dim3(kBlock), tok, pos, ids, y, rows, t,
                  d);
}

void launch_embedding_backward(const int64_t* ids, const float* dy, float* dtok, int64_t vocab, int64_t rows,
                               int64_t d) {
  if (vocab * d == 0) return;
  TRIBUNAL_LAUNCH(embedding_backward_kernel, elementwise_grid(vocab * d), simt::Dim3(kBlock), ids, dy, dtok,
                  vocab, rows, d);
}

void launch_layer_norm(const float* x, const float* gamma, const float* beta, float* y, int64_t m, int64_t d,
                       float eps) {
  if (m == 0 || d == 0) return;
  TRIBUNAL_LAUNCH(layer_norm_kernel, row_grid(m), row_block(), x, gamma, beta, y, m, d, eps);
}

void launch_layer_norm_backward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                                float* dbeta, float* stats, int64_t m, int64_t d, float eps) {
  if (d == 0) return;
  if (m > 0)
    TRIBUNAL_LAUNCH(layer_norm_dx_kernel, row_grid(m), row_block(), x, gamma, dy, dx, stats, m, d, eps);
  TRIBUNAL_LAUNCH(layer_norm_columns_kernel, simt::Dim3(static_cast<unsigned>((d + kWarp - 1) / kWarp)),
                  simt::Dim3(kWarp, kWarp), x, dy, stats, dgamma, dbeta, m, d);
}

void launch_gelu(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(gelu_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, n);
}

void launch_gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(gelu_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, dy, dx, n);
}

void launch_softmax(const float* x, float* y, int64_t rows, int64_t r, int64_t n, bool causal, float scale) {
  if (rows == 0 || n == 0) return;
  TRIBUNAL_LAUNCH(softmax_kernel, row_grid(rows), row_block(), x, y, rows, r, n, causal, scale);
}

void launch_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t r, int64_t n,
                             bool causal, float scale) {
  if (rows == 0 || n == 0) return;
  TRIBUNAL_LAUNCH(softmax_backward_kernel, row_grid(rows), row_block(), y, dy, dx, rows, r, n, causal, scale);
}

void launch_dropout(const float* x, float* y, int64_t n, uint64_t seed, uint32_t step, uint32_t site,
                    float p) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(dropout_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, n, seed, step, site, p);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
