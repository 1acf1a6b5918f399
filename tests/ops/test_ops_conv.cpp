// The CNN and gradient-clipping ops (ops/kernels/conv.cpp, pool.cpp, clip.cpp): random cases, float64
// models and bad inputs registered for the generic checks of test_op_coverage.cpp (float64 accuracy,
// bitwise fast == reference on every SIMD path × 1/2/3 threads, refusals), plus the rules a random
// case would rarely hit: a hand-computed convolution, the signed zero of padded taps, max-pool's NaN
// and tie rules, the clip coefficient at and above the threshold, and the backward ops as adjoints of
// the forward convolution.
//
// Tolerances are worst-case rounding bounds, not guesses: a chain of n correctly rounded additions
// (fma products are exact) errs by at most about n·u·Σ|terms| with u = 2⁻²⁴ (Higham, "Accuracy and
// Stability of Numerical Algorithms", §3.1); the canonical sum adds ⌈n/32⌉ per lane plus 5 tree levels.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/registry.h"
#include "ops/simd.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

constexpr double kU = 0x1p-24;  // unit roundoff of binary32

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

// ---- Convolution geometry and float64 models --------------------------------------------------------

/// A convolution's sizes, written out here independently of ops/conv_elements.h: per-axis strides
/// (sh, sw), pads (top, left, bottom, right), dilations (dh, dw) and groups; `general` picks the nine-int
/// form of the attributes, else the short {stride, pad} (which needs sh = sw, equal pads, no dilation
/// and one group).
struct Geom {
  int64_t n, c, h, w, o, kh, kw;
  int64_t sh = 1, sw = 1, pt = 0, pl = 0, pb = 0, pr = 0, dh = 1, dw = 1, groups = 1;
  bool general = false;
  int64_t oh() const { return (h + pt + pb - (kh - 1) * dh - 1) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - (kw - 1) * dw - 1) / sw + 1; }
  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
  /// The forward node's ints.
  std::vector<int64_t> ints() const {
    if (!general) return {sh, pt};
    return {sh, sw, pt, pl, pb, pr, dh, dw, groups};
  }
  /// The forward's ints followed by a, b (the gradients' sizes).
  std::vector<int64_t> ints(int64_t a, int64_t b) const {
    std::vector<int64_t> v = ints();
    v.push_back(a);
    v.push_back(b);
    return v;
  }
};

/// The short form's geometry.
Geom short_geom(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t stride,
                int64_t pad) {
  return {n, c, h, w, o, kh, kw, stride, stride, pad, pad, pad, pad};
}

/// The geometry an op's ints describe (the short or general form, then `extra` trailing sizes) for the
/// given tensor sizes.
Geom geom_of_ints(const std::vector<int64_t>& v, size_t extra, int64_t n, int64_t c, int64_t h, int64_t w,
                  int64_t o, int64_t kh, int64_t kw) {
  if (v.size() - extra == 2) return short_geom(n, c, h, w, o, kh, kw, v[0], v[1]);
  return {n, c, h, w, o, kh, kw, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], true};
}

/// A random valid geometry: kernels 1/3/5 (height and width independent), pad 0..2 below the kernel,
/// images of 1, primes and odd sizes (at least the kernel minus the padding). `big`: enough work per
/// call that the fast kernels split it over 3 threads (conv.cpp's grain is 2^20 multiply-adds).
Geom random_geom(std::mt19937& rng, bool big, int64_t stride) {
  if (big) return short_geom(12, 8, 20, 20, 16, 5, 5, stride, 2);
  static constexpr int64_t kKernels[] = {1, 3, 5}, kSmall[] = {1, 2, 3, 5, 7},
                           kImage[] = {1, 2, 3, 5, 7, 11, 13};
  const int64_t kh = kKernels[rng() % 3], kw = kKernels[rng() % 3];
  const int64_t pad = static_cast<int64_t>(rng() % static_cast<uint32_t>(std::min<int64_t>({3, kh, kw})));
  const int64_t h = std::max(kImage[rng() % 7], kh - 2 * pad), w = std::max(kImage[rng() % 7], kw - 2 * pad);
  const int64_t n = kSmall[rng() % 5], c = kSmall[rng() % 5], o = kSmall[rng() % 5];
  return short_geom(n, c, h, w, o, kh, kw, stride, pad);
}

/// A random geometry in the general form: groups 1, 2, 3 or C (depthwise, then O = C or 2·C), kernels
/// 1..4 per axis, strides 1..3 and dilations 1..3 per axis, each pad below its kernel extent, images at
/// least the padded extent. `big`: ResNeXt-like (2 groups, dilation 2, asymmetric pads), split over 3
/// threads.
Geom random_general_geom(std::mt19937& rng, bool big) {
  if (big) return {12, 8, 20, 21, 16, 3, 5, 1, 2, 2, 1, 1, 3, 2, 2, 2, true};
  Geom g{};
  g.general = true;
  const uint32_t kind = rng() % 4;
  const int64_t cg = 1 + rng() % 3, og = 1 + rng() % 3;
  g.groups = kind == 0 ? 1 : kind == 1 ? 2 : kind == 2 ? 3 : 1 + rng() % 5;
  g.c = kind == 3 ? g.groups : g.groups * cg;  // kind 3: depthwise (one channel per group)
  g.o = kind == 3 ? g.groups * (1 + rng() % 2) : g.groups * og;
  g.n = 1 + rng() % 3;
  g.kh = 1 + rng() % 4;
  g.kw = 1 + rng() % 4;
  g.sh = 1 + rng() % 3;
  g.sw = 1 + rng() % 3;
  g.dh = 1 + rng() % 3;
  g.dw = 1 + rng() % 3;
  const int64_t eh = (g.kh - 1) * g.dh + 1, ew = (g.kw - 1) * g.dw + 1;
  g.pt = rng() % eh;
  g.pb = rng() % eh;
  g.pl = rng() % ew;
  g.pr = rng() % ew;
  g.h = std::max<int64_t>(1, eh - g.pt - g.pb) + rng() % 9;
  g.w = std::max<int64_t>(1, ew - g.pl - g.pr) + rng() % 9;
  return g;
}

Geom conv_geom_of(const Case& c) {
  const Shape &x = c.in[0].shape(), &w = c.in[1].shape();
  return geom_of_ints(c.attrs.ints, 0, x[0], x[1], x[2], x[3], w[0], w[2], w[3]);
}

/// Input pixel of tap (i, j) of output (oh, ow), or false if it is in the padding.
bool tap(const Geom& g, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t& hh, int64_t& ww) {
  hh = oh * g.sh + i * g.dh - g.pt;
  ww = ow * g.sw + j * g.dw - g.pl;
  return hh >= 0 && hh < g.h && ww >= 0 && ww < g.w;
}

/// Calls f(x index, w index, y index) for every in-image tap of the convolution: output channel o reads
/// the Cg input channels of its group, (o / Og)·Cg + c, through w[o, c, i, j].
template <class F>
void for_each_tap(const Geom& g, F f) {
  const int64_t oh_n = g.oh(), ow_n = g.ow(), cg = g.cg();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t oh = 0; oh < oh_n; ++oh)
        for (int64_t ow = 0; ow < ow_n; ++ow)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < g.kh; ++i)
              for (int64_t j = 0; j < g.kw; ++j) {
                int64_t hh, ww;
                if (!tap(g, oh, ow, i, j, hh, ww)) continue;
                const int64_t cx = o / g.og() * cg + c;
                f(((n * g.c + cx) * g.h + hh) * g.w + ww, ((o * cg + c) * g.kh + i) * g.kw + j,
                  ((n * g.o + o) * oh_n + oh) * ow_n + ow);
              }
}

