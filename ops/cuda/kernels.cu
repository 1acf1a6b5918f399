// Device kernels of the CUDA backend (docs/cuda.md). Each one is written to perform, per output
// element, the exact sequence of IEEE binary32 operations of the CPU reference kernel in
// ops/kernels/*.cpp (docs/numerics.md). Rules kept everywhere:
//  * one writer per output element, no atomics, no split-K, no tensor cores, no TF32;
//  * sums use the canonical 32-lane reduction (ops/reduce.h): a warp's lane j is the CPU's lane j
//    (ops/cuda/lanes.h), folded by __shfl_down_sync in the CPU's tree order;
//  * exp32/log32/fma32 are the shared TRIBUNAL_HD functions of ops/math.h (never CUDA intrinsics);
//  * compiled with -fmad=false -prec-div=true -prec-sqrt=true -ftz=false (ops/cuda/CMakeLists.txt),
//    so a*b+c is never contracted, ÷ and sqrt are correctly rounded and subnormals are kept.
// STATUS: compiled, never run on a GPU — equality with the CPU is unverified.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/cuda/device_buffer.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/lanes.h"
#include "ops/math.h"

namespace tribunal::cuda {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kBlock = 256;  // threads per block of the elementwise kernels

/// Blocks for a grid-stride loop over n elements (capped; the loop covers the rest).
unsigned elementwise_blocks(int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(blocks, 1), int64_t{1} << 20));
}

void check_launch(const char* kernel) { check(cudaGetLastError(), kernel, __FILE__, __LINE__); }

// ---- Warp primitives ------------------------------------------------------------------------------

/// The canonical reduction's tree over the 32 lanes of a warp: for w = 16, 8, 4, 2, 1,
/// lane[j] = lane[j] + lane[j + w]. Lane 0 returns the sum (other lanes hold partial garbage).
__device__ float warp_fold_sum(float v) {
  for (int w = kWarp / 2; w >= 1; w /= 2) v = v + __shfl_down_sync(kFullMask, v, w);
  return v;
}

/// The best MaxPick over the warp, in every lane (a selection, so the butterfly order cannot matter).
__device__ MaxPick warp_max_pick(MaxPick p) {
  for (int off = kWarp / 2; off >= 1; off /= 2) {
    MaxPick other;
    other.value = __shfl_xor_sync(kFullMask, p.value, off);
    other.index = static_cast<int64_t>(__shfl_xor_sync(kFullMask, static_cast<long long>(p.index), off));
    p = combine_max_pick(p, other);
  }
  return p;
}

/// The CPU's softmax_row for the row the calling warp owns: sets m (sequential maximum) and returns s
/// (canonical sum of exp32(z[j] − m)) in every lane.
__device__ float warp_softmax_row(const float* row, int64_t classes, int lane, float& m) {
  m = row_max(row, warp_max_pick(lane_max_pick(row, classes, lane)));
  const float mm = m;
  const float part = lane_partial_sum(classes, lane, [=](int64_t j) { return exp32(row[j] - mm); });
  return __shfl_sync(kFullMask, warp_fold_sum(part), 0);
}

// ---- Gather ---------------------------------------------------------------------------------------

__global__ void gather_kernel(const float* table, const int64_t* idx, float* out, int64_t batch, int64_t row) {
  const int64_t total = batch * row;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total; e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = e / row, j = e % row;
    out[e] = table[idx[b] * row + j];
  }
}

// ---- Matmul / Linear: a tiled SIMT GEMM, each output element one sequential-k fma chain ------------
//
// A 64×64 tile of C per block of 16×16 threads; thread (tx, ty) owns the 4×4 elements
// (row0 + ty + 16r, col0 + tx + 16c). K advances in slices of 16 through shared memory, in order; in
// a slice the thread runs p = 0 .. kb−1 in order, so element (i, j) sees exactly
//   acc = bias ? bias[j] : +0;  acc = fma(op(A)(i,p), op(B)(p,j), acc) for p = 0..K−1
// — matmul_reference's chain. The last slice runs only its kb = K − k0 valid steps: padding with
// fma(0, 0, acc) would turn an accumulator of −0 into +0. Out-of-range rows and columns are loaded as
// 0 and never stored.

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kThreadsSide = 16, kMicro = 4;
static_assert(kThreadsSide * kMicro == kTileM && kThreadsSide * kMicro == kTileN, "tile shape");

