// ReduceMean, ReduceMeanBackward and Expand (ops/kernels/reduce_mean.cpp): their random cases, float64
// model and bad inputs for the per-op checks of test_op_coverage.cpp and test_float64.cpp, plus
// hand-computed values, the agreement of reduce_mean with the canonical sum and the refusals' messages
// (docs/numerics.md "Mean over an axis; expand").
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

Shape shape_of(const std::vector<int64_t>& d) {
  return Shape(std::span<const int64_t>(d));
}

/// outer × dim × inner of `s` around `axis`.
void split(const Shape& s, int axis, int64_t& outer, int64_t& dim, int64_t& inner) {
  outer = inner = 1;
  dim = s[axis];
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int, bool specials) {
  Case c{kind, {}, {}};
  if (kind == OpKind::ReduceMean || kind == OpKind::ReduceMeanBackward) {
    // RMSNorm's mean over the last axis of [B, T, D] (big: many rows), or any axis of a random shape.
    const Shape x = big ? (rng() % 2 ? Shape{7, 31, 229} : Shape{3, 1000, 17}) : random_shape(rng, 1, 4);
    const int axis =
        big ? static_cast<int>(rng() % 3) : static_cast<int>(rng() % static_cast<uint32_t>(x.rank()));
    if (kind == OpKind::ReduceMean) {
      c.attrs.ints = {axis};
      c.in.push_back(random_tensor(x, rng, specials));
    } else {
      std::vector<int64_t> d(x.dims().begin(), x.dims().end());
      d[static_cast<size_t>(axis)] = 1;
      c.attrs.ints = {axis, x[axis]};
      c.in.push_back(random_tensor(shape_of(d), rng, specials));
    }
    return c;
  }
  if (kind == OpKind::Expand) {
    // Grouped-query attention's k[:, :, None] expanded to [B, KV, G, T, E] (here rank 4), or a random
    // broadcast: each target dim the source's or any where the source has 1, extra leading dims.
    if (big) {
      c.attrs.ints = {7, 4, 61, 67};
      c.in.push_back(random_tensor(rng() % 2 ? Shape{7, 1, 61, 67} : Shape{61, 1}, rng, specials));
      return c;
    }
    const Shape x = random_shape(rng, 0, 3);
    std::vector<int64_t> t;
    const int extra = x.rank() < 4 ? static_cast<int>(rng() % static_cast<uint32_t>(5 - x.rank())) : 0;
    for (int i = 0; i < extra; ++i) t.push_back(small_dim(rng) % 5 + 1);
    for (int d = 0; d < x.rank(); ++d) t.push_back(x[d] == 1 && rng() % 2 ? small_dim(rng) % 6 + 1 : x[d]);
    c.attrs.ints = t;
    c.in.push_back(random_tensor(x, rng, specials));
    return c;
  }
  return std::nullopt;
}

std::optional<std::vector<Expected>> expect(const Case& c) {
  const Tensor& x = c.in[0];
  Expected e;
  if (c.kind == OpKind::ReduceMean) {
    int64_t outer, dim, inner;
    split(x.shape(), static_cast<int>(c.attrs.ints[0]), outer, dim, inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < dim; ++k) {
          s += x[(o * dim + k) * inner + i];
          mag += std::fabs(x[(o * dim + k) * inner + i]);
        }
        e.want.push_back(s / static_cast<double>(dim));
        e.tol.push_back(kRel * mag / static_cast<double>(dim));
      }
    return std::vector<Expected>{e};
  }
  if (c.kind == OpKind::ReduceMeanBackward) {
    const int axis = static_cast<int>(c.attrs.ints[0]);
    const int64_t n = c.attrs.ints[1];
    int64_t outer, one, inner;
    split(x.shape(), axis, outer, one, inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k = 0; k < n; ++k)
        for (int64_t i = 0; i < inner; ++i) {
          const double v = x[o * inner + i] / static_cast<double>(n);
          e.want.push_back(v);
          e.tol.push_back(kRel * std::fabs(v));
        }
    return std::vector<Expected>{e};
  }
  if (c.kind == OpKind::Expand) {
    const Shape y = shape_of({c.attrs.ints.begin(), c.attrs.ints.end()});
    for (int64_t i = 0; i < y.numel(); ++i) {
      // x's element: y's coordinates right-aligned, x's dims of 1 read coordinate 0.
      int64_t rem = i, off = 0, stride = 1;
      for (int d = y.rank() - 1; d >= 0; --d) {
        const int64_t coord = rem % y[d];
        rem /= y[d];
        const int dx = d - (y.rank() - x.shape().rank());
        if (dx >= 0) {
          if (x.shape()[dx] != 1) off += coord * stride;
          stride *= x.shape()[dx];
        }
      }
      e.want.push_back(x[off]);
      e.tol.push_back(0.0);
    }
    return std::vector<Expected>{e};
  }
  return std::nullopt;
}