/// y = conv(x, w) + b in float64. Chain of C·KH·KW roundings from b.
Expected conv64(const Geom& g, const Tensor& x, const Tensor& w, const Tensor* b) {
  const int64_t p = g.oh() * g.ow(), ny = g.n * g.o * p;
  std::vector<double> want(at(ny), 0.0), mag(at(ny), 0.0);
  if (b)
    for (int64_t e = 0; e < ny; ++e) {
      want[at(e)] = (*b)[(e / p) % g.o];
      mag[at(e)] = std::fabs(want[at(e)]);
    }
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    const double t = static_cast<double>(x[xi]) * w[wi];
    want[at(yi)] += t;
    mag[at(yi)] += std::fabs(t);
  });
  Expected e{want, {}};
  for (double m : mag) e.tol.push_back(static_cast<double>(g.cg() * g.kh * g.kw + 2) * kU * m);
  return e;
}

/// dx = the adjoint of conv in x, in float64. O roundings per dcol element, then up to KH·KW adds.
Expected conv_dx64(const Geom& g, const Tensor& w, const Tensor& dy) {
  const int64_t nx = g.n * g.c * g.h * g.w;
  std::vector<double> want(at(nx), 0.0), mag(at(nx), 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    const double t = static_cast<double>(w[wi]) * dy[yi];
    want[at(xi)] += t;
    mag[at(xi)] += std::fabs(t);
  });
  Expected e{want, {}};
  for (double m : mag) e.tol.push_back(static_cast<double>(g.og() + g.kh * g.kw + 2) * kU * m);
  return e;
}

/// dw = the adjoint of conv in w, in float64. Chain of N·OH·OW roundings.
Expected conv_dw64(const Geom& g, const Tensor& x, const Tensor& dy) {
  const int64_t nw = g.o * g.cg() * g.kh * g.kw;
  std::vector<double> want(at(nw), 0.0), mag(at(nw), 0.0);
  for_each_tap(g, [&](int64_t xi, int64_t wi, int64_t yi) {
    const double t = static_cast<double>(x[xi]) * dy[yi];
    want[at(wi)] += t;
    mag[at(wi)] += std::fabs(t);
  });
  Expected e{want, {}};
  for (double m : mag) e.tol.push_back(static_cast<double>(g.n * g.oh() * g.ow() + 2) * kU * m);
  return e;
}

/// Error bound factor of a canonical sum of n terms: ⌈n/32⌉ adds per lane, 5 tree levels.
double canonical_bound(int64_t n) {
  return static_cast<double>((n + 31) / 32 + 6) * kU;
}

/// db[o] = Σ dy[n, o, :, :] in float64.
Expected conv_db64(const Tensor& dy) {
  const Shape& s = dy.shape();
  const int64_t p = s[2] * s[3];
  Expected e;
  for (int64_t o = 0; o < s[1]; ++o) {
    double sum = 0, mag = 0;
    for (int64_t n = 0; n < s[0]; ++n)
      for (int64_t q = 0; q < p; ++q) {
        sum += dy[(n * s[1] + o) * p + q];
        mag += std::fabs(dy[(n * s[1] + o) * p + q]);
      }
    e.want.push_back(sum);
    e.tol.push_back(canonical_bound(s[0] * p) * mag);
  }
  return e;
}

// ---- Max pooling ------------------------------------------------------------------------------------

/// x[N,C,H,W] whose 2×2 windows hold four values at least 1/4 apart (a random permutation of
/// a, a + ¼, a + ½, a + ¾), so finite differences never cross a tie; `specials` adds subnormals.
Tensor pool_input(Shape s, std::mt19937& rng, bool specials) {
  Tensor x(s);
  std::uniform_real_distribution<float> base(-1.0f, 1.0f);
  const int64_t h = s[2], w = s[3];
  for (int64_t pl = 0; pl < s[0] * s[1]; ++pl)
    for (int64_t r = 0; r < h / 2; ++r)
      for (int64_t c = 0; c < w / 2; ++c) {
        int order[4] = {0, 1, 2, 3};
        std::shuffle(order, order + 4, rng);
        const float a = base(rng);
        for (int k = 0; k < 4; ++k) {
          float v = a + 0.25f * static_cast<float>(order[k]);
          if (specials && rng() % 16 == 0) v = random_values(1, rng, -1.0f, 1.0f, true)[0] * 0x1p-140f;
          x[((pl * h) + 2 * r + (k >> 1)) * w + 2 * c + (k & 1)] = v;
        }
      }
  return x;
}

/// Index in x of the element max-pooling chooses for output e (float64 model: first NaN, else the
/// first maximum in scan order).
int64_t chosen64(const Tensor& x, int64_t e) {
  const Shape& s = x.shape();
  const int64_t ow = s[3] / 2, oh = s[2] / 2, pl = e / (oh * ow), r = (e / ow) % oh, c = e % ow;
  int64_t best = -1;
  for (int k = 0; k < 4; ++k) {
    const int64_t idx = (pl * s[2] + 2 * r + (k >> 1)) * s[3] + 2 * c + (k & 1);
    if (best >= 0 && std::isnan(x[best])) break;
    if (best < 0 || std::isnan(x[idx]) || static_cast<double>(x[idx]) > static_cast<double>(x[best]))
      best = idx;
  }
  return best;
}

/// A general pooling's sizes from MaxPool2d's 8 ints (computed here, independently of ops/pointwise.h).
struct PoolG {
  int64_t h, w, kh, kw, sh, sw, pt, pl, pb, pr;
  int64_t oh() const { return (h + pt + pb - kh) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - kw) / sw + 1; }
};

PoolG pool_g(const Shape& x, const std::vector<int64_t>& v) {
  return {x[2], x[3], v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
}

/// x[N,C,H,W] whose planes hold distinct multiples of 2⁻⁷ in random order, so no window has a tie and
/// finite differences (steps ≤ 2⁻¹⁰·|x|, ≤ 2⁻⁸ here) never cross one; `specials` adds subnormals.
Tensor distinct_pool_input(Shape s, std::mt19937& rng, bool specials) {
  Tensor x(s);
  const int64_t hw = s[2] * s[3];
  std::vector<int64_t> order(static_cast<size_t>(hw));
  for (int64_t pl = 0; pl < s[0] * s[1]; ++pl) {
    for (int64_t i = 0; i < hw; ++i) order[at(i)] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < hw; ++i) {
      float v = static_cast<float>(order[at(i)] - hw / 2) * 0x1p-7f;
      if (specials && rng() % 16 == 0) v = random_values(1, rng, -1.0f, 1.0f, true)[0] * 0x1p-140f;
      x[pl * hw + i] = v;
    }
  }
  return x;
}