__global__ void __launch_bounds__(kThreadsSide* kThreadsSide)
    matmul_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ bias,
                  float* __restrict__ c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  __shared__ float as[kTileK][kTileM + 1];  // as[p][i] = op(A)(row0 + i, k0 + p)
  __shared__ float bs[kTileK][kTileN + 1];  // bs[p][j] = op(B)(k0 + p, col0 + j)
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kThreadsSide + tx;
  const int64_t row0 = int64_t{blockIdx.y} * kTileM, col0 = int64_t{blockIdx.x} * kTileN;

  float acc[kMicro][kMicro];
#pragma unroll
  for (int r = 0; r < kMicro; ++r)
#pragma unroll
    for (int q = 0; q < kMicro; ++q) {
      const int64_t j = col0 + tx + kThreadsSide * q;
      acc[r][q] = (bias != nullptr && j < n) ? bias[j] : 0.0f;
    }

  for (int64_t k0 = 0; k0 < k; k0 += kTileK) {
    const int kb = static_cast<int>(k - k0 < kTileK ? k - k0 : kTileK);
    // Load the slices (pure copies). The index mapping follows the operand's contiguous dimension so
    // that neighbouring threads read neighbouring addresses.
    for (int e = tid; e < kTileK * kTileM; e += kThreadsSide * kThreadsSide) {
      const int p = trans_a ? e / kTileM : e % kTileK;
      const int i = trans_a ? e % kTileM : e / kTileK;
      const int64_t gi = row0 + i, gp = k0 + p;
      float v = 0.0f;
      if (gi < m && p < kb) v = trans_a ? a[gp * m + gi] : a[gi * k + gp];
      as[p][i] = v;
    }
    for (int e = tid; e < kTileK * kTileN; e += kThreadsSide * kThreadsSide) {
      const int p = trans_b ? e % kTileK : e / kTileN;
      const int j = trans_b ? e / kTileK : e % kTileN;
      const int64_t gj = col0 + j, gp = k0 + p;
      float v = 0.0f;
      if (gj < n && p < kb) v = trans_b ? b[gj * k + gp] : b[gp * n + gj];
      bs[p][j] = v;
    }
    __syncthreads();
    for (int p = 0; p < kb; ++p) {  // sequential k: the chain continues across slices unchanged
      float av[kMicro], bv[kMicro];
#pragma unroll
      for (int r = 0; r < kMicro; ++r) av[r] = as[p][ty + kThreadsSide * r];
#pragma unroll
      for (int q = 0; q < kMicro; ++q) bv[q] = bs[p][tx + kThreadsSide * q];
#pragma unroll
      for (int r = 0; r < kMicro; ++r)
#pragma unroll
        for (int q = 0; q < kMicro; ++q) acc[r][q] = fma32(av[r], bv[q], acc[r][q]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < kMicro; ++r)
#pragma unroll
    for (int q = 0; q < kMicro; ++q) {
      const int64_t i = row0 + ty + kThreadsSide * r, j = col0 + tx + kThreadsSide * q;
      if (i < m && j < n) c[i * n + j] = acc[r][q];  // one writer per element
    }
}

// ---- SumRows: canonical sum down each column ------------------------------------------------------
//
// Block (32 columns × 32 lanes). Phase 1: thread (cx, lane) accumulates lane `lane` of column
// col0 + cx — rows lane, lane + 32, … in order from +0 (reads of one row are coalesced over cx).
// Phase 2: warp w takes column col0 + w's 32 lane partials from shared memory (its lane l holds the
// CPU's lane l) and folds them with the shuffle tree.

__global__ void sum_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t m, int64_t n) {
  __shared__ float part[kWarp][kWarp + 1];  // part[lane][column offset]
  const int cx = threadIdx.x, lane = threadIdx.y;
  const int64_t col0 = int64_t{blockIdx.x} * kWarp;
  const int64_t j = col0 + cx;
  float acc = 0.0f;
  if (j < n) acc = lane_partial_sum(m, lane, [=](int64_t i) { return x[i * n + j]; });
  part[lane][cx] = acc;
  __syncthreads();
  const int w = threadIdx.y, l = threadIdx.x;  // warp w = the threads with threadIdx.y == w
  const float total = warp_fold_sum(part[l][w]);
  if (l == 0 && col0 + w < n) y[col0 + w] = total;
}

