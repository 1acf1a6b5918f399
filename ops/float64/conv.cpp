// Float64 convolution (NCHW, G groups, weights [O, C/G, KH, KW], per-axis stride and dilation, zero
// padding per side). The three contractions are im2col + the float64 GEMM, one image and group at a time:
//   conv2d:           y[n] (Og×P)  = b (every column) + W_g (Og×K) · cols_g[n] (K×P)
//   backward_input:   dcol_g (K×P) = W_gᵀ · dy_g[n] (Og×P), then col2im adds dcol into dx (taps in the image)
//   backward_weight:  dW_g (Og×K) += dy_g[n] (Og×P) · cols_g[n]ᵀ, for n = 0..N−1 (the naive chain runs
//                                    over (n, oh, ow) in order, as the reference's)
// with K = (C/G)·KH·KW taps t = (c·KH + kh)·KW + kw per group, P = OH·OW positions q = oh·OW + ow, and
// cols[n][(c·KH + kh)·KW + kw, q] = x[n, c, oh·stride_h + kh·dilation_h − pad_top, ow·stride_w +
// kw·dilation_w − pad_left] over all C channels, +0 in the padding (ops/conv_elements.h's conv_padded);
// group g's rows are the K from g·K. The bias gradient is a sequential double sum over (n, q).
#include "ops/conv_elements.h"
#include "ops/float64/internal.h"

namespace tribunal::f64 {
namespace {

/// The geometry from x[N,C,H,W] (or its size), the weights' [O, ·, KH, KW], dy's [·, ·, OH, OW] and the
/// ints (the short or general form, then `extra` sizes); infer_shapes has checked that they agree.
ConvGeom geom(const Attrs& a, size_t extra, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh,
              int64_t kw, int64_t oh, int64_t ow) {
  ConvGeom g = conv_geom_from(a.ints.data(), a.ints.size() - extra, n, c, h, w, o, kh, kw);
  g.oh = oh;
  g.ow = ow;
  return g;
}

/// cols[t·P + q] = xp(n, tap t of position q) for every channel's taps, as double.
void im2col(const float* x, const ConvGeom& g, int64_t n, double* cols) {
  const int64_t p = g.positions();
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        double* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow)
            row[oh * g.ow + ow] = conv_padded(x, g, n, c, oh * g.stride_h + i * g.dil_h - g.pad_top,
                                              ow * g.stride_w + j * g.dil_w - g.pad_left);
      }
}

}  // namespace

/// x[N,C,H,W], w[O,C/G,KH,KW], b[O]; the short or general ints → y[N,O,OH,OW].
void conv2d(const Call& c) {
  const Shape &xs = c.in[0]->shape(), &ws = c.in[1]->shape(), &ys = c.out_shapes[0];
  const ConvGeom g = geom(c.attrs, 0, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], ys[2], ys[3]);
  const int64_t k = g.taps(), p = g.positions(), og = g.og();
  const std::vector<double> w = widen(*c.in[1]);
  const Tensor& b = *c.in[2];
  c.pool.parallel_for(g.n, [&](int64_t n0, int64_t n1) {  // images side by side: the same calls each
    std::vector<double> cols(static_cast<size_t>(g.c * g.kh * g.kw * p));
    for (int64_t n = n0; n < n1; ++n) {
      double* y = c.out[0].data() + n * g.o * p;
      for (int64_t o = 0; o < g.o; ++o)
        for (int64_t q = 0; q < p; ++q) y[o * p + q] = b[o];
      im2col(c.in[0]->data(), g, n, cols.data());
      for (int64_t gr = 0; gr < g.groups; ++gr)
        gemm(c.gemm, {w.data() + gr * og * k, cols.data() + gr * k * p, y + gr * og * p, og, p, k, k, p, p,
                      false, false, true});
    }
  });
}

/// w[O,C/G,KH,KW], dy[N,O,OH,OW]; the forward's ints, H, W → dx[N,C,H,W], the adjoint of conv2d in x.
void conv2d_backward_input(const Call& c) {
  const Shape &ws = c.in[0]->shape(), &dys = c.in[1]->shape(), &xs = c.out_shapes[0];
  const ConvGeom g = geom(c.attrs, 2, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], dys[2], dys[3]);
  const int64_t k = g.taps(), p = g.positions(), og = g.og();
  const std::vector<double> w = widen(*c.in[0]), dy = widen(*c.in[1]);
  c.pool.parallel_for(g.n, [&](int64_t n0, int64_t n1) {  // images side by side: each its own dx
    std::vector<double> dcol(static_cast<size_t>(g.c * g.kh * g.kw * p));
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t gr = 0; gr < g.groups; ++gr)
        gemm(c.gemm, {w.data() + gr * og * k, dy.data() + (n * g.o + gr * og) * p, dcol.data() + gr * k * p,
                      k, p, og, k, p, p, true, false, false});
      double* dx = c.out[0].data() + n * g.c * g.h * g.w;
      for (int64_t ch = 0; ch < g.c; ++ch)
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const double* row = dcol.data() + ((ch * g.kh + i) * g.kw + j) * p;
            for (int64_t oh = 0; oh < g.oh; ++oh) {
              const int64_t hh = oh * g.stride_h + i * g.dil_h - g.pad_top;
              if (hh < 0 || hh >= g.h) continue;
              for (int64_t ow = 0; ow < g.ow; ++ow) {
                const int64_t ww = ow * g.stride_w + j * g.dil_w - g.pad_left;
                if (ww >= 0 && ww < g.w) dx[(ch * g.h + hh) * g.w + ww] += row[oh * g.ow + ow];
              }
            }
          }
    }
  });
}

/// x[N,C,H,W], dy[N,O,OH,OW]; the forward's ints, KH, KW → dw[O,C/G,KH,KW].
void conv2d_backward_weight(const Call& c) {
  const Shape &xs = c.in[0]->shape(), &dys = c.in[1]->shape(), &ws = c.out_shapes[0];
  const ConvGeom g = geom(c.attrs, 2, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], dys[2], dys[3]);
  const int64_t k = g.taps(), p = g.positions(), og = g.og();
  const std::vector<double> dy = widen(*c.in[1]);
  std::vector<double> cols(static_cast<size_t>(g.c * g.kh * g.kw * p));
  for (int64_t n = 0; n < g.n; ++n) {
    im2col(c.in[0]->data(), g, n, cols.data());
    // Images in order (each dW element's chain runs over n); each product's tiles over the pool.
    for (int64_t gr = 0; gr < g.groups; ++gr)
      gemm(c.gemm,
           {dy.data() + (n * g.o + gr * og) * p, cols.data() + gr * k * p, c.out[0].data() + gr * og * k, og,
            k, p, p, p, k, false, true, true},
           c.pool);
  }
}

/// dy[N,O,OH,OW] → db[O] = Σ over (n, oh, ow) of dy[n, o, oh, ow].
void conv2d_backward_bias(const Call& c) {
  const Shape& s = c.in[0]->shape();
  const int64_t n = s[0], o = s[1], p = s[2] * s[3];
  const float* dy = c.in[0]->data();
  double* db = c.out[0].data();
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t oi = 0; oi < o; ++oi)
      for (int64_t q = 0; q < p; ++q) db[oi] += dy[(ni * o + oi) * p + q];
}

}  // namespace tribunal::f64
