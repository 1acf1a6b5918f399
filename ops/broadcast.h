// NumPy broadcasting geometry of BroadcastBinary and SumToShape (docs/numerics.md "Broadcasting
// arithmetic") and of Where and WhereBackward (docs/numerics.md "Selection: where, gather_rows"),
// shared by the CPU kernels (ops/kernels/broadcast.cpp, select.cpp), the float64 kernels and the CUDA
// kernels (ops/cuda/kernels/broadcast.cuh, select.cuh) so every backend maps an element to the same
// sources.
//
// Shapes of rank ≤ 4 are right-aligned and padded on the left with 1s to rank 4. A dim of 1 broadcasts
// (stride 0). Offsets are computed from a row-major flat index over `dims` with per-dim `strides`.
#pragma once

#include <cstdint>

#include "ops/math.h"
#include "ops/portable.h"

namespace tribunal {

inline constexpr int kBroadcastRank = 4;

/// Row-major flat index `flat` over dims[0..4) mapped to Σ coord_d · strides[d].
TRIBUNAL_HD int64_t broadcast_offset(const int64_t* dims, const int64_t* strides, int64_t flat) {
  int64_t off = 0;
  for (int d = kBroadcastRank - 1; d >= 0; --d) {
    const int64_t c = flat % dims[d];
    flat /= dims[d];
    off += c * strides[d];
  }
  return off;
}

/// BroadcastBinary: output element i reads a[offset(dims, sa, i)] and b[offset(dims, sb, i)].
struct BinaryGeom {
  int64_t dims[kBroadcastRank];  ///< the output shape, padded to rank 4 (no zero: n = 0 launches nothing)
  int64_t sa[kBroadcastRank];    ///< a's strides, 0 where a's dim is 1 (broadcast)
  int64_t sb[kBroadcastRank];
};

/// Where: output element i reads cond[offset(dims, sc, i)], a[offset(dims, sa, i)], b[offset(dims, sb, i)].
struct TernaryGeom {
  int64_t dims[kBroadcastRank];  ///< the output shape, padded to rank 4
  int64_t sc[kBroadcastRank];    ///< cond's strides, 0 where cond's dim is 1 (broadcast)
  int64_t sa[kBroadcastRank];
  int64_t sb[kBroadcastRank];
};

/// SumToShape: output element j sums x[base_j + offset(red_dims, red_strides, i)] for i in [0, n),
/// base_j = offset(out_dims, out_strides, j); i in row-major order over the reduced dims is increasing
/// flat index of x.
struct SumGeom {
  int64_t out_dims[kBroadcastRank];     ///< the target shape, padded to rank 4
  int64_t out_strides[kBroadcastRank];  ///< x's stride of each kept dim, 0 for a reduced one
  int64_t red_dims[kBroadcastRank];     ///< x's dim where the target's is 1 and x's is not, else 1
  int64_t red_strides[kBroadcastRank];  ///< x's stride of each reduced dim, 0 for a kept one
  int64_t n;                            ///< Π red_dims: the elements summed per output
};

/// `dims` (rank ≤ 4) right-aligned into out[4] with leading 1s.
inline void pad_dims(const int64_t* dims, int rank, int64_t* out) {
  for (int d = 0; d < kBroadcastRank; ++d) out[d] = 1;
  for (int d = 0; d < rank; ++d) out[kBroadcastRank - rank + d] = dims[d];
}

/// Row-major strides of padded dims, 0 where the dim is 1 (so a broadcast dim reads one element).
inline void broadcast_strides(const int64_t* padded, int64_t* strides) {
  int64_t s = 1;
  for (int d = kBroadcastRank - 1; d >= 0; --d) {
    strides[d] = padded[d] == 1 ? 0 : s;
    s *= padded[d];
  }
}

/// The geometry of y = a op b, shapes given as dims and rank (already valid: y is their broadcast).
inline BinaryGeom binary_geom(const int64_t* a, int ra, const int64_t* b, int rb, const int64_t* y, int ry) {
  BinaryGeom g{};
  int64_t pa[kBroadcastRank], pb[kBroadcastRank];
  pad_dims(y, ry, g.dims);
  pad_dims(a, ra, pa);
  pad_dims(b, rb, pb);
  broadcast_strides(pa, g.sa);
  broadcast_strides(pb, g.sb);
  return g;
}

/// Whether a Where condition selects its first branch: any value but ±0, NaN included. Decided on the
/// bits, so a mode that treats subnormals as zero could not change it.
TRIBUNAL_HD bool where_true(float cond) {
  return (float_bits(cond) & 0x7FFFFFFFu) != 0u;
}

/// The geometry of y = cond ? a : b (already valid: y is the broadcast of the three shapes).
inline TernaryGeom ternary_geom(const int64_t* c, int rc, const int64_t* a, int ra, const int64_t* b, int rb,
                                const int64_t* y, int ry) {
  TernaryGeom g{};
  int64_t pc[kBroadcastRank], pa[kBroadcastRank], pb[kBroadcastRank];
  pad_dims(y, ry, g.dims);
  pad_dims(c, rc, pc);
  pad_dims(a, ra, pa);
  pad_dims(b, rb, pb);
  broadcast_strides(pc, g.sc);
  broadcast_strides(pa, g.sa);
  broadcast_strides(pb, g.sb);
  return g;
}

/// The geometry of summing x down to `target` (already valid: x's shape is a broadcast of target's).
inline SumGeom sum_geom(const int64_t* x, int rx, const int64_t* target, int rt) {
  SumGeom g{};
  int64_t px[kBroadcastRank], pt[kBroadcastRank], xs[kBroadcastRank];
  pad_dims(x, rx, px);
  pad_dims(target, rt, pt);
  int64_t s = 1;
  for (int d = kBroadcastRank - 1; d >= 0; --d) {
    xs[d] = s;
    s *= px[d];
  }
  g.n = 1;
  for (int d = 0; d < kBroadcastRank; ++d) {
    const bool kept = pt[d] == px[d];
    g.out_dims[d] = pt[d];
    g.out_strides[d] = kept ? xs[d] : 0;
    g.red_dims[d] = kept ? 1 : px[d];
    g.red_strides[d] = kept ? 0 : xs[d];
    g.n *= g.red_dims[d];
  }
  return g;
}

}  // namespace tribunal