// ---- Elementwise ----------------------------------------------------------------------------------

#define TRIBUNAL_GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// relu selects the bits of x or of +0: written as a plain float select, NVVM turns it into max.f32(x, 0),
// whose choice between −0 and +0 the PTX ISA does not pin down; the CPU's answer for −0 is +0. The
// integer select keeps the exact comparison and the exact result (checked in the PTX: no max.f32).
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = float_from_bits(x[i] > 0.0f ? float_bits(x[i]) : 0u);
}

__global__ void relu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

// ---- Softmax cross-entropy: one warp per row, then one warp for the mean ---------------------------

constexpr int kRowsPerBlock = 4;  // blockDim = (32, 4): warp threadIdx.y owns one row

__global__ void softmax_nll_kernel(const float* __restrict__ z, const int64_t* __restrict__ labels,
                                   float* __restrict__ nll, int64_t batch, int64_t classes) {
  const int lane = threadIdx.x;
  const int64_t b = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.y;
  if (b >= batch) return;  // uniform over the warp: every shuffle below has all 32 lanes
  const float* row = z + b * classes;
  float m;
  const float s = warp_softmax_row(row, classes, lane, m);
  if (lane == 0) nll[b] = log32(s) - (row[labels[b]] - m);
}

__global__ void mean_kernel(const float* __restrict__ nll, float* __restrict__ loss, int64_t batch) {
  const int lane = threadIdx.x;
  const float part = lane_partial_sum(batch, lane, [=](int64_t i) { return nll[i]; });
  const float total = warp_fold_sum(part);
  if (lane == 0) loss[0] = total / static_cast<float>(batch);
}

__global__ void softmax_backward_kernel(const float* __restrict__ z, const int64_t* __restrict__ labels,
                                        const float* __restrict__ dloss, float* __restrict__ dz, int64_t batch,
                                        int64_t classes) {
  const int lane = threadIdx.x;
  const int64_t b = int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.y;
  if (b >= batch) return;
  const float scale = dloss[0] / static_cast<float>(batch);
  const float* row = z + b * classes;
  float m;
  const float s = warp_softmax_row(row, classes, lane, m);
  const int64_t y = labels[b];
  for (int64_t j = lane; j < classes; j += kWarp) {
    const float e = exp32(row[j] - m);  // the same bits the sum used: exp32 is a pure function
    dz[b * classes + j] = (e / s - (j == y ? 1.0f : 0.0f)) * scale;
  }
}

// ---- Optimizers -----------------------------------------------------------------------------------

__global__ void sgd_momentum_kernel(const float* p, const float* g, const float* v, float* p2, float* v2,
                                    int64_t n, float lr, float mu, float wd) {
  TRIBUNAL_GRID_STRIDE(i, n) {
    const float gi = wd != 0.0f ? fma32(wd, p[i], g[i]) : g[i];
    const float vi = fma32(mu, v[i], gi);
    v2[i] = vi;
    p2[i] = fma32(-lr, vi, p[i]);
  }
}

/// b^t by square-and-multiply over the bits of t from the lowest (optimizer.cpp's powi).
__device__ float powi(float b, int64_t t) {
  float result = 1.0f;
  for (float base = b; t > 0; t >>= 1) {
    if (t & 1) result = result * base;
    base = base * base;
  }
  return result;
}

__global__ void adamw_kernel(const float* p, const float* g, const float* m, const float* v, float* p2, float* m2,
                             float* v2, int64_t n, float lr, float b1, float b2, float eps, float wd, int64_t t) {
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

#undef TRIBUNAL_GRID_STRIDE

}  // namespace

