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

/// The geometry of a max pooling with a general window (MaxPool2d's ints {kh, kw, stride_h, stride_w,
/// pad_top, pad_left, pad_bottom, pad_right}): x planes h×w → y planes oh×ow, oh = (h + pad_top +
/// pad_bottom − kh)/stride_h + 1 (ONNX's floor mode), likewise ow. Every pad is smaller than its kernel
/// side, so every window holds at least one element of x; padding positions are never chosen.
struct PoolGeom {
  int64_t h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 0, kw = 0, sh = 0, sw = 0, pt = 0, pl = 0;
};

/// Flat index (row·w + column) within its plane of the chosen element of pooling window (r, s): the
/// window's elements of x are scanned row by row, left to right; the choice is pool_choice's rule (the
/// first NaN, else the first element equal to the maximum), so a 2×2 window with stride 2 and no padding
/// chooses what pool_window + pool_choice choose.
TRIBUNAL_HD int64_t pool_choice_at(const float* plane, const PoolGeom& g, int64_t r, int64_t s) {
  const int64_t r0 = r * g.sh - g.pt, c0 = s * g.sw - g.pl;
  const int64_t i0 = r0 > 0 ? r0 : 0, i1 = r0 + g.kh < g.h ? r0 + g.kh : g.h;
  const int64_t j0 = c0 > 0 ? c0 : 0, j1 = c0 + g.kw < g.w ? c0 + g.kw : g.w;
  int64_t best = i0 * g.w + j0;
  float bv = plane[best];
  for (int64_t i = i0; i < i1; ++i)
    for (int64_t j = j0; j < j1; ++j) {
      const float v = plane[i * g.w + j];
      const bool take = bv == bv && (v != v || v > bv);  // x != x: x is NaN
      best = take ? i * g.w + j : best;
      bv = take ? v : bv;
    }
  return best;
}

/// dx at (i, j) of one plane under a general pooling: the dy of every window whose chosen element it
/// is, in increasing window order (r, then s); the first such dy copied, each later one added (one
/// float32 addition each); +0 if no window chose it. dy_plane is the plane's oh×ow gradient.
TRIBUNAL_HD float pool_grad_at(const float* plane, const float* dy_plane, const PoolGeom& g, int64_t i,
                               int64_t j) {
  // Windows r with r·sh − pt ≤ i < r·sh − pt + kh, i.e. ⌈(i + pt − kh + 1)/sh⌉ ≤ r ≤ ⌊(i + pt)/sh⌋.
  const int64_t ra = i + g.pt - g.kh + 1, ca = j + g.pl - g.kw + 1;
  const int64_t r_lo = ra > 0 ? (ra + g.sh - 1) / g.sh : 0, s_lo = ca > 0 ? (ca + g.sw - 1) / g.sw : 0;
  const int64_t r_hi0 = (i + g.pt) / g.sh, s_hi0 = (j + g.pl) / g.sw;
  const int64_t r_hi = r_hi0 < g.oh - 1 ? r_hi0 : g.oh - 1, s_hi = s_hi0 < g.ow - 1 ? s_hi0 : g.ow - 1;
  const int64_t me = i * g.w + j;
  float acc = 0.0f;
  bool any = false;
  for (int64_t r = r_lo; r <= r_hi; ++r)
    for (int64_t s = s_lo; s <= s_hi; ++s)
      if (pool_choice_at(plane, g, r, s) == me) {
        const float d = dy_plane[r * g.ow + s];
        acc = any ? acc + d : d;
        any = true;
      }
  return acc;
}

/// keepᵢ of dropout: uniform(philox(seed, Dropout, step, site·2³² + i)[0]) ≥ p.
TRIBUNAL_HD bool dropout_keep(uint64_t seed, uint32_t step, uint32_t site, float p, int64_t i) {
  const uint64_t element = static_cast<uint64_t>(site) << 32 | static_cast<uint64_t>(i);
  return uniform_from_bits(philox_random(seed, RandomPurpose::Dropout, step, element)[0]) >= p;
}

}  // namespace tribunal
