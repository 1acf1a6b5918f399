// Float64 pooling gradients and global average pooling. max_pool2d_backward with ints = {} is a selection
// (the float32 reference, widened); with a general window the chosen elements are the float32
// reference's (pool_choice_at) and overlapping windows' dy add in double, in increasing window order.
// global_avg_pool: a sequential double sum over the plane divided by H·W; its backward dy / (H·W).
#include "ops/float64/internal.h"
#include "ops/pointwise.h"

namespace tribunal::f64 {

void max_pool2d_backward(const Call& c) {
  if (c.attrs.ints.empty()) {
    selected<OpKind::MaxPool2dBackward>(c);
    return;
  }
  const Tensor &x = *c.in[0], &dy = *c.in[1];
  const auto& v = c.attrs.ints;
  PoolGeom g;
  g.h = x.shape()[2];
  g.w = x.shape()[3];
  g.oh = dy.shape()[2];
  g.ow = dy.shape()[3];
  g.kh = v[0];
  g.kw = v[1];
  g.sh = v[2];
  g.sw = v[3];
  g.pt = v[4];
  g.pl = v[5];
  std::vector<double>& dx = c.out[0];
  const int64_t planes = x.shape()[0] * x.shape()[1];
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x.data() + pl * g.h * g.w;
    for (int64_t r = 0; r < g.oh; ++r)
      for (int64_t s = 0; s < g.ow; ++s) {
        const size_t k = static_cast<size_t>(pl * g.h * g.w + pool_choice_at(plane, g, r, s));
        dx[k] += static_cast<double>(dy.data()[(pl * g.oh + r) * g.ow + s]);
      }
  }
}

void global_avg_pool(const Call& c) {
  const Tensor& x = *c.in[0];
  const int64_t hw = x.shape()[2] * x.shape()[3], planes = x.shape()[0] * x.shape()[1];
  for (int64_t pl = 0; pl < planes; ++pl) {
    double s = 0;
    for (int64_t i = 0; i < hw; ++i) s += static_cast<double>(x.data()[pl * hw + i]);
    c.out[0][static_cast<size_t>(pl)] = s / static_cast<double>(hw);
  }
}

void global_avg_pool_backward(const Call& c) {
  const Tensor& dy = *c.in[0];
  const double hw = static_cast<double>(c.attrs.ints[0] * c.attrs.ints[1]);
  const int64_t n = dy.numel(), per = c.attrs.ints[0] * c.attrs.ints[1];
  for (int64_t pl = 0; pl < n; ++pl)
    for (int64_t i = 0; i < per; ++i)
      c.out[0][static_cast<size_t>(pl * per + i)] = static_cast<double>(dy.data()[pl]) / hw;
}

}  // namespace tribunal::f64