const RegisterOpTests kReduceMeanTests(OpKind::ReduceMean, {1,
                                                            make_case,
                                                            expect,
                                                            {{{{2}, {}}, {Shape{2, 3}}, "axis 2 of rank 2"},
                                                             {{{-1}, {}}, {Shape{2, 3}}, "negative axis"},
                                                             {{{}, {}}, {Shape{2, 3}}, "no axis"},
                                                             {{{0, 1}, {}}, {Shape{2, 3}}, "two ints"},
                                                             {{{0}, {}}, {Shape{}}, "rank 0"}},
                                                            {0}});
const RegisterOpTests kReduceMeanBackwardTests(OpKind::ReduceMeanBackward,
                                               {1,
                                                make_case,
                                                expect,
                                                {{{{1, 3}, {}}, {Shape{2, 2}}, "dy's axis dim is not 1"},
                                                 {{{2, 3}, {}}, {Shape{2, 1}}, "axis 2 of rank 2"},
                                                 {{{1, -1}, {}}, {Shape{2, 1}}, "negative N"},
                                                 {{{1}, {}}, {Shape{2, 1}}, "no N"},
                                                 {{{0, 3}, {}}, {Shape{}}, "rank 0"}},
                                                {0}});
const RegisterOpTests kExpandTests(OpKind::Expand, {1,
                                                    make_case,
                                                    expect,
                                                    {{{{4}, {}}, {Shape{3}}, "3 does not broadcast to 4"},
                                                     {{{3}, {}}, {Shape{2, 3}}, "target of lower rank"},
                                                     {{{2, -3}, {}}, {Shape{3}}, "negative target dim"},
                                                     {{{1, 1, 1, 1, 3}, {}}, {Shape{3}}, "rank-5 target"},
                                                     {{{3, 3}, {}}, {Shape{3}, Shape{3}}, "two inputs"}},
                                                    {0}});

std::vector<Tensor> run(OpKind kind, Attrs attrs, std::vector<Tensor> in) {
  return run_case(Case{kind, std::move(attrs), std::move(in)}, nullptr);
}

std::string refusal(OpKind kind, Attrs attrs, std::vector<Shape> in) {
  try {
    infer_shapes(kind, attrs, in);
  } catch (const OpError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("reduce_mean: hand-computed means over each axis; keepdims shape") {
  const Tensor x(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 7});
  const std::vector<Tensor> rows = run(OpKind::ReduceMean, {{1}, {}}, {x});
  CHECK(rows[0].shape() == Shape{2, 1});
  CHECK(rows[0][0] == 2.0f);
  CHECK(rows[0][1] == 16.0f / 3.0f);  // one float division of the exact sum 16
  const std::vector<Tensor> cols = run(OpKind::ReduceMean, {{0}, {}}, {x});
  CHECK(cols[0].shape() == Shape{1, 3});
  CHECK(cols[0][0] == 2.5f);
  CHECK(cols[0][1] == 3.5f);
  CHECK(cols[0][2] == 5.0f);
  // Nothing to average: the canonical sum +0 divided by 0 is NaN, as NumPy's mean of nothing.
  CHECK(std::isnan(run(OpKind::ReduceMean, {{1}, {}}, {Tensor(Shape{2, 0})})[0][0]));
}

TEST_CASE("reduce_mean: bitwise the canonical sum along the axis divided by float(N)") {
  std::mt19937 rng(11);
  const Tensor x = random_tensor(Shape{3, 77, 5}, rng, false, -100.0f, 100.0f);
  const std::vector<Tensor> y = run(OpKind::ReduceMean, {{1}, {}}, {x});
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 5; ++i) {
      const float want = canonical_sum(x.data() + o * 77 * 5 + i, 77, 5) / 77.0f;
      CHECK(std::memcmp(&want, &y[0].data()[o * 5 + i], sizeof want) == 0);
    }
}

