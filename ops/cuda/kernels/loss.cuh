// Kernels of softmax_cross_entropy and its backward (docs/numerics.md "Softmax cross-entropy"): one
// warp per row, then one warp for the batch mean (a second pass in fixed order, no atomics).
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

/// The CPU's softmax_row for the row the calling warp owns: sets m (sequential maximum) and returns s
/// (canonical sum of exp32(z[j] − m)) in every lane.
TRIBUNAL_DEVICE float warp_softmax_row(const float* row, int64_t classes, float& m) {
  m = warp_row_max(classes, [=](int64_t j) { return row[j]; });
  const float mm = m;
  return warp_sum(classes, [=](int64_t j) { return exp32(row[j] - mm); });
}

TRIBUNAL_KERNEL void softmax_nll_kernel(const float* z, const int64_t* labels, float* nll, int64_t batch,
                                        int64_t classes) {
  const int64_t b = warp_row();
  if (b >= batch) return;  // uniform over the warp: every shuffle below has all 32 lanes
  const float* row = z + b * classes;
  float m;
  const float s = warp_softmax_row(row, classes, m);
  if (simt::thread_idx().x == 0) nll[b] = log32(s) - (row[labels[b]] - m);
}

TRIBUNAL_KERNEL void mean_kernel(const float* nll, float* loss, int64_t batch) {
  const float total = warp_sum(batch, [=](int64_t i) { return nll[i]; });
  if (simt::thread_idx().x == 0) loss[0] = total / static_cast<float>(batch);
}

TRIBUNAL_KERNEL void softmax_ce_backward_kernel(const float* z, const int64_t* labels, const float* dloss,
                                                float* dz, int64_t batch, int64_t classes) {
  const int64_t b = warp_row();
  if (b >= batch) return;
  const float scale = dloss[0] / static_cast<float>(batch);
  const float* row = z + b * classes;
  float m;
  const float s = warp_softmax_row(row, classes, m);
  const int64_t y = labels[b];
  for (int64_t j = simt::thread_idx().x; j < classes; j += kWarp) {
    const float e = exp32(row[j] - m);  // the same bits the sum used: exp32 is a pure function
    dz[b * classes + j] = (e / s - (j == y ? 1.0f : 0.0f)) * scale;
  }
}

}  // namespace

void launch_softmax_cross_entropy(const float* z, const int64_t* labels, float* nll, float* loss,
                                  int64_t batch, int64_t classes) {
  TRIBUNAL_LAUNCH(softmax_nll_kernel, row_grid(batch), row_block(), z, labels, nll, batch, classes);
  TRIBUNAL_LAUNCH(mean_kernel, simt::Dim3(1), simt::Dim3(kWarp), nll, loss, batch);
}

void launch_softmax_cross_entropy_backward(const float* z, const int64_t* labels, const float* dloss,
                                           float* dz, int64_t batch, int64_t classes) {
  TRIBUNAL_LAUNCH(softmax_ce_backward_kernel, row_grid(batch), row_block(), z, labels, dloss, dz, batch,
                  classes);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
