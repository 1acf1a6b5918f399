// The per-lane halves of the CUDA kernels' warp algorithms (ops/cuda/kernels/common.cuh puts the
// shuffles around them), written as TRIBUNAL_HD functions with no CUDA in them.
//
// Canonical reduction (ops/reduce.h, docs/numerics.md): lane j of the CPU's 32 accumulators adds
// x[j], x[j+32], x[j+64], … in order starting from +0. Warp lane j does exactly that
// (lane_partial_sum), then the warp folds with __shfl_down_sync for w = 16, 8, 4, 2, 1:
// v = v + shfl_down(v, w), i.e. lane[j] = lane[j] + lane[j+w] — the CPU's tree, operand for operand.
//
// Sequential maximum (softmax): the CPU takes m = x[0], then m = x[j] > m ? x[j] : m for j = 1..n-1.
// Its result is x[0] if x[0] is NaN; otherwise the FIRST element (smallest index) whose value equals
// (==, so +0 and −0 tie) the maximum of the non-NaN elements: before that index every m is strictly
// smaller, after it nothing is strictly larger, and a NaN never wins a `>`. "Larger value, then
// smaller index" is a strict total order on non-NaN (value, index) pairs, so picking its best element
// gives the same answer in any combination order — lanes pick over their strided elements, the warp
// combines with butterfly shuffles, and row_max() returns the CPU's m bit for bit (its sign of zero
// included).
#pragma once

#include <cstdint>

#include "ops/portable.h"

namespace tribunal::lanes {

inline constexpr int kWarp = 32;  // = kReduceLanes of ops/reduce.h (the contract's lane count)

/// Lane `lane`'s accumulator of the canonical sum of f(i) for i in [0, n): +0, then + f(lane),
/// + f(lane + 32), … in increasing i.
template <class F>
TRIBUNAL_HD float lane_partial_sum(int64_t n, int lane, F f) {
  float acc = 0.0f;
  for (int64_t i = lane; i < n; i += kWarp) acc = acc + f(i);
  return acc;
}

/// A candidate for the row maximum: a non-NaN value and its index; index < 0 means "none yet".
struct MaxPick {
  float value;
  int64_t index;
};

/// Lane `lane`'s best element among f(lane), f(lane+32), … below n (NaNs skipped; strict > keeps the
/// first).
template <class F>
TRIBUNAL_HD MaxPick lane_max_pick_of(int64_t n, int lane, F f) {
  MaxPick best{0.0f, -1};
  for (int64_t i = lane; i < n; i += kWarp) {
    const float v = f(i);
    if (v != v) continue;
    if (best.index < 0 || v > best.value) best = MaxPick{v, i};
  }
  return best;
}

/// lane_max_pick_of over the elements x[0..n).
TRIBUNAL_HD MaxPick lane_max_pick(const float* x, int64_t n, int lane) {
  return lane_max_pick_of(n, lane, [x](int64_t i) { return x[i]; });
}

/// The better of two candidates: larger value; on equal values (+0 == −0) the smaller index.
TRIBUNAL_HD MaxPick combine_max_pick(MaxPick a, MaxPick b) {
  if (a.index < 0) return b;
  if (b.index < 0) return a;
  if (b.value > a.value) return b;
  if (a.value > b.value) return a;
  return b.index < a.index ? b : a;
}

/// The CPU's sequential maximum of a row (n ≥ 1) from its first element and the best candidate over all
/// of it.
TRIBUNAL_HD float row_max_of(float first, MaxPick best) {
  return first != first ? first : best.value;
}

/// row_max_of for the row x[0..n).
TRIBUNAL_HD float row_max(const float* x, MaxPick best) {
  return row_max_of(x[0], best);
}

}  // namespace tribunal::lanes
