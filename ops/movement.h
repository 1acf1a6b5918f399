// Geometry of the data-movement ops Transpose, Slice, SliceBackward and Concat (docs/numerics.md "Data
// movement: transpose, slice, concat"), shared by the fast CPU kernels (ops/kernels/movement.cpp) and the
// CUDA kernels (ops/cuda/kernels/movement.cuh) so every backend moves each element between the same two
// offsets. The reference kernels do not use it: they index by coordinates, as the contract is written.
//
// Transpose, Slice and each input of Concat are one strided copy: over a rank-4 iteration space `dims`
// (row-major flat index i), dst[dst_base + offset(dims, dst_strides, i)] =
// src[src_base + offset(dims, src_strides, i)], with offset() = ops/broadcast.h's broadcast_offset.
// SliceBackward is, on the CPU, a zero fill and a strided copy of dy into dx; on CUDA a gather with a
// predicate (each dx element either reads one dy element or is +0).
#pragma once

#include <cstdint>

#include "ops/broadcast.h"  // broadcast_offset, kBroadcastRank
#include "ops/portable.h"

namespace tribunal {

/// One strided copy of Π dims elements (all shapes here have rank ≤ 4).
struct CopyGeom {
  int64_t dims[kBroadcastRank];         ///< the iteration space, padded on the left with 1s
  int64_t src_strides[kBroadcastRank];  ///< element strides into src per dim of `dims`
  int64_t dst_strides[kBroadcastRank];  ///< element strides into dst per dim of `dims`
  int64_t src_base;                     ///< src offset of element 0
  int64_t dst_base;                     ///< dst offset of element 0
};

/// Element i of the copy: dst[dst_offset(g, i)] = src[src_offset(g, i)].
TRIBUNAL_HD int64_t copy_src_offset(const CopyGeom& g, int64_t i) {
  return g.src_base + broadcast_offset(g.dims, g.src_strides, i);
}
TRIBUNAL_HD int64_t copy_dst_offset(const CopyGeom& g, int64_t i) {
  return g.dst_base + broadcast_offset(g.dims, g.dst_strides, i);
}

/// The same copy over the fewest dims: dims of 1 dropped, and a dim merged into the one after it where
/// both src and dst step over it as over one longer dim (ss_d = ss_{d+1}·dim_{d+1}, likewise dst). The
/// flat order of the elements, and so every (src, dst) pair, is unchanged; the innermost dim becomes
/// the longest run, which a contiguous copy can move at once.
inline CopyGeom coalesce(const CopyGeom& g) {
  CopyGeom c{};
  int n = 0;  // dims kept so far, outermost first, in c's first n slots
  for (int d = 0; d < kBroadcastRank; ++d) {
    if (g.dims[d] == 1) continue;
    if (n > 0 && c.src_strides[n - 1] == g.src_strides[d] * g.dims[d] &&
        c.dst_strides[n - 1] == g.dst_strides[d] * g.dims[d]) {
      c.dims[n - 1] *= g.dims[d];
      c.src_strides[n - 1] = g.src_strides[d];
      c.dst_strides[n - 1] = g.dst_strides[d];
      continue;
    }
    c.dims[n] = g.dims[d];
    c.src_strides[n] = g.src_strides[d];
    c.dst_strides[n] = g.dst_strides[d];
    ++n;
  }
  // Right-align the kept dims under leading 1s (stride 0).
  const int pad = kBroadcastRank - n;
  for (int d = kBroadcastRank - 1; d >= 0; --d) {
    const bool kept = d >= pad;
    c.dims[d] = kept ? c.dims[d - pad] : 1;
    c.src_strides[d] = kept ? c.src_strides[d - pad] : 0;
    c.dst_strides[d] = kept ? c.dst_strides[d - pad] : 0;
  }
  c.src_base = g.src_base;
  c.dst_base = g.dst_base;
  return c;
}

/// A shape of rank ≤ 4 seen around one axis: [outer, dim, inner], outer = Π dims before the axis,
/// inner = Π dims after it.
struct AxisView {
  int64_t outer, dim, inner;
};

inline AxisView axis_view(const int64_t* dims, int rank, int axis) {
  AxisView v{1, dims[axis], 1};
  for (int d = 0; d < axis; ++d) v.outer *= dims[d];
  for (int d = axis + 1; d < rank; ++d) v.inner *= dims[d];
  return v;
}

/// Transpose of x (dims, rank ≤ 4) by `perm` (a permutation of 0..rank−1, already valid): the
/// iteration space is y's shape, y is written contiguously, x is read at Σ y-coordinate_d ·
/// x-stride_{perm[d]}.
inline CopyGeom transpose_geom(const int64_t* x, int rank, const int64_t* perm) {
  CopyGeom g{};
  int64_t xs[kBroadcastRank];
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    xs[d] = s;
    s *= x[d];
  }
  const int pad = kBroadcastRank - rank;
  for (int d = 0; d < pad; ++d) {
    g.dims[d] = 1;
    g.src_strides[d] = 0;
  }
  for (int d = 0; d < rank; ++d) {
    g.dims[pad + d] = x[perm[d]];
    g.src_strides[pad + d] = xs[perm[d]];
  }
  s = 1;
  for (int d = kBroadcastRank - 1; d >= 0; --d) {
    g.dst_strides[d] = s;
    s *= g.dims[d];
  }
  return g;
}

