// Shared pieces of the kernel sources (ops/cuda/kernels/*.cuh), compiled by nvcc for the GPU
// (ops/cuda/kernels.cu) and by the host compiler for the SIMT emulation (ops/cuda/kernels_emulated.cpp).
// Rules every kernel keeps (docs/cuda.md): one writer per output element, no atomics, no split-K, no
// tensor cores or TF32; each element's operations in the order of docs/numerics.md; exp32, log32,
// tanh32 and fma32 from ops/math.h (never CUDA's intrinsics or libm); sums in the canonical 32-lane
// order, a warp's lane j being the CPU's lane j (ops/cuda/lanes.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "ops/cuda/lanes.h"
#include "ops/cuda/simt.h"
#include "ops/math.h"

namespace tribunal::TRIBUNAL_CUDA_NS {

using namespace ::tribunal::lanes;  // the per-lane halves of the warp algorithms (ops/cuda/lanes.h)

namespace {

/// Threads per block of the one-thread-per-element kernels.
constexpr unsigned kBlock = 256;
/// Rows per block of the one-warp-per-row kernels: blockDim = (32, kRowsPerBlock).
constexpr unsigned kRowsPerBlock = 4;

/// Blocks for a grid-stride loop over n elements (capped; the loop covers the rest).
inline simt::Dim3 elementwise_grid(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return simt::Dim3(static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), int64_t{1} << 20)));
}

/// Blocks of kRowsPerBlock warps for `rows` rows (≥ 1 block).
inline simt::Dim3 row_grid(int64_t rows) {
  const int64_t blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > 0x7FFFFFFF) throw CudaError("cuda: " + std::to_string(rows) + " rows exceed the grid limit");
  return simt::Dim3(static_cast<unsigned>(std::max<int64_t>(blocks, 1)));
}

inline simt::Dim3 row_block() {
  return simt::Dim3(kWarp, kRowsPerBlock);
}

/// The global index of the calling thread in a 1-D launch.
TRIBUNAL_DEVICE int64_t global_index() {
  return int64_t{simt::block_idx().x} * simt::block_dim().x + simt::thread_idx().x;
}
/// The number of threads of a 1-D launch (the grid-stride step).
TRIBUNAL_DEVICE int64_t global_threads() {
  return int64_t{simt::grid_dim().x} * simt::block_dim().x;
}

/// The row of a one-warp-per-row kernel: warp threadIdx.y of block blockIdx.x.
TRIBUNAL_DEVICE int64_t warp_row() {
  return int64_t{simt::block_idx().x} * kRowsPerBlock + simt::thread_idx().y;
}

// ---- Warp algorithms --------------------------------------------------------------------------------

/// The canonical reduction's tree over the 32 lanes of a warp: for w = 16, 8, 4, 2, 1,
/// lane[j] = lane[j] + lane[j + w]. Lane 0 returns the sum (other lanes hold partial sums).
TRIBUNAL_DEVICE float warp_fold_sum(float v) {
  for (unsigned w = kWarp / 2; w >= 1; w /= 2) v = v + simt::shfl_down(v, w);
  return v;
}

/// The canonical sum of f(i), i in [0, n), in every lane of the calling warp (lane = threadIdx.x).
template <class F>
TRIBUNAL_DEVICE float warp_sum(int64_t n, F f) {
  const int lane = static_cast<int>(simt::thread_idx().x);
  return simt::shfl(warp_fold_sum(lane_partial_sum(n, lane, f)), 0);
}

/// The best MaxPick over the warp, in every lane (a selection, so the butterfly order cannot matter).
TRIBUNAL_DEVICE MaxPick warp_max_pick(MaxPick p) {
  for (unsigned off = kWarp / 2; off >= 1; off /= 2) {
    MaxPick other;
    other.value = simt::shfl_xor(p.value, off);
    other.index = simt::shfl_xor(p.index, off);
    p = combine_max_pick(p, other);
  }
  return p;
}

/// The CPU's sequential maximum of f(0..n) (n ≥ 1) — m = f(0); m = f(j) > m ? f(j) : m — in every lane.
template <class F>
TRIBUNAL_DEVICE float warp_row_max(int64_t n, F f) {
  const int lane = static_cast<int>(simt::thread_idx().x);
  return row_max_of(f(0), warp_max_pick(lane_max_pick_of(n, lane, f)));
}

}  // namespace
}  // namespace tribunal::TRIBUNAL_CUDA_NS

/// A grid-stride loop of the calling thread over i in [0, n).
#define TRIBUNAL_GRID_STRIDE(i, n) for (int64_t i = global_index(); i < (n); i += global_threads())