TEST_CASE("reduce_mean_backward: dy/N broadcast along the axis; its VJP and reduce_mean's agree") {
  const Tensor dy(Shape{2, 1}, std::vector<float>{3, -6});
  const std::vector<Tensor> dx = run(OpKind::ReduceMeanBackward, {{1, 3}, {}}, {dy});
  CHECK(dx[0].shape() == Shape{2, 3});
  const std::vector<float> want{1, 1, 1, -2, -2, -2};
  for (int64_t i = 0; i < 6; ++i) CHECK(dx[0][i] == want[static_cast<size_t>(i)]);
  // reduce_mean's VJP emits reduce_mean_backward with N = the input's axis dim.
  EagerVjpBuilder b;
  const ValueRef x = b.add(Tensor(Shape{2, 3})), y = b.add(Tensor(Shape{2, 1})), g = b.add(dy);
  const ValueRef ins[] = {x}, outs[] = {y}, grads[] = {g};
  const bool needs[] = {true};
  ValueRef in_grad = 0;
  op_info(OpKind::ReduceMean)
      .vjp(b, VjpArgs{Attrs{{1}, {}}, ins, outs, grads, needs}, std::span<ValueRef>(&in_grad, 1));
  REQUIRE(b.value(in_grad).shape() == Shape{2, 3});
  for (int64_t i = 0; i < 6; ++i) CHECK(b.value(in_grad)[i] == want[static_cast<size_t>(i)]);
}

TEST_CASE("expand: GQA's repeated heads and a row broadcast, bit copies (NaN payload, −0 kept)") {
  const Tensor k(Shape{2, 1, 2}, std::vector<float>{1, 2, 3, 4});
  const std::vector<Tensor> y = run(OpKind::Expand, {{2, 3, 2}, {}}, {k});
  CHECK(y[0].shape() == Shape{2, 3, 2});
  const std::vector<float> want{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
  for (int64_t i = 0; i < 12; ++i) CHECK(y[0][i] == want[static_cast<size_t>(i)]);
  const Tensor s(Shape{2}, std::vector<float>{float_from_bits(0x7fc01234u), -0.0f});
  const std::vector<Tensor> r = run(OpKind::Expand, {{3, 1, 2}, {}}, {s});
  CHECK(r[0].shape() == Shape{3, 1, 2});
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(float_bits(r[0][2 * i]) == 0x7fc01234u);
    CHECK(float_bits(r[0][2 * i + 1]) == 0x80000000u);
  }
  CHECK(run(OpKind::Expand, {{0, 3}, {}}, {Tensor(Shape{1, 3})})[0].numel() == 0);
}

TEST_CASE("expand's VJP sums the repeated positions back (sum_to_shape)") {
  EagerVjpBuilder b;
  const ValueRef x = b.add(Tensor(Shape{2, 1})), y = b.add(Tensor(Shape{3, 2, 2}));
  const ValueRef g = b.add(Tensor(Shape{3, 2, 2}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  const ValueRef ins[] = {x}, outs[] = {y}, grads[] = {g};
  const bool needs[] = {true};
  ValueRef in_grad = 0;
  op_info(OpKind::Expand)
      .vjp(b, VjpArgs{Attrs{{3, 2, 2}, {}}, ins, outs, grads, needs}, std::span<ValueRef>(&in_grad, 1));
  REQUIRE(b.value(in_grad).shape() == Shape{2, 1});
  CHECK(b.value(in_grad)[0] == 1 + 2 + 5 + 6 + 9 + 10);
  CHECK(b.value(in_grad)[1] == 3 + 4 + 7 + 8 + 11 + 12);
}

TEST_CASE("reduce_mean, reduce_mean_backward, expand: refusals name the op and what is wrong") {
  CHECK(refusal(OpKind::ReduceMean, {{2}, {}}, {Shape{2, 3}}) ==
        "reduce_mean: axis 2 is out of range for rank 2 ([2, 3])");
  CHECK(refusal(OpKind::ReduceMeanBackward, {{1, 3}, {}}, {Shape{2, 2}}) ==
        "reduce_mean_backward: dy must have dim 1 on axis 1, got [2, 2]");
  CHECK(refusal(OpKind::Expand, {{4}, {}}, {Shape{3}}) ==
        "expand: the input's shape [3] does not broadcast to the target [4]");
}
