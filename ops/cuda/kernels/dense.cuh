// Kernels of the dense ops: gather, matmul/linear (rank 2 and batched), sum_rows and the elementwise
// add, relu, relu_backward, scale, plus the pure copies (reshape, split_heads, merge_heads).
// Orders: docs/numerics.md "Dot products", "Canonical reduction", "Ops"; how each keeps them:
// docs/cuda.md.
#pragma once

#include "ops/cuda/kernels.h"
#include "ops/cuda/kernels/common.cuh"

namespace tribunal::TRIBUNAL_CUDA_NS {
namespace {

// ---- Gather and copies ------------------------------------------------------------------------------

TRIBUNAL_KERNEL void gather_kernel(const float* table, const int64_t* idx, float* out, int64_t batch,
                                   int64_t row) {
  TRIBUNAL_GRID_STRIDE(e, batch * row) {
    const int64_t b = e / row, j = e % row;
    out[e] = table[idx[b] * row + j];
  }
}

TRIBUNAL_KERNEL void copy_kernel(const float* x, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = x[i];
}

/// split_heads (to_heads) or merge_heads: y[b·H+h, t, e] = x[b·T+t, h·E+e] or the inverse. One thread
/// per element of the head-major side, i = ((b·H + h)·T + t)·E + e.
TRIBUNAL_KERNEL void heads_kernel(const float* x, float* y, int64_t b_, int64_t t_, int64_t h_, int64_t e_,
                                  bool to_heads) {
  TRIBUNAL_GRID_STRIDE(i, b_ * h_ * t_ * e_) {
    const int64_t e = i % e_, t = (i / e_) % t_, h = (i / (e_ * t_)) % h_, b = i / (e_ * t_ * h_);
    const int64_t flat = (b * t_ + t) * h_ * e_ + h * e_ + e;
    if (to_heads)
      y[i] = x[flat];
    else
      y[flat] = x[i];
  }
}

// ---- Matmul / Linear: a tiled SIMT GEMM, each output element one sequential-k fma chain -------------
//
// A 64×64 tile of C per block of 16×16 threads; thread (tx, ty) owns the 4×4 elements
// (row0 + ty + 16r, col0 + tx + 16c). K advances in slices of 16 through shared memory, in order; in
// a slice the thread runs p = 0 .. kb−1 in order, so element (i, j) sees exactly
//   acc = bias ? bias[j] : +0;  acc = fma(op(A)(i,p), op(B)(p,j), acc) for p = 0..K−1
// — matmul_reference's chain. The last slice runs only its kb = K − k0 valid steps: padding with
// fma(0, 0, acc) would turn an accumulator of −0 into +0. Out-of-range rows and columns are loaded as
// 0 and never stored. blockIdx.z is the batch element of a batched (rank-3) product.

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kThreadsSide = 16, kMicro = 4;
static_assert(kThreadsSide * kMicro == kTileM && kThreadsSide * kMicro == kTileN, "tile shape");

TRIBUNAL_KERNEL void matmul_kernel(const float* a, const float* b, const float* bias, float* c, int64_t m,
                                   int64_t n, int64_t k, bool trans_a, bool trans_b) {
  TRIBUNAL_SHARED float as[kTileK][kTileM + 1];  // as[p][i] = op(A)(row0 + i, k0 + p)
  TRIBUNAL_SHARED float bs[kTileK][kTileN + 1];  // bs[p][j] = op(B)(k0 + p, col0 + j)
  const int tx = static_cast<int>(simt::thread_idx().x), ty = static_cast<int>(simt::thread_idx().y);
  const int tid = ty * kThreadsSide + tx;
  const int64_t row0 = int64_t{simt::block_idx().y} * kTileM, col0 = int64_t{simt::block_idx().x} * kTileN;
  const int64_t batch = simt::block_idx().z;
  a += batch * m * k;
  b += batch * k * n;
  c += batch * m * n;

  float acc[kMicro][kMicro];
  for (int r = 0; r < kMicro; ++r)
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
    simt::sync_threads();
    for (int p = 0; p < kb; ++p) {  // sequential k: the chain continues across slices unchanged
      float av[kMicro], bv[kMicro];
      for (int r = 0; r < kMicro; ++r) av[r] = as[p][ty + kThreadsSide * r];
      for (int q = 0; q < kMicro; ++q) bv[q] = bs[p][tx + kThreadsSide * q];
      for (int r = 0; r < kMicro; ++r)
        for (int q = 0; q < kMicro; ++q) acc[r][q] = fma32(av[r], bv[q], acc[r][q]);
    }
    simt::sync_threads();
  }

