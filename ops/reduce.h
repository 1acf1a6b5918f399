// The canonical reduction of RepOps (docs/numerics.md "Canonical reduction").
//
//   sum(x[0..n)):  32 lane accumulators, all starting at +0.0f;
//                  lane j accumulates x[j], x[j+32], x[j+64], … in that order (one add each);
//                  then a fixed binary tree: for w = 16, 8, 4, 2, 1: lane[j] = lane[j] + lane[j+w]
//                  for j < w; the result is lane[0].
//
// The lane count 32 is the contract: it is four AVX2 registers, two AVX-512 registers, one CUDA warp
// (whose shuffle-down tree is exactly the fold above), so every backend reproduces it.
#pragma once

#include <cstdint>

#include "ops/portable.h"

namespace tribunal {

inline constexpr int kReduceLanes = 32;

/// Canonical sum of x[i·stride] for i in [0, n). n = 0 gives +0.0f.
TRIBUNAL_HD float canonical_sum(const float* x, int64_t n, int64_t stride = 1) {
  float lane[kReduceLanes];
  for (int j = 0; j < kReduceLanes; ++j) lane[j] = 0.0f;
  for (int64_t i = 0; i < n; ++i) lane[i % kReduceLanes] = lane[i % kReduceLanes] + x[i * stride];
  for (int w = kReduceLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lane[j] = lane[j] + lane[j + w];
  return lane[0];
}

}  // namespace tribunal