/// Index in x of the element a general pooling chooses for output (pl, r, s): the window's elements of
/// x row by row, the first NaN, else the first maximum (float64 comparisons).
int64_t chosen64_general(const Tensor& x, const PoolG& g, int64_t pl, int64_t r, int64_t s) {
  int64_t best = -1;
  for (int64_t i = r * g.sh - g.pt; i < r * g.sh - g.pt + g.kh; ++i)
    for (int64_t j = s * g.sw - g.pl; j < s * g.sw - g.pl + g.kw; ++j) {
      if (i < 0 || i >= g.h || j < 0 || j >= g.w) continue;
      const int64_t idx = (pl * g.h + i) * g.w + j;
      if (best >= 0 && std::isnan(x[best])) return best;
      if (best < 0 || std::isnan(x[idx]) || static_cast<double>(x[idx]) > static_cast<double>(x[best]))
        best = idx;
    }
  return best;
}

/// Random general pooling ints for an image of at least 1×1: variant 1 is ResNet's stem (3×3, stride 2,
/// pad 1), variant 2 any kernel 1..4, stride 1..3, asymmetric pads below the kernel side.
std::vector<int64_t> pool_ints(std::mt19937& rng, int variant) {
  if (variant == 1) return {3, 3, 2, 2, 1, 1, 1, 1};
  const int64_t kh = 1 + rng() % 4, kw = 1 + rng() % 4;
  return {kh,
          kw,
          static_cast<int64_t>(1 + rng() % 3),
          static_cast<int64_t>(1 + rng() % 3),
          static_cast<int64_t>(rng() % kh),
          static_cast<int64_t>(rng() % kw),
          static_cast<int64_t>(rng() % kh),
          static_cast<int64_t>(rng() % kw)};
}

// ---- Random cases -----------------------------------------------------------------------------------

Tensor vals(Shape s, std::mt19937& rng, bool specials) {
  return random_tensor(s, rng, specials);
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c;
  c.kind = kind;
  // Conv variants: the short form with stride 1 and 2, then the general form (groups, dilation,
  // per-axis strides and asymmetric pads).
  const auto conv = [&] {
    return variant == 2 ? random_general_geom(rng, big) : random_geom(rng, big, 1 + variant);
  };
  switch (kind) {
    case OpKind::Conv2d: {
      const Geom g = conv();
      c.attrs.ints = g.ints();
      c.in = {vals(Shape{g.n, g.c, g.h, g.w}, rng, specials),
              vals(Shape{g.o, g.cg(), g.kh, g.kw}, rng, specials), vals(Shape{g.o}, rng, specials)};
      return c;
    }
    case OpKind::Conv2dBackwardInput: {
      const Geom g = conv();
      c.attrs.ints = g.ints(g.h, g.w);
      c.in = {vals(Shape{g.o, g.cg(), g.kh, g.kw}, rng, specials),
              vals(Shape{g.n, g.o, g.oh(), g.ow()}, rng, specials)};
      return c;
    }
    case OpKind::Conv2dBackwardWeight: {
      const Geom g = conv();
      c.attrs.ints = g.ints(g.kh, g.kw);
      c.in = {vals(Shape{g.n, g.c, g.h, g.w}, rng, specials),
              vals(Shape{g.n, g.o, g.oh(), g.ow()}, rng, specials)};
      return c;
    }
    case OpKind::Conv2dBackwardBias: {
      // Big: 16 channels of 12·4884 elements, so the per-channel split reaches 3 threads; OH·OW not a
      // multiple of 32, so images start at every lane offset of the canonical sum.
      const Shape s =
          big ? Shape{12, 16, 66, 74}
              : Shape{small_dim(rng), small_dim(rng), small_dim(rng), static_cast<int64_t>(1 + rng() % 7)};
      c.in = {vals(s, rng, specials)};
      return c;
    }
    case OpKind::MaxPool2d:
    case OpKind::MaxPool2dBackward: {
      if (variant > 0) {  // a general window
        c.attrs.ints = pool_ints(rng, variant);
        const auto& v = c.attrs.ints;
        // H ≥ kh − pt − pb, so the padded image holds one window.
        const int64_t h0 = std::max<int64_t>(1, v[0] - v[4] - v[6]),
                      w0 = std::max<int64_t>(1, v[1] - v[5] - v[7]);
        const Shape s =
            big ? Shape{16, 16, 32, 32}
                : Shape{small_dim(rng) % 5 + 1, small_dim(rng) % 5 + 1, h0 + static_cast<int64_t>(rng() % 17),
                        w0 + static_cast<int64_t>(rng() % 17)};
        c.in = {distinct_pool_input(s, rng, specials)};
        if (kind == OpKind::MaxPool2dBackward) {
          const PoolG g = pool_g(s, v);
          c.in.push_back(vals(Shape{s[0], s[1], g.oh(), g.ow()}, rng, specials));
        }
        return c;
      }
      static constexpr int64_t kEven[] = {2, 4, 6, 10, 14, 22, 32};
      const Shape s =
          big ? Shape{16, 16, 32, 32}
              : Shape{small_dim(rng) % 8 + 1, small_dim(rng) % 8 + 1, kEven[rng() % 7], kEven[rng() % 7]};
      c.in = {pool_input(s, rng, specials)};
      if (kind == OpKind::MaxPool2dBackward)
        c.in.push_back(vals(Shape{s[0], s[1], s[2] / 2, s[3] / 2}, rng, specials));
      return c;
    }
    case OpKind::GlobalAvgPool: {
      const Shape s = big ? Shape{4, 64, 28, 28}
                          : Shape{small_dim(rng) % 5 + 1, small_dim(rng) % 7 + 1, small_dim(rng) % 12 + 1,
                                  small_dim(rng) % 12 + 1};
      c.in = {vals(s, rng, specials)};
      return c;
    }
    case OpKind::GlobalAvgPoolBackward: {
      const int64_t h = big ? 28 : small_dim(rng) % 12 + 1, w = big ? 28 : small_dim(rng) % 12 + 1;
      c.attrs.ints = {h, w};
      c.in = {vals(big ? Shape{4, 64, 1, 1} : Shape{small_dim(rng) % 5 + 1, small_dim(rng) % 7 + 1, 1, 1},
                   rng, specials)};
      return c;
    }
    case OpKind::SumSquares: {
      c.in = {vals(big ? Shape{223, 229} : random_shape(rng, 0, 3), rng, specials)};
      return c;
    }
    case OpKind::ClipCoefficient: {
      // Variant 0: total norm below max_norm (coefficient 1); variant 1: above (clipping).
      const int64_t parts = 1 + static_cast<int64_t>(rng() % (big ? 40 : 7));
      const float max_norm = variant == 0 ? 10.0f : 0.5f;
      c.attrs.floats = {max_norm};
      for (int64_t i = 0; i < parts; ++i)
        c.in.push_back(scalar(random_values(1, rng, 0.0f, 2.0f, specials)[0]));
      return c;
    }
    case OpKind::Scale: {
      c.in = {vals(big ? Shape{223, 229} : random_shape(rng, 0, 3), rng, specials),
              scalar(random_values(1, rng, -2.0f, 2.0f, specials)[0])};
      return c;
    }
    default:
      break;
  }
  return std::nullopt;
}