/// Slice of x = [outer, D, inner] along its axis, positions start + l·step for l < len: the iteration
/// space [1, outer, len, inner], y contiguous.
inline CopyGeom slice_geom(const AxisView& x, int64_t start, int64_t step, int64_t len) {
  return CopyGeom{{1, x.outer, len, x.inner},
                  {0, x.dim * x.inner, step * x.inner, 1},
                  {0, len * x.inner, x.inner, 1},
                  start * x.inner,
                  0};
}

/// Concat's input of shape [outer, a, inner] into y = [outer, total, inner] at axis offset `offset`:
/// the iteration space [1, outer, a, inner], the input read contiguously.
inline CopyGeom concat_geom(const AxisView& in, int64_t offset, int64_t total) {
  return CopyGeom{{1, in.outer, in.dim, in.inner},
                  {0, in.dim * in.inner, in.inner, 1},
                  {0, total * in.inner, in.inner, 1},
                  0,
                  offset * in.inner};
}

/// SliceBackward's scatter on the CPU: dy = [outer, len, inner] read contiguously into dx = [outer,
/// full, inner] at positions start + l·step (the other dx elements are zeroed first). `step` is only
/// formed into a stride when len ≥ 2, where (len − 1)·step < full bounds it.
inline CopyGeom slice_scatter_geom(const AxisView& dx, int64_t start, int64_t step, int64_t len) {
  const int64_t s = len > 1 ? step : 1;
  return CopyGeom{{1, dx.outer, len, dx.inner},
                  {0, len * dx.inner, dx.inner, 1},
                  {0, dx.dim * dx.inner, s * dx.inner, 1},
                  0,
                  start * dx.inner};
}

/// SliceBackward: dx = [outer, full, inner], dy = [outer, len, inner], dy's row l at dx's position
/// start + l·step along the axis.
struct SliceBackGeom {
  int64_t outer, full, len, inner, start, step;
};

/// The dy offset that dx element i reads, or −1 where dx is +0 (a position the slice skipped).
TRIBUNAL_HD int64_t slice_backward_source(const SliceBackGeom& g, int64_t i) {
  const int64_t in = i % g.inner, rest = i / g.inner, f = rest % g.full, o = rest / g.full;
  const int64_t rel = f - g.start;
  if (rel < 0 || rel % g.step != 0 || rel / g.step >= g.len) return -1;
  return (o * g.len + rel / g.step) * g.inner + in;
}

}  // namespace tribunal
