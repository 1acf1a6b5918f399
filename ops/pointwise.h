// Per-element formulas of the RepOps contract shared by the CPU kernels (ops/kernels/*.cpp) and the
// CUDA kernels (ops/cuda/kernels/*.cuh): one definition, so both execute the same operation sequence
// (docs/numerics.md "GELU", "Max pooling", "Dropout"). TRIBUNAL_HD: host and device.
#pragma once

#include <cstdint>

#include "ops/math.h"
#include "ops/philox.h"
#include "ops/portable.h"

namespace tribunal {

inline constexpr float kGeluC = 0.7978845608028654f;  // √(2/π)
inline constexpr float kGeluK = 0.044715f;
inline constexpr float kGeluK3 = 0.134145f;  // 3·0.044715

/// gelu(x), the contract's sequence: u = c·fma(k, (x·x)·x, x); t = tanh32(u); h = 0.5·x; fma(h, t, h).
TRIBUNAL_HD float gelu32(float x) {
  const float u = kGeluC * fma32(kGeluK, (x * x) * x, x);
  const float t = tanh32(u);
  const float h = 0.5f * x;
  return fma32(h, t, h);
}

/// dy · gelu'(x), the contract's sequence (docs/numerics.md "GELU").
TRIBUNAL_HD float gelu_grad32(float x, float dy) {
  const float x2 = x * x;
  const float u = kGeluC * fma32(kGeluK, x2 * x, x);
  const float t = tanh32(u);
  const float left = fma32(0.5f, t, 0.5f);
  const float sech2 = fma32(-t, t, 1.0f);
  const float du = kGeluC * fma32(kGeluK3, x2, 1.0f);
  const float g = sech2 > 0.0f ? fma32((0.5f * x) * sech2, du, left) : left;
  return dy * g;
}

/// Index 0..3 of the chosen element of a 2×2 pooling window v = (0,0), (0,1), (1,0), (1,1): once the
/// current choice is NaN nothing replaces it; before that, a NaN or a strictly greater element does (so
/// ties, −0 against +0 included, keep the first). Written as selects without an early exit, so the
/// compiler may use conditional moves (with random data `v > best` is an unpredictable branch).
TRIBUNAL_HD int pool_choice(const float v[4]) {
  int best = 0;
  float bv = v[0];
  for (int k = 1; k < 4; ++k) {
    const bool take = bv == bv && (v[k] != v[k] || v[k] > bv);  // x != x: x is NaN
    best = take ? k : best;
    bv = take ? v[k] : bv;
  }
  return best;
}

/// The window of pooling output (r, s) of one plane of width w: its four elements in scan order
/// (0,0), (0,1), (1,0), (1,1).
TRIBUNAL_HD void pool_window(const float* plane, int64_t w, int64_t r, int64_t s, float v[4]) {
  const float* p = plane + 2 * r * w + 2 * s;
  v[0] = p[0];
  v[1] = p[1];
  v[2] = p[w];
  v[3] = p[w + 1];
}

/// keepᵢ of dropout: uniform(philox(seed, Dropout, step, site·2³² + i)[0]) ≥ p.
TRIBUNAL_HD bool dropout_keep(uint64_t seed, uint32_t step, uint32_t site, float p, int64_t i) {
  const uint64_t element = static_cast<uint64_t>(site) << 32 | static_cast<uint64_t>(i);
  return uniform_from_bits(philox_random(seed, RandomPurpose::Dropout, step, element)[0]) >= p;
}

}  // namespace tribunal