std::optional<std::vector<Expected>> expect(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  switch (c.kind) {
    case OpKind::Conv2d:
      return std::vector<Expected>{conv64(conv_geom_of(c), in[0], in[1], &in[2])};
    case OpKind::Conv2dBackwardInput: {
      const Shape &w = in[0].shape(), &dy = in[1].shape();
      const auto& v = c.attrs.ints;
      const int64_t groups = v.size() == 11 ? v[8] : 1;
      const Geom g = geom_of_ints(v, 2, dy[0], w[1] * groups, v[v.size() - 2], v.back(), w[0], w[2], w[3]);
      return std::vector<Expected>{conv_dx64(g, in[0], in[1])};
    }
    case OpKind::Conv2dBackwardWeight: {
      const Shape &x = in[0].shape(), &dy = in[1].shape();
      const auto& v = c.attrs.ints;
      const Geom g = geom_of_ints(v, 2, x[0], x[1], x[2], x[3], dy[1], v[v.size() - 2], v.back());
      return std::vector<Expected>{conv_dw64(g, in[0], in[1])};
    }
    case OpKind::Conv2dBackwardBias:
      return std::vector<Expected>{conv_db64(in[0])};
    case OpKind::MaxPool2d:
    case OpKind::MaxPool2dBackward: {
      const Tensor& x = in[0];
      if (!c.attrs.ints.empty()) {
        const PoolG g = pool_g(x.shape(), c.attrs.ints);
        const int64_t planes = x.shape()[0] * x.shape()[1];
        Expected e;
        if (c.kind == OpKind::MaxPool2d) {
          for (int64_t pl = 0; pl < planes; ++pl)
            for (int64_t r = 0; r < g.oh(); ++r)
              for (int64_t s = 0; s < g.ow(); ++s) e.want.push_back(x[chosen64_general(x, g, pl, r, s)]);
          e.tol.assign(e.want.size(), 0.0);
        } else {
          // Overlapping windows add their dy: m terms, m − 1 float additions, each within u·Σ|terms|.
          std::vector<double> mag(at(x.numel()), 0.0), count(at(x.numel()), 0.0);
          e.want.assign(at(x.numel()), 0.0);
          for (int64_t pl = 0; pl < planes; ++pl)
            for (int64_t r = 0; r < g.oh(); ++r)
              for (int64_t s = 0; s < g.ow(); ++s) {
                const size_t k = at(chosen64_general(x, g, pl, r, s));
                const double d = in[1][(pl * g.oh() + r) * g.ow() + s];
                e.want[k] += d;
                mag[k] += std::fabs(d);
                count[k] += 1;
              }
          for (size_t k = 0; k < mag.size(); ++k) e.tol.push_back(kU * count[k] * mag[k]);
        }
        return std::vector<Expected>{e};
      }
      const int64_t ny = x.numel() / 4;
      Expected e;
      if (c.kind == OpKind::MaxPool2d) {
        for (int64_t i = 0; i < ny; ++i) e.want.push_back(x[chosen64(x, i)]);
      } else {
        e.want.assign(at(x.numel()), 0.0);
        for (int64_t i = 0; i < ny; ++i) e.want[at(chosen64(x, i))] = in[1][i];
      }
      e.tol.assign(e.want.size(), 0.0);  // selections and copies: exact
      return std::vector<Expected>{e};
    }
    case OpKind::GlobalAvgPool: {
      const Tensor& x = in[0];
      const int64_t hw = x.shape()[2] * x.shape()[3];
      Expected e;
      for (int64_t pl = 0; pl < x.numel() / hw; ++pl) {
        double sum = 0, mag = 0;
        for (int64_t i = 0; i < hw; ++i) {
          sum += x[pl * hw + i];
          mag += std::fabs(x[pl * hw + i]);
        }
        e.want.push_back(sum / static_cast<double>(hw));
        // The canonical sum's bound, then one division (u, relative).
        e.tol.push_back(canonical_bound(hw) * mag / static_cast<double>(hw) + kU * std::fabs(e.want.back()));
      }
      return std::vector<Expected>{e};
    }
    case OpKind::GlobalAvgPoolBackward: {
      const int64_t hw = c.attrs.ints[0] * c.attrs.ints[1];
      Expected e;
      for (float d : in[0].values())
        for (int64_t i = 0; i < hw; ++i) {
          e.want.push_back(d / static_cast<double>(hw));
          e.tol.push_back(kU * std::fabs(e.want.back()));
        }
      return std::vector<Expected>{e};
    }
    case OpKind::SumSquares: {
      double s = 0;
      for (float v : in[0].values()) s += static_cast<double>(v) * v;
      // Each square rounded once (u), then the canonical sum; all terms are ≥ 0, so Σ|terms| = s.
      return std::vector<Expected>{{{s}, {(canonical_bound(in[0].numel()) + kU) * s}}};
    }
    case OpKind::ClipCoefficient: {
      double total = 0;
      for (const Tensor& t : in) total += t[0];
      const double coef = c.attrs.floats[0] / (std::sqrt(total) + 1e-6);
      // total (≤ 2 tree levels + lanes, ~7u), sqrt (½ of that + u), + 1e-6 (u), ÷ (u): ≤ 16u relative.
      return std::vector<Expected>{{{std::min(coef, 1.0)}, {16 * kU * std::min(coef, 1.0)}}};
    }
    case OpKind::Scale: {
      Expected e;
      const double s = in[1][0];
      for (float v : in[0].values()) {
        e.want.push_back(v * s);
        e.tol.push_back(kU * std::fabs(v * s));
      }
      return std::vector<Expected>{e};
    }
    default:
      break;
  }
  return std::nullopt;
}

const Attrs kConvAttrs{{1, 1}, {}};
const Attrs kBackAttrs{{1, 1, 5, 5}, {}};

