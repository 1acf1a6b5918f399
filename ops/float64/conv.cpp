// Float64 convolution (NCHW, weights [O, C, KH, KW], square stride, symmetric zero padding). The three
// contractions are im2col + the float64 GEMM, one image at a time:
//   conv2d:           y[n] (O×P)  = b (every column) + W (O×K) · cols[n] (K×P)
//   backward_input:   dcol (K×P)  = Wᵀ · dy[n] (O×P), then col2im adds dcol into dx (taps in the image)
//   backward_weight:  dW (O×K)   += dy[n] (O×P) · cols[n]ᵀ, for n = 0..N−1 (the naive chain runs over
//                                   (n, oh, ow) in order, as the reference's)
// with K = C·KH·KW taps t = (c·KH + kh)·KW + kw, P = OH·OW positions q = oh·OW + ow, and
// cols[n][t, q] = x[n, c, oh·stride + kh − pad, ow·stride + kw − pad], +0 in the padding
// (ops/conv_elements.h's conv_padded). The bias gradient is a sequential double sum over (n, q).
#include "ops/conv_elements.h"
#include "ops/float64/internal.h"

namespace tribunal::f64 {
namespace {

/// The geometry from x[N,C,H,W] (or its size), the weights' [O, ·, KH, KW], dy's [·, ·, OH, OW] and
/// the ints {stride, pad, …}; infer_shapes has checked that they agree.
ConvGeom geom(const Attrs& a, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
              int64_t oh, int64_t ow) {
  return {n, c, h, w, o, kh, kw, a.ints[0], a.ints[1], oh, ow};
}

/// cols[t·P + q] = xp(n, tap t of position q), as double.
void im2col(const float* x, const ConvGeom& g, int64_t n, double* cols) {
  const int64_t p = g.positions();
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        double* row = cols + ((c * g.kh + i) * g.kw + j) * p;
        for (int64_t oh = 0; oh < g.oh; ++oh)
          for (int64_t ow = 0; ow < g.ow; ++ow)
            row[oh * g.ow + ow] =
                conv_padded(x, g, n, c, oh * g.stride + i - g.pad, ow * g.stride + j - g.pad);
      }
}

}  // namespace

/// x[N,C,H,W], w[O,C,KH,KW], b[O]; ints {stride, pad} → y[N,O,OH,OW].
void conv2d(const Call& c) {
  const Shape &xs = c.in[0]->shape(), &ws = c.in[1]->shape(), &ys = c.out_shapes[0];
  const ConvGeom g = geom(c.attrs, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], ys[2], ys[3]);
  const int64_t k = g.taps(), p = g.positions();
  const std::vector<double> w = widen(*c.in[1]);
  std::vector<double> cols(static_cast<size_t>(k * p));
  const Tensor& b = *c.in[2];
  for (int64_t n = 0; n < g.n; ++n) {
    double* y = c.out[0].data() + n * g.o * p;
    for (int64_t o = 0; o < g.o; ++o)
      for (int64_t q = 0; q < p; ++q) y[o * p + q] = b[o];
    im2col(c.in[0]->data(), g, n, cols.data());
    gemm(c.gemm, {w.data(), cols.data(), y, g.o, p, k, k, p, p, false, false, true});
  }
}

/// w[O,C,KH,KW], dy[N,O,OH,OW]; ints {stride, pad, H, W} → dx[N,C,H,W], the adjoint of conv2d in x.
void conv2d_backward_input(const Call& c) {
  const Shape &ws = c.in[0]->shape(), &dys = c.in[1]->shape(), &xs = c.out_shapes[0];
  const ConvGeom g = geom(c.attrs, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], dys[2], dys[3]);
  const int64_t k = g.taps(), p = g.positions();
  const std::vector<double> w = widen(*c.in[0]), dy = widen(*c.in[1]);
  std::vector<double> dcol(static_cast<size_t>(k * p));
  for (int64_t n = 0; n < g.n; ++n) {
    gemm(c.gemm, {w.data(), dy.data() + n * g.o * p, dcol.data(), k, p, g.o, k, p, p, true, false, false});
    double* dx = c.out[0].data() + n * g.c * g.h * g.w;
    for (int64_t ch = 0; ch < g.c; ++ch)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const double* row = dcol.data() + ((ch * g.kh + i) * g.kw + j) * p;
          for (int64_t oh = 0; oh < g.oh; ++oh) {
            const int64_t hh = oh * g.stride + i - g.pad;
            if (hh < 0 || hh >= g.h) continue;
            for (int64_t ow = 0; ow < g.ow; ++ow) {
              const int64_t ww = ow * g.stride + j - g.pad;
              if (ww >= 0 && ww < g.w) dx[(ch * g.h + hh) * g.w + ww] += row[oh * g.ow + ow];
            }
          }
        }
  }
}

/// x[N,C,H,W], dy[N,O,OH,OW]; ints {stride, pad, KH, KW} → dw[O,C,KH,KW].
void conv2d_backward_weight(const Call& c) {
  const Shape &xs = c.in[0]->shape(), &dys = c.in[1]->shape(), &ws = c.out_shapes[0];
  const ConvGeom g = geom(c.attrs, xs[0], xs[1], xs[2], xs[3], ws[0], ws[2], ws[3], dys[2], dys[3]);
  const int64_t k = g.taps(), p = g.positions();
  const std::vector<double> dy = widen(*c.in[1]);
  std::vector<double> cols(static_cast<size_t>(k * p));
  for (int64_t n = 0; n < g.n; ++n) {
    im2col(c.in[0]->data(), g, n, cols.data());
    gemm(c.gemm,
         {dy.data() + n * g.o * p, cols.data(), c.out[0].data(), g.o, k, p, p, p, k, false, true, true});
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