  for (int r = 0; r < kMicro; ++r)
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
// CPU's lane l) and folds them with the shuffle tree. `Fold` is the tree: warp_fold_sum, or, for the
// test that a reordered reduction is caught, warp_fold_sum_reordered.

/// A deliberately wrong fold for that test: the same 32 partials combined with w = 1, 2, 4, 8, 16
/// (pairs of neighbours first) instead of the canonical w = 16 … 1. Equal in exact arithmetic, not in
/// floating point.
TRIBUNAL_DEVICE float warp_fold_sum_reordered(float v) {
  for (unsigned w = 1; w < kWarp; w *= 2) v = v + simt::shfl_xor(v, w);
  return v;
}

template <float (*Fold)(float)>
TRIBUNAL_KERNEL void sum_rows_kernel(const float* x, float* y, int64_t m, int64_t n) {
  TRIBUNAL_SHARED float part[kWarp][kWarp + 1];  // part[lane][column offset]
  const int cx = static_cast<int>(simt::thread_idx().x), lane = static_cast<int>(simt::thread_idx().y);
  const int64_t col0 = int64_t{simt::block_idx().x} * kWarp;
  const int64_t j = col0 + cx;
  float acc = 0.0f;
  if (j < n) acc = lane_partial_sum(m, lane, [=](int64_t i) { return x[i * n + j]; });
  part[lane][cx] = acc;
  simt::sync_threads();
  const int w = lane, l = cx;  // warp w = the threads with threadIdx.y == w; its lane l = threadIdx.x
  const float total = Fold(part[l][w]);
  if (l == 0 && col0 + w < n) y[col0 + w] = total;
}

// ---- Elementwise ----------------------------------------------------------------------------------

TRIBUNAL_KERNEL void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = a[i] + b[i];
}

// relu selects the bits of x or of +0: written as a plain float select, NVVM turns it into max.f32(x, 0),
// whose choice between −0 and +0 the PTX ISA does not pin down; the CPU's answer for −0 is +0. The
// integer select keeps the exact comparison and the exact result (checked in the PTX: no max.f32).
TRIBUNAL_KERNEL void relu_kernel(const float* x, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = float_from_bits(x[i] > 0.0f ? float_bits(x[i]) : 0u);
}

TRIBUNAL_KERNEL void relu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

TRIBUNAL_KERNEL void scale_kernel(const float* x, const float* s, float* y, int64_t n) {
  TRIBUNAL_GRID_STRIDE(i, n) y[i] = x[i] * s[0];
}

}  // namespace

// ---- Launchers ------------------------------------------------------------------------------------

void launch_gather(const float* table, const int64_t* idx, float* out, int64_t batch, int64_t row) {
  if (batch * row == 0) return;
  TRIBUNAL_LAUNCH(gather_kernel, elementwise_grid(batch * row), simt::Dim3(kBlock), table, idx, out, batch,
                  row);
}

void launch_copy(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(copy_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, n);
}

void launch_heads(const float* x, float* y, int64_t b, int64_t t, int64_t h, int64_t e, bool to_heads) {
  if (b * t * h * e == 0) return;
  TRIBUNAL_LAUNCH(heads_kernel, elementwise_grid(b * t * h * e), simt::Dim3(kBlock), x, y, b, t, h, e,
                  to_heads);
}

void launch_matmul(const float* a, const float* b, const float* bias, float* c, int64_t m, int64_t n,
                   int64_t k, bool trans_a, bool trans_b, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  const int64_t tiles_n = (n + kTileN - 1) / kTileN, tiles_m = (m + kTileM - 1) / kTileM;
  if (tiles_m > 65535 || tiles_n > 0x7FFFFFFF || batch > 65535)
    throw CudaError("cuda: matmul of " + std::to_string(batch) + "×" + std::to_string(m) + "×" +
                    std::to_string(n) + " exceeds the grid limits");
  const simt::Dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m),
                        static_cast<unsigned>(batch));
  TRIBUNAL_LAUNCH(matmul_kernel, grid, simt::Dim3(kThreadsSide, kThreadsSide), a, b, bias, c, m, n, k,
                  trans_a, trans_b);
}

void launch_sum_rows(const float* x, float* y, int64_t m, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(sum_rows_kernel<warp_fold_sum>, simt::Dim3(static_cast<unsigned>((n + kWarp - 1) / kWarp)),
                  simt::Dim3(kWarp, kWarp), x, y, m, n);
}

void launch_sum_rows_reordered(const float* x, float* y, int64_t m, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(sum_rows_kernel<warp_fold_sum_reordered>,
                  simt::Dim3(static_cast<unsigned>((n + kWarp - 1) / kWarp)), simt::Dim3(kWarp, kWarp), x, y,
                  m, n);
}

void launch_add(const float* a, const float* b, float* y, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(add_kernel, elementwise_grid(n), simt::Dim3(kBlock), a, b, y, n);
}

void launch_relu(const float* x, float* y, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(relu_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, y, n);
}

void launch_relu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(relu_backward_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, dy, dx, n);
}

void launch_scale(const float* x, const float* s, float* y, int64_t n) {
  if (n == 0) return;
  TRIBUNAL_LAUNCH(scale_kernel, elementwise_grid(n), simt::Dim3(kBlock), x, s, y, n);
}

}  // namespace tribunal::TRIBUNAL_CUDA_NS