const RegisterOpTests kConv2dTests(
    OpKind::Conv2d,
    {3,
     make_case,
     expect,
     {{kConvAttrs, {Shape{1, 2, 5, 5}, Shape{3, 3, 3, 3}, Shape{3}}, "channels disagree"},
      {kConvAttrs, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{4}}, "bias length"},
      {kConvAttrs, {Shape{2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "rank-3 x"},
      {{{0, 1}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "stride 0"},
      {{{1, -1}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "negative pad"},
      {{{1, 3}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "pad as large as the kernel"},
      {{{1, 0}, {}}, {Shape{1, 2, 2, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "kernel taller than the image"},
      {{{1, 0}, {}}, {Shape{0, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "empty batch"},
      {{{1}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "one int"},
      {{{1, 1, 0, 0, 0, 0, 1, 1}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "eight ints"},
      {{{1, 1, 0, 0, 0, 0, 1, 1, 2}, {}},
       {Shape{1, 4, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}},
       "2 groups, O = 3"},
      {{{1, 1, 0, 0, 0, 0, 1, 1, 2}, {}},
       {Shape{1, 4, 5, 5}, Shape{4, 4, 3, 3}, Shape{4}},
       "w holds C, not C/G"},
      {{{1, 1, 0, 0, 0, 0, 1, 1, 3}, {}},
       {Shape{1, 4, 5, 5}, Shape{3, 1, 3, 3}, Shape{3}},
       "3 groups, C = 4"},
      {{{1, 1, 0, 0, 0, 0, 1, 1, 0}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "0 groups"},
      {{{1, 1, 0, 0, 0, 0, 0, 1, 1}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "dilation 0"},
      {{{1, 0, 0, 0, 0, 0, 1, 1, 1}, {}}, {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}}, "stride_w 0"},
      {{{1, 1, 5, 0, 0, 0, 2, 1, 1}, {}},
       {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}},
       "pad_top = extent 5"},
      {{{1, 1, 0, 0, 0, -1, 1, 1, 1}, {}},
       {Shape{1, 2, 5, 5}, Shape{3, 2, 3, 3}, Shape{3}},
       "negative pad_right"},
      {{{1, 1, 0, 0, 0, 0, 3, 1, 1}, {}},
       {Shape{1, 2, 6, 5}, Shape{3, 2, 3, 3}, Shape{3}},
       "dilated extent 7 > 6"}},
     {0, 1, 2}});
const RegisterOpTests kConv2dBackwardInputTests(
    OpKind::Conv2dBackwardInput,
    {3,
     make_case,
     expect,
     {{kBackAttrs, {Shape{3, 2, 3, 3}, Shape{1, 3, 4, 5}}, "dy height is not the output height of H"},
      {kBackAttrs, {Shape{3, 2, 3, 3}, Shape{1, 4, 5, 5}}, "dy channels disagree with O"},
      {{{1, 1, 0, 5}, {}}, {Shape{3, 2, 3, 3}, Shape{1, 3, 5, 5}}, "H = 0"},
      {{{1, 1, 5}, {}}, {Shape{3, 2, 3, 3}, Shape{1, 3, 5, 5}}, "three ints"},
      {kBackAttrs, {Shape{3, 2, 3}, Shape{1, 3, 5, 5}}, "rank-3 w"},
      {{{1, 1, 1, 1, 1, 1, 1, 1, 1, 5}, {}}, {Shape{3, 2, 3, 3}, Shape{1, 3, 5, 5}}, "ten ints"},
      {{{1, 1, 1, 1, 1, 1, 1, 1, 2, 5, 5}, {}}, {Shape{3, 2, 3, 3}, Shape{1, 3, 5, 5}}, "2 groups, O = 3"},
      {{{1, 1, 1, 1, 1, 1, 2, 2, 1, 5, 5}, {}},
       {Shape{3, 2, 3, 3}, Shape{1, 3, 5, 5}},
       "dilation 2: dy is 3×3"}}});
const RegisterOpTests kConv2dBackwardWeightTests(
    OpKind::Conv2dBackwardWeight,
    {3,
     make_case,
     expect,
     {{{{1, 1, 3, 3}, {}}, {Shape{2, 2, 5, 5}, Shape{1, 3, 5, 5}}, "batch sizes disagree"},
      {{{1, 1, 3, 3}, {}}, {Shape{1, 2, 5, 5}, Shape{1, 3, 5, 4}}, "dy width is not the output width"},
      {{{1, 1, 0, 3}, {}}, {Shape{1, 2, 5, 5}, Shape{1, 3, 5, 5}}, "KH = 0"},
      {{{2, 3, 3, 3}, {}}, {Shape{1, 2, 5, 5}, Shape{1, 3, 4, 4}}, "pad as large as the kernel"},
      {{{1, 1, 0, 0, 0, 0, 1, 1, 2, 3, 3}, {}}, {Shape{1, 3, 5, 5}, Shape{1, 4, 3, 3}}, "2 groups, C = 3"},
      {{{1, 1, 0, 0, 0, 0, 1, 1, 1, 3}, {}}, {Shape{1, 2, 5, 5}, Shape{1, 3, 3, 3}}, "ten ints"}}});
const RegisterOpTests kConv2dBackwardBiasTests(
    OpKind::Conv2dBackwardBias,
    {1, make_case, expect, {{{}, {Shape{3, 4, 5}}, "rank-3 dy"}, {{}, {Shape{2, 0, 3, 3}}, "no channels"}}});
const Attrs kStem{{3, 3, 2, 2, 1, 1, 1, 1}, {}};
const RegisterOpTests kMaxPool2dTests(
    OpKind::MaxPool2d,
    {3,
     make_case,
     expect,
     {{{}, {Shape{1, 1, 3, 4}}, "odd height"},
      {{}, {Shape{1, 1, 4, 5}}, "odd width"},
      {{}, {Shape{4, 4}}, "rank 2"},
      {{}, {Shape{1, 1, 0, 2}}, "empty image"},
      {kStem, {Shape{1, 1, 0, 4}}, "general window, empty image"},
      {{{3, 3, 2, 2, 1, 1, 1}, {}}, {Shape{1, 1, 4, 4}}, "seven ints"},
      {{{3, 3, 0, 2, 1, 1, 1, 1}, {}}, {Shape{1, 1, 4, 4}}, "stride 0"},
      {{{3, 3, 2, 2, 3, 1, 1, 1}, {}}, {Shape{1, 1, 4, 4}}, "pad as large as the kernel"},
      {{{3, 3, 2, 2, 1, -1, 1, 1}, {}}, {Shape{1, 1, 4, 4}}, "negative pad"},
      {{{0, 3, 2, 2, 0, 1, 0, 1}, {}}, {Shape{1, 1, 4, 4}}, "kernel height 0"},
      {{{3, 9, 1, 1, 0, 0, 0, 0}, {}}, {Shape{1, 1, 16, 16}}, "kernel width 9 (sides ≤ 8)"},
      {{{5, 3, 1, 1, 0, 0, 0, 0}, {}}, {Shape{1, 1, 4, 4}}, "window taller than the image"}},
     {0}});
const RegisterOpTests kMaxPool2dBackwardTests(
    OpKind::MaxPool2dBackward,
    {3,
     make_case,
     expect,
     {{{}, {Shape{1, 1, 4, 4}, Shape{1, 1, 2, 3}}, "dy shape"},
      {{}, {Shape{1, 1, 3, 4}, Shape{1, 1, 1, 2}}, "odd height"},
      {{}, {Shape{1, 1, 4, 4}}, "no dy"},
      {kStem, {Shape{1, 1, 4, 4}, Shape{1, 1, 2, 3}}, "general window, dy shape"},
      {{{3, 3, 2, 2, 1, 1, 1, 1, 0}, {}}, {Shape{1, 1, 4, 4}, Shape{1, 1, 2, 2}}, "nine ints"}}});
const RegisterOpTests kGlobalAvgPoolTests(OpKind::GlobalAvgPool,
                                          {1,
                                           make_case,
                                           expect,
                                           {{{}, {Shape{1, 3, 4}}, "rank 3"},
                                            {{}, {Shape{1, 3, 0, 4}}, "H = 0"},
                                            {{{1}, {}}, {Shape{1, 3, 2, 2}}, "an int"}},
                                           {0}});
const RegisterOpTests kGlobalAvgPoolBackwardTests(OpKind::GlobalAvgPoolBackward,
                                                  {1,
                                                   make_case,
                                                   expect,
                                                   {{{{2, 2}, {}}, {Shape{1, 3, 2, 1}}, "dy not [N,C,1,1]"},
                                                    {{{0, 2}, {}}, {Shape{1, 3, 1, 1}}, "H = 0"},
                                                    {{{2}, {}}, {Shape{1, 3, 1, 1}}, "one int"}}});
const RegisterOpTests kSumSquaresTests(
    OpKind::SumSquares,
    {1, make_case, expect, {{{}, {Shape{3}, Shape{3}}, "two inputs"}, {{{1}, {}}, {Shape{3}}, "an int"}}});
const RegisterOpTests kClipCoefficientTests(
    OpKind::ClipCoefficient,
    {2,
     make_case,
     expect,
     {{{{}, {1.0f}}, {Shape{}, Shape{2}}, "non-scalar input"},
      {{{}, {0.0f}}, {Shape{}}, "max_norm 0"},
      {{{}, {-1.0f}}, {Shape{}}, "negative max_norm"},
      {{{}, {std::numeric_limits<float>::infinity()}}, {Shape{}}, "infinite max_norm"},
      {{{}, {std::numeric_limits<float>::quiet_NaN()}}, {Shape{}}, "NaN max_norm"},
      {{{}, {}}, {Shape{}}, "no max_norm"},
      {{{}, {1.0f}}, {}, "no inputs"}}});
const RegisterOpTests kScaleTests(
    OpKind::Scale,
    {1, make_case, expect, {{{}, {Shape{3}, Shape{1}}, "rank-1 factor"}, {{}, {Shape{3}}, "no factor"}}});

std::vector<float> values_of(const Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

}  // namespace

TEST_CASE("conv2d and its gradients on a hand-computed 3×3 example") {
  const Tensor x(Shape{1, 1, 3, 3}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor w(Shape{1, 1, 2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor b(Shape{1}, std::vector<float>{0.5f});
  // Stride 1, no padding: y[oh, ow] = 0.5 + Σ w[i, j]·x[oh + i, ow + j].
  CHECK(values_of(run_everywhere({OpKind::Conv2d, {{1, 0}, {}}, {x, w, b}})[0]) ==
        std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f});
  // Stride 2, pad 1: the windows start at rows/columns −1 and 1, so the first output sees only x[0,0]·w[1,1].
  CHECK(values_of(run_everywhere({OpKind::Conv2d, {{2, 1}, {}}, {x, w, b}})[0]) ==
        std::vector<float>{4.5f, 18.5f, 36.5f, 77.5f});
  // Gradients of Σ y (dy = 1): dx counts the kernel weights covering each pixel, dw sums each window,
  // db counts the outputs.
  const Tensor ones(Shape{1, 1, 2, 2}, std::vector<float>{1, 1, 1, 1});
  CHECK(values_of(run_everywhere({OpKind::Conv2dBackwardInput, {{1, 0, 3, 3}, {}}, {w, ones}})[0]) ==
        std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4});
  CHECK(values_of(run_everywhere({OpKind::Conv2dBackwardWeight, {{1, 0, 2, 2}, {}}, {x, ones}})[0]) ==
        std::vector<float>{12, 16, 24, 28});
  CHECK(values_of(run_everywhere({OpKind::Conv2dBackwardBias, {}, {ones}})[0]) == std::vector<float>{4});
  // Stride 2, pad 1 backward: each pixel is covered by exactly one tap, so dx is w scattered.
  CHECK(values_of(run_everywhere({OpKind::Conv2dBackwardInput, {{2, 1, 3, 3}, {}}, {w, ones}})[0]) ==
        std::vector<float>{4, 3, 4, 2, 1, 2, 4, 3, 4});
}

TEST_CASE("conv2d in the general form: dilation, asymmetric stride and pads, depthwise groups by hand") {
  const Tensor x(Shape{1, 1, 3, 3}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor w(Shape{1, 1, 2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor b(Shape{1}, std::vector<float>{0.5f});
  // Dilation 2: the one window's taps are the corners, 0.5 + 1·1 + 2·3 + 3·7 + 4·9.
  const Attrs dilated{{1, 1, 0, 0, 0, 0, 2, 2, 1}, {}};
  CHECK(values_of(run_everywhere({OpKind::Conv2d, dilated, {x, w, b}})[0]) == std::vector<float>{64.5f});
  // Its gradients for dy = 1: dx is w on the corners, dw the corners of x.
  const Tensor one(Shape{1, 1, 1, 1}, std::vector<float>{1});
  CHECK(values_of(run_everywhere(
            {OpKind::Conv2dBackwardInput, {{1, 1, 0, 0, 0, 0, 2, 2, 1, 3, 3}, {}}, {w, one}})[0]) ==
        std::vector<float>{1, 0, 2, 0, 0, 0, 3, 0, 4});
  CHECK(values_of(run_everywhere(
            {OpKind::Conv2dBackwardWeight, {{1, 1, 0, 0, 0, 0, 2, 2, 1, 2, 2}, {}}, {x, one}})[0]) ==
        std::vector<float>{1, 3, 7, 9});
  // Stride (1, 2), pad_top 1 and pad_right 1: OH = (3 + 1 − 2)/1 + 1 = 3, OW = (3 + 1 − 2)/2 + 1 = 2;
  // y[oh, ow] = 0.5 + Σ w[i, j]·xp(oh + i − 1, 2·ow + j).
  const Attrs asym{{1, 2, 1, 0, 0, 1, 1, 1, 1}, {}};
  const std::vector<Tensor> ya = run_everywhere({OpKind::Conv2d, asym, {x, w, b}});
  REQUIRE(ya[0].shape() == Shape{1, 1, 3, 2});
  CHECK(values_of(ya[0]) == std::vector<float>{11.5f, 9.5f, 37.5f, 21.5f, 67.5f, 33.5f});
  // Depthwise (2 groups of one channel): channel 0 is the 3×3 example with w, channel 1 (10 … 18) sums
  // its 2×2 windows (w = 1).
  Tensor x2(Shape{1, 2, 3, 3});
  for (int64_t i = 0; i < 18; ++i) x2[i] = static_cast<float>(i + 1);
  const Tensor w2(Shape{2, 1, 2, 2}, std::vector<float>{1, 2, 3, 4, 1, 1, 1, 1});
  const Tensor b2(Shape{2}, std::vector<float>{0.5f, 0});
  const Attrs depthwise{{1, 1, 0, 0, 0, 0, 1, 1, 2}, {}};
  CHECK(values_of(run_everywhere({OpKind::Conv2d, depthwise, {x2, w2, b2}})[0]) ==
        std::vector<float>{37.5f, 47.5f, 67.5f, 77.5f, 48, 52, 60, 64});
  const Tensor ones(Shape{1, 2, 2, 2}, std::vector<float>(8, 1.0f));
  CHECK(values_of(run_everywhere(
            {OpKind::Conv2dBackwardInput, {{1, 1, 0, 0, 0, 0, 1, 1, 2, 3, 3}, {}}, {w2, ones}})[0]) ==
        std::vector<float>{1, 3, 2, 4, 10, 6, 3, 7, 4, 1, 2, 1, 2, 4, 2, 1, 2, 1});
  CHECK(values_of(run_everywhere(
            {OpKind::Conv2dBackwardWeight, {{1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 2}, {}}, {x2, ones}})[0]) ==
        std::vector<float>{12, 16, 24, 28, 48, 52, 60, 64});
}

TEST_CASE("conv2d: the general form {s, s, p, p, p, p, 1, 1, 1} gives the bits of the short form {s, p}") {
  std::mt19937 rng(41);
  for (int trial = 0; trial < 12; ++trial) {
    Geom g = random_geom(rng, trial == 0, 1 + trial % 2);
    const Tensor x = random_tensor(Shape{g.n, g.c, g.h, g.w}, rng, true);
    const Tensor w = random_tensor(Shape{g.o, g.c, g.kh, g.kw}, rng, true);
    const Tensor b = random_tensor(Shape{g.o}, rng, true);
    const Tensor dy = random_tensor(Shape{g.n, g.o, g.oh(), g.ow()}, rng, true);
    std::vector<std::vector<Tensor>> outs;
    for (bool general : {false, true}) {
      g.general = general;
      outs.push_back({run_everywhere({OpKind::Conv2d, {g.ints(), {}}, {x, w, b}})[0],
                      run_everywhere({OpKind::Conv2dBackwardInput, {g.ints(g.h, g.w), {}}, {w, dy}})[0],
                      run_everywhere({OpKind::Conv2dBackwardWeight, {g.ints(g.kh, g.kw), {}}, {x, dy}})[0]});
    }
    for (size_t k = 0; k < 3; ++k) CHECK(bitwise_equal(outs[0][k], outs[1][k]));
  }
}

TEST_CASE("conv2d: padded taps are +0 terms of the chain (signed zero and infinite weights)") {
  // One pixel x = −0, a 3×3 kernel with pad 1, bias −0, weights +0 except the centre 1. Chain in
  // (kh, kw) order: acc = −0; tap (0,0) is padding: fma(+0, +0, −0) = +0; … centre: fma(−0, 1, +0) = +0.
  // Skipping the padded taps would give −0 + (−0·1) = −0: the contract's +0 is what im2col + GEMM gives.
  std::vector<float> wv(9, 0.0f);
  wv[4] = 1.0f;
  const Case c{OpKind::Conv2d,
               {{1, 1}, {}},
               {Tensor(Shape{1, 1, 1, 1}, std::vector<float>{-0.0f}), Tensor(Shape{1, 1, 3, 3}, wv),
                Tensor(Shape{1}, std::vector<float>{-0.0f})}};
  CHECK(float_bits(run_everywhere(c)[0][0]) == 0u);
  // Without padding the same chain (centre tap only) keeps −0.
  const Case unpadded{
      OpKind::Conv2d,
      {{1, 0}, {}},
      {Tensor(Shape{1, 1, 1, 1}, std::vector<float>{-0.0f}),
       Tensor(Shape{1, 1, 1, 1}, std::vector<float>{1.0f}), Tensor(Shape{1}, std::vector<float>{-0.0f})}};
  CHECK(float_bits(run_everywhere(unpadded)[0][0]) == 0x80000000u);
  // An infinite weight on a tap that is padding for some output makes that output NaN (0·inf).
  Case inf = c;
  inf.in[0][0] = 2.0f;
  inf.in[1][0] = std::numeric_limits<float>::infinity();
  CHECK(std::isnan(run_everywhere(inf)[0][0]));
}

TEST_CASE("conv2d_backward_* are the adjoints of conv2d (float64 models) and match them") {
  // <dy, conv(x, w)> = <dx(w, dy), x> = <dw(x, dy), w> and the bias term <dy, b> = <db, b>: checks the
  // models of the backward ops against the forward one, on stride 1 and 2 and the general form (groups,
  // dilation, per-axis strides, asymmetric pads), then the float kernels
  // against those models (the VJP's nodes, run here without a graph).
  std::mt19937 rng(11);
  for (int trial = 0; trial < 36; ++trial) {
    const Geom g = trial % 3 == 2 ? random_general_geom(rng, false) : random_geom(rng, false, 1 + trial % 2);
    const Tensor x = random_tensor(Shape{g.n, g.c, g.h, g.w}, rng, false);
    const Tensor w = random_tensor(Shape{g.o, g.cg(), g.kh, g.kw}, rng, false);
    const Tensor dy = random_tensor(Shape{g.n, g.o, g.oh(), g.ow()}, rng, false);
    const Expected y = conv64(g, x, w, nullptr), dx = conv_dx64(g, w, dy), dw = conv_dw64(g, x, dy);
    double lhs = 0, by_x = 0, by_w = 0, scale = 0;
    for (size_t i = 0; i < y.want.size(); ++i) {
      lhs += dy[static_cast<int64_t>(i)] * y.want[i];
      scale += std::fabs(dy[static_cast<int64_t>(i)] * y.want[i]);
    }
    for (size_t i = 0; i < dx.want.size(); ++i) by_x += x[static_cast<int64_t>(i)] * dx.want[i];
    for (size_t i = 0; i < dw.want.size(); ++i) by_w += w[static_cast<int64_t>(i)] * dw.want[i];
    CHECK(std::fabs(lhs - by_x) <= 1e-12 * (scale + 1));
    CHECK(std::fabs(lhs - by_w) <= 1e-12 * (scale + 1));
    check_against({OpKind::Conv2dBackwardInput, {g.ints(g.h, g.w), {}}, {w, dy}}, {dx});
    check_against({OpKind::Conv2dBackwardWeight, {g.ints(g.kh, g.kw), {}}, {x, dy}}, {dw});
  }
}

TEST_CASE("max_pool2d: the first NaN, else the first maximum; the gradient goes to that element") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // Six windows side by side (H = 2, W = 12); scan order within a window: (0,0), (0,1), (1,0), (1,1).
  const float win[6][4] = {
      {-0.0f, 0.0f, -1.0f, -2.0f},  // tie −0/+0: the first (−0)
      {0.0f, -0.0f, -1.0f, -2.0f},  // tie +0/−0: the first (+0)
      {1.0f, nan, 5.0f, nan},       // the first NaN, although 5 is larger
      {nan, 7.0f, 1.0f, 2.0f},      // NaN first
      {1.0f, 3.0f, 3.0f, 2.0f},     // equal maxima: the first
      {-inf, -inf, -inf, -inf},     // all equal: element 0
  };
  const int want_k[6] = {0, 0, 1, 0, 1, 0};
  Tensor x(Shape{1, 1, 2, 12});
  for (int wnd = 0; wnd < 6; ++wnd)
    for (int k = 0; k < 4; ++k) x[(k >> 1) * 12 + 2 * wnd + (k & 1)] = win[wnd][k];
  const std::vector<Tensor> y = run_everywhere({OpKind::MaxPool2d, {}, {x}});
  Tensor dy(Shape{1, 1, 1, 6});
  for (int wnd = 0; wnd < 6; ++wnd) dy[wnd] = static_cast<float>(10 + wnd);
  const std::vector<Tensor> dx = run_everywhere({OpKind::MaxPool2dBackward, {}, {x, dy}});
  for (int wnd = 0; wnd < 6; ++wnd) {
    CAPTURE(wnd);
    const float chosen = win[wnd][want_k[wnd]];
    if (std::isnan(chosen))
      CHECK(std::isnan(y[0][wnd]));
    else
      CHECK(float_bits(y[0][wnd]) == float_bits(chosen));
    for (int k = 0; k < 4; ++k) {
      const float g = dx[0][(k >> 1) * 12 + 2 * wnd + (k & 1)];
      CHECK(float_bits(g) == (k == want_k[wnd] ? float_bits(dy[wnd]) : 0u));
    }
  }
}

TEST_CASE("clip_coefficient: exactly 1 at or below the threshold, max_norm/(norm + 1e-6) above") {
  auto coef = [](std::vector<float> s, float max_norm) {
    Case c{OpKind::ClipCoefficient, {{}, {max_norm}}, {}};
    for (float v : s) c.in.push_back(scalar(v));
    return run_everywhere(c)[0][0];
  };
  CHECK(float_bits(coef({0.25f}, 1.0f)) == float_bits(1.0f));       // norm 0.5
  CHECK(float_bits(coef({0.0f, 0.0f}, 1.0f)) == float_bits(1.0f));  // zero gradients
  CHECK(float_bits(coef({0.5f, 0.49f}, 1.0f)) == float_bits(1.0f));
  // Above: Σ = 9 + 16 = 25, norm 5 (exact), coefficient = 1 / (5 + 1e-6f) in float.
  const float c = coef({9.0f, 16.0f}, 1.0f);
  CHECK(float_bits(c) == float_bits(1.0f / (5.0f + 1e-6f)));
  CHECK(std::fabs(c - 0.2) <= 1e-6);
  // Scaling a gradient by it is one rounded product per element.
  const Tensor g(Shape{3}, std::vector<float>{3.0f, -4.0f, 0.1f});
  const std::vector<Tensor> scaled = run_everywhere({OpKind::Scale, {}, {g, scalar(c)}});
  for (int64_t i = 0; i < 3; ++i) CHECK(float_bits(scaled[0][i]) == float_bits(g[i] * c));
  // Non-finite totals: an infinite norm clips to 0; a NaN norm gives NaN (torch.clamp propagates it).
  CHECK(float_bits(coef({std::numeric_limits<float>::infinity(), 1.0f}, 1.0f)) == 0u);
  CHECK(std::isnan(coef({std::numeric_limits<float>::quiet_NaN(), 1.0f}, 1.0f)));
}

TEST_CASE("sum_squares: a scalar input and the lane order of the canonical sum") {
  CHECK(run_everywhere({OpKind::SumSquares, {}, {scalar(-3.0f)}})[0][0] == 9.0f);
  // 33 elements: element 32 lands in lane 0 after element 0, and 2^24 + 1 rounds to 2^24 (ties to
  // even), so the order of the additions shows. Lanes: [0] = (2^12)² + 1 → 2^24, [1..31] = 1. Tree:
  // w = 16: [0] = 2^24 + 1 → 2^24, [1..15] = 2; w = 8: [0] = 2^24 + 2, [1..7] = 4; w = 4: 2^24 + 6;
  // w = 2: 2^24 + 14, [1] = 16; w = 1: 2^24 + 30. (A sequential sum would stay at 2^24.)
  Tensor x(Shape{33});
  for (int64_t i = 0; i < 33; ++i) x[i] = 1.0f;
  x[0] = 4096.0f;
  CHECK(run_everywhere({OpKind::SumSquares, {}, {x}})[0][0] == 16777216.0f + 30.0f);
}

TEST_CASE("max_pool2d with a general window: ResNet's stem, overlapping windows add in window order") {
  // 4×4 plane, 3×3 windows with stride 2 and pad 1 → 2×2; x(1,1) = 100 is the maximum of all four.
  Tensor x(Shape{1, 1, 4, 4});
  for (int64_t i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  x[5] = 100.0f;
  const Attrs stem{{3, 3, 2, 2, 1, 1, 1, 1}, {}};
  const std::vector<Tensor> y = run_everywhere({OpKind::MaxPool2d, stem, {x}});
  REQUIRE(y[0].shape() == Shape{1, 1, 2, 2});
  for (int64_t i = 0; i < 4; ++i) CHECK(y[0][i] == 100.0f);
  // ((1 + 2⁻²⁴) + 2⁻²⁴) − ½ = ½ in window order (each 2⁻²⁴ rounds away); adding the two small
  // terms first would give ½ + 2⁻²³.
  const Tensor dy(Shape{1, 1, 2, 2}, std::vector<float>{1.0f, 0x1p-24f, 0x1p-24f, -0.5f});
  const std::vector<Tensor> dx = run_everywhere({OpKind::MaxPool2dBackward, stem, {x, dy}});
  for (int64_t i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(float_bits(dx[0][i]) == float_bits(i == 5 ? 0.5f : 0.0f));
  }
  // Padding is never chosen, even against −inf; ties keep the first in row-major order (−0 before +0).
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor t(Shape{1, 1, 2, 2}, std::vector<float>{-inf, -inf, -0.0f, 0.0f});
  const std::vector<Tensor> yt = run_everywhere({OpKind::MaxPool2d, {{2, 2, 1, 1, 1, 1, 0, 0}, {}}, {t}});
  REQUIRE(yt[0].shape() == Shape{1, 1, 2, 2});
  CHECK(yt[0][0] == -inf);  // the window of only x(0,0) and padding
  CHECK(float_bits(yt[0][2]) == float_bits(-0.0f));
  CHECK(float_bits(yt[0][3]) == float_bits(-0.0f));
}

TEST_CASE("max_pool2d: ints {2,2,2,2,0,0,0,0} give the bits of ints {} (NaN, ties, −0 in dy)") {
  std::mt19937 rng(31);
  Tensor x = pool_input(Shape{2, 3, 6, 8}, rng, true);
  x[7] = std::numeric_limits<float>::quiet_NaN();
  x[8] = -0.0f;
  x[9] = 0.0f;
  Tensor dy = random_tensor(Shape{2, 3, 3, 4}, rng, false);
  dy[1] = -0.0f;
  const Attrs general{{2, 2, 2, 2, 0, 0, 0, 0}, {}};
  const std::vector<Tensor> y0 = run_everywhere({OpKind::MaxPool2d, {}, {x}});
  const std::vector<Tensor> y1 = run_everywhere({OpKind::MaxPool2d, general, {x}});
  CHECK(bitwise_equal(y0[0], y1[0]));
  const std::vector<Tensor> d0 = run_everywhere({OpKind::MaxPool2dBackward, {}, {x, dy}});
  const std::vector<Tensor> d1 = run_everywhere({OpKind::MaxPool2dBackward, general, {x, dy}});
  CHECK(bitwise_equal(d0[0], d1[0]));
}

TEST_CASE("global_avg_pool: the canonical sum of the plane over float(H·W); its gradient dy/float(H·W)") {
  const Tensor x(Shape{1, 2, 2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f});
  const std::vector<Tensor> y = run_everywhere({OpKind::GlobalAvgPool, {}, {x}});
  REQUIRE(y[0].shape() == Shape{1, 2, 1, 1});
  CHECK(y[0][0] == 3.5f);
  // Six 0.1f in lanes 0..5, then the tree: lanes 0, 1 gain lanes 4, 5 (p = 0.1 + 0.1), then lanes 2, 3
  // (q = p + 0.1), then q + q; then ÷ 6.
  const float p = 0.1f + 0.1f, q = p + 0.1f;
  CHECK(float_bits(y[0][1]) == float_bits((q + q) / 6.0f));
  const Tensor dy(Shape{1, 2, 1, 1}, std::vector<float>{1.0f, -0.0f});
  const std::vector<Tensor> dx = run_everywhere({OpKind::GlobalAvgPoolBackward, {{1, 3}, {}}, {dy}});
  REQUIRE(dx[0].shape() == Shape{1, 2, 1, 3});
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(float_bits(dx[0][i]) == float_bits(1.0f / 3.0f));
    CHECK(float_bits(dx[0][3 + i]) == float_bits(-0.0f));
  }
}