// ---- Launchers ------------------------------------------------------------------------------------

void launch_gather(const float* table, const int64_t* idx, float* out, int64_t batch, int64_t row) {
  if (batch * row == 0) return;
  gather_kernel<<<elementwise_blocks(batch * row), kBlock>>>(table, idx, out, batch, row);
  check_launch("gather_kernel");
}

void launch_matmul(const float* a, const float* b, const float* bias, float* c, int64_t m, int64_t n, int64_t k,
                   bool trans_a, bool trans_b) {
  if (m == 0 || n == 0) return;
  const int64_t tiles_n = (n + kTileN - 1) / kTileN, tiles_m = (m + kTileM - 1) / kTileM;
  if (tiles_m > 65535 || tiles_n > 0x7FFFFFFF)
    throw CudaError("cuda: matmul of " + std::to_string(m) + "×" + std::to_string(n) + " exceeds the grid limits");
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
  const dim3 block(kThreadsSide, kThreadsSide);
  matmul_kernel<<<grid, block>>>(a, b, bias, c, m, n, k, trans_a, trans_b);
  check_launch("matmul_kernel");
}

void launch_sum_rows(const float* x, float* y, int64_t m, int64_t n) {
  if (n == 0) return;
  const dim3 block(kWarp, kWarp);
  sum_rows_kernel<<<static_cast<unsigned>((n + kWarp - 1) / kWarp), block>>>(x, y, m, n);
  check_launch("sum_rows_kernel");
}

void launch_add(const float* a, const float* b, float* y, int64_t n) {
  if (n == 0) return;
  add_kernel<<<elementwise_blocks(n), kBlock>>>(a, b, y, n);
  check_launch("add_kernel");
}

void launch_relu(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  relu_kernel<<<elementwise_blocks(n), kBlock>>>(x, y, n);
  check_launch("relu_kernel");
}

void launch_relu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  if (n == 0) return;
  relu_backward_kernel<<<elementwise_blocks(n), kBlock>>>(x, dy, dx, n);
  check_launch("relu_backward_kernel");
}

void launch_softmax_cross_entropy(const float* z, const int64_t* labels, float* nll, float* loss, int64_t batch,
                                  int64_t classes) {
  const dim3 block(kWarp, kRowsPerBlock);
  softmax_nll_kernel<<<static_cast<unsigned>((batch + kRowsPerBlock - 1) / kRowsPerBlock), block>>>(
      z, labels, nll, batch, classes);
  check_launch("softmax_nll_kernel");
  mean_kernel<<<1, kWarp>>>(nll, loss, batch);  // second pass in fixed order: no atomics
  check_launch("mean_kernel");
}

void launch_softmax_cross_entropy_backward(const float* z, const int64_t* labels, const float* dloss, float* dz,
                                           int64_t batch, int64_t classes) {
  const dim3 block(kWarp, kRowsPerBlock);
  softmax_backward_kernel<<<static_cast<unsigned>((batch + kRowsPerBlock - 1) / kRowsPerBlock), block>>>(
      z, labels, dloss, dz, batch, classes);
  check_launch("softmax_backward_kernel");
}

void launch_sgd_momentum(const float* p, const float* g, const float* v, float* p2, float* v2, int64_t n, float lr,
                         float mu, float wd) {
  if (n == 0) return;
  sgd_momentum_kernel<<<elementwise_blocks(n), kBlock>>>(p, g, v, p2, v2, n, lr, mu, wd);
  check_launch("sgd_momentum_kernel");
}

void launch_adamw(const float* p, const float* g, const float* m, const float* v, float* p2, float* m2, float* v2,
                  int64_t n, float lr, float b1, float b2, float eps, float wd, int64_t t) {
  if (n == 0) return;
  adamw_kernel<<<elementwise_blocks(n), kBlock>>>(p, g, m, v, p2, m2, v2, n, lr, b1, b2, eps, wd, t);
  check_launch("adamw_kernel");
}

}  // namespace tribunal::cuda
