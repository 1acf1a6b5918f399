// BroadcastBinary and SumToShape (ops/kernels/broadcast.cpp): their random cases, float64 model and bad
// inputs for the per-op checks of test_op_coverage.cpp and test_float64.cpp, plus hand-checked values,
// IEEE specials and the agreement of SumToShape with the canonical reduction (docs/numerics.md).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
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

int64_t tiny_dim(std::mt19937& rng) {
  static constexpr int64_t kDims[] = {1, 2, 3, 5, 7};
  return kDims[rng() % std::size(kDims)];
}

/// A shape that broadcasts to `full`: some dims set to 1, some leading dims dropped.
Shape broadcast_source(const Shape& full, std::mt19937& rng) {
  const int drop = full.rank() == 0 ? 0 : static_cast<int>(rng() % static_cast<uint32_t>(full.rank() + 1));
  std::vector<int64_t> d;
  for (int i = drop; i < full.rank(); ++i) d.push_back(rng() % 3 == 0 ? 1 : full[i]);
  return shape_of(d);
}

/// The two input shapes of a broadcast_binary case, from the patterns of exported graphs.
std::pair<Shape, Shape> binary_shapes(std::mt19937& rng, bool big) {
  if (big) {
    switch (rng() % 3) {
      case 0:
        return {Shape{223, 229}, Shape{229}};  // bias add after a matmul
      case 1:
        return {Shape{7, 31, 229}, Shape{1, 1, 229}};  // RMSNorm's γ
      default:
        return {Shape{7, 1, 229}, Shape{7, 31, 1}};  // [B,1,T] + [B,H,1]
    }
  }
  const int64_t m = small_dim(rng), n = small_dim(rng), b = tiny_dim(rng), t = tiny_dim(rng),
                h = tiny_dim(rng);
  std::pair<Shape, Shape> s;
  switch (rng() % 7) {
    case 0:
      s = {Shape{m, n}, Shape{n}};
      break;
    case 1:
      s = {Shape{b, t, n}, Shape{1, 1, n}};
      break;
    case 2:
      s = {random_shape(rng, 0, 3), Shape{}};
      break;
    case 3:
      s = {Shape{b, 1, t}, Shape{b, h, 1}};
      break;
    case 4: {
      const Shape same = random_shape(rng, 0, 2);
      s = {same, same};
      break;
    }
    case 5:
      s = {Shape{m, 1}, Shape{1, n}};
      break;
    default: {
      const Shape full{tiny_dim(rng), tiny_dim(rng), tiny_dim(rng), tiny_dim(rng)};
      s = {broadcast_source(full, rng), broadcast_source(full, rng)};
      break;
    }
  }
  if (rng() % 2) std::swap(s.first, s.second);
  return s;
}

/// Divisors of magnitude in [0.5, 1.5) and random sign, so quotients stay finite and the central
/// differences of the VJP check well conditioned.
Tensor divisor(const Shape& s, std::mt19937& rng) {
  Tensor t = random_tensor(s, rng, false, 0.5f, 1.5f);
  for (int64_t i = 0; i < t.numel(); ++i)
    if (rng() % 2) t.data()[i] = -t[i];
  return t;
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c{kind, {}, {}};
  if (kind == OpKind::BroadcastBinary) {
    const auto [a, b] = binary_shapes(rng, big);
    c.attrs.ints = {variant};
    c.in.push_back(random_tensor(a, rng, specials));
    c.in.push_back(variant == 3 ? divisor(b, rng) : random_tensor(b, rng, specials));
    return c;
  }
  if (kind == OpKind::SumToShape) {
    Shape x, target;
    if (big) {
      const bool rows = rng() % 2;
      x = rows ? Shape{61, 389} : Shape{7, 31, 229};
      target = rows ? Shape{389} : Shape{1, 31, 1};
    } else {
      x = rng() % 2 ? Shape{small_dim(rng), small_dim(rng)}
                    : Shape{tiny_dim(rng), tiny_dim(rng), tiny_dim(rng), tiny_dim(rng)};
      target = broadcast_source(x, rng);
    }
    c.attrs.ints = {target.dims().begin(), target.dims().end()};
    c.attrs.floats = {variant == 0 ? 1.0f : -1.0f};
    c.in.push_back(random_tensor(x, rng, specials));
    return c;
  }
  return std::nullopt;
}

/// Source offsets of output element i of the NumPy broadcast `y` of `s` (right-aligned, dims of 1 repeat).
int64_t source_offset(const Shape& s, const Shape& y, int64_t i) {
  int64_t off = 0, stride = 1;
  for (int d = y.rank() - 1; d >= 0; --d) {
    const int64_t c = i % y[d];
    i /= y[d];
    const int ds = d - (y.rank() - s.rank());
    if (ds >= 0) {
      if (s[ds] != 1) off += c * stride;
      stride *= s[ds];
    }
  }
  return off;
}

std::optional<std::vector<Expected>> expect(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  Expected e;
  if (c.kind == OpKind::BroadcastBinary) {
    const Shape y = infer_shapes(c.kind, c.attrs, std::vector<Shape>{in[0].shape(), in[1].shape()})[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      const double a = in[0][source_offset(in[0].shape(), y, i)],
                   b = in[1][source_offset(in[1].shape(), y, i)];
      const double r = c.attrs.ints[0] == 0   ? a + b
                       : c.attrs.ints[0] == 1 ? a - b
                       : c.attrs.ints[0] == 2 ? a * b
                                              : a / b;
      e.want.push_back(r);
      // One correctly rounded float operation: within half an ulp of r (for + and −, of |a| + |b|).
      e.tol.push_back(kRel * (c.attrs.ints[0] <= 1 ? std::fabs(a) + std::fabs(b) : std::fabs(r)));
    }
    return std::vector<Expected>{e};
  }
  if (c.kind == OpKind::SumToShape) {
    const Shape& x = in[0].shape();
    const Shape target = shape_of({c.attrs.ints.begin(), c.attrs.ints.end()});
    std::vector<double> sum(static_cast<size_t>(target.numel()), 0.0), mag(sum.size(), 0.0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      // The target element x[i] broadcasts from: x's coordinates with the target's dims of 1 zeroed.
      int64_t rem = i, j = 0, stride = 1;
      for (int d = x.rank() - 1; d >= 0; --d) {
        const int64_t coord = rem % x[d];
        rem /= x[d];
        const int dt = d - (x.rank() - target.rank());
        if (dt >= 0) {
          if (target[dt] != 1) j += coord * stride;
          stride *= target[dt];
        }
      }
      sum[static_cast<size_t>(j)] += in[0][i];
      mag[static_cast<size_t>(j)] += std::fabs(in[0][i]);
    }
    for (size_t j = 0; j < sum.size(); ++j) {
      e.want.push_back(c.attrs.floats[0] * sum[j]);
      e.tol.push_back(kRel * mag[j]);
    }
    return std::vector<Expected>{e};
  }
  return std::nullopt;
}

const RegisterOpTests kBroadcastBinaryTests(
    OpKind::BroadcastBinary,
    {4,
     make_case,
     expect,
     {{{{0}, {}}, {Shape{2, 3}, Shape{4}}, "trailing dims 3 and 4 do not broadcast"},
      {{{2}, {}}, {Shape{2, 3}, Shape{3, 3}}, "leading dims 2 and 3 do not broadcast"},
      {{{4}, {}}, {Shape{3}, Shape{3}}, "op code 4"},
      {{{-1}, {}}, {Shape{3}, Shape{3}}, "op code -1"},
      {{{}, {}}, {Shape{3}, Shape{3}}, "no op code"},
      {{{0, 1}, {}}, {Shape{3}, Shape{3}}, "two ints"},
      {{{0}, {}}, {Shape{3}}, "one input"}},
     {0, 1}});
const RegisterOpTests kSumToShapeTests(
    OpKind::SumToShape, {2,
                         make_case,
                         expect,
                         {{{{3}, {2.0f}}, {Shape{2, 3}}, "sign 2"},
                          {{{3}, {0.0f}}, {Shape{2, 3}}, "sign 0"},
                          {{{3}, {std::numeric_limits<float>::quiet_NaN()}}, {Shape{2, 3}}, "NaN sign"},
                          {{{3}, {}}, {Shape{2, 3}}, "no sign"},
                          {{{4}, {1.0f}}, {Shape{2, 3}}, "target [4] does not broadcast to [2, 3]"},
                          {{{2, 1}, {1.0f}}, {Shape{3, 2}}, "target [2, 1] does not broadcast to [3, 2]"},
                          {{{1, 2, 3}, {1.0f}}, {Shape{2, 3}}, "target of higher rank"},
                          {{{-3}, {1.0f}}, {Shape{2, 3}}, "negative target dim"},
                          {{{1, 1, 1, 1, 1}, {1.0f}}, {Shape{2, 3}}, "rank-5 target"}}});

}  // namespace

TEST_CASE("broadcast_binary: hand-computed broadcasts of each op") {
  const Tensor a(Shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const Tensor b(Shape{3}, std::vector<float>{10, 20, 40});
  auto run = [&](int64_t code, const Tensor& x, const Tensor& z) {
    const std::vector<Tensor> y = run_everywhere({OpKind::BroadcastBinary, {{code}, {}}, {x, z}});
    return std::vector<float>(y[0].values().begin(), y[0].values().end());
  };
  CHECK(run(0, a, b) == std::vector<float>{11, 22, 43, 14, 25, 46});
  CHECK(run(1, b, a) == std::vector<float>{9, 18, 37, 6, 15, 34});
  CHECK(run(2, a, scalar(0.5f)) == std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3});
  CHECK(run(3, b, a) == std::vector<float>{10, 10, 40.0f / 3.0f, 2.5f, 4, 40.0f / 6.0f});
  // [2,1] ∘ [1,3] → [2,3]: an outer sum.
  const Tensor col(Shape{2, 1}, std::vector<float>{100, 200});
  const Tensor row(Shape{1, 3}, std::vector<float>{1, 2, 3});
  CHECK(run(0, col, row) == std::vector<float>{101, 102, 103, 201, 202, 203});
  CHECK(infer_shapes(OpKind::BroadcastBinary, {{0}, {}},
                     std::vector<Shape>{Shape{2, 1, 5}, Shape{4, 1}})[0] == Shape{2, 4, 5});
}

TEST_CASE("broadcast_binary: NaN, infinities, signed zeros and subnormals give the float operation's bits") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float sub = std::numeric_limits<float>::denorm_min();
  const std::vector<float> av{nan, inf, -inf, -0.0f, 0.0f, sub, -sub, 1.0f, inf, 3.0f};
  const Tensor a(Shape{10, 1}, av);
  const Tensor b(Shape{1, 10}, av);
  for (int64_t code = 0; code < 4; ++code) {
    CAPTURE(code);
    const Tensor y = run_everywhere({OpKind::BroadcastBinary, {{code}, {}}, {a, b}})[0];
    REQUIRE(y.shape() == Shape{10, 10});
    for (int i = 0; i < 10; ++i)
      for (int j = 0; j < 10; ++j) {
        const float x = av[static_cast<size_t>(i)], z = av[static_cast<size_t>(j)];
        const float want = code == 0 ? x + z : code == 1 ? x - z : code == 2 ? x * z : x / z;
        if (std::isnan(want))
          CHECK(std::isnan(y[i * 10 + j]));
        else
          CHECK(float_bits(y[i * 10 + j]) == float_bits(want));
      }
  }
}

TEST_CASE("sum_to_shape: the canonical sum, bitwise equal to sum_rows; sign −1 flips the sign bit") {
  std::mt19937 rng(31);
  const Tensor x = random_tensor(Shape{77, 13}, rng, true);
  const Tensor by_rows = run_everywhere({OpKind::SumRows, {}, {x}})[0];
  const Tensor to_cols = run_everywhere({OpKind::SumToShape, {{13}, {1.0f}}, {x}})[0];
  const Tensor to_cols2 = run_everywhere({OpKind::SumToShape, {{1, 13}, {1.0f}}, {x}})[0];
  CHECK(to_cols2.shape() == Shape{1, 13});
  const Tensor neg = run_everywhere({OpKind::SumToShape, {{13}, {-1.0f}}, {x}})[0];
  for (int64_t j = 0; j < 13; ++j) {
    CHECK(float_bits(to_cols[j]) == float_bits(by_rows[j]));
    CHECK(float_bits(to_cols2[j]) == float_bits(by_rows[j]));
    CHECK(float_bits(neg[j]) == (float_bits(by_rows[j]) ^ 0x80000000u));
  }
  // Summing each row ([77, 1]) is the canonical sum of the contiguous row.
  const Tensor rows = run_everywhere({OpKind::SumToShape, {{77, 1}, {1.0f}}, {x}})[0];
  for (int64_t i = 0; i < 77; ++i)
    CHECK(float_bits(rows[i]) == float_bits(canonical_sum(x.data() + i * 13, 13)));
  // To a scalar: the canonical sum of all elements in flat order.
  const Tensor all = run_everywhere({OpKind::SumToShape, {{}, {1.0f}}, {x}})[0];
  CHECK(float_bits(all[0]) == float_bits(canonical_sum(x.data(), x.numel())));
  // A NaN source: sign −1 flips the NaN's sign bit, as the CUDA kernel's negation does.
  Tensor n(Shape{3}, std::vector<float>{1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f});
  const Tensor pos_nan = run_everywhere({OpKind::SumToShape, {{}, {1.0f}}, {n}})[0];
  const Tensor neg_nan = run_everywhere({OpKind::SumToShape, {{}, {-1.0f}}, {n}})[0];
  CHECK(std::isnan(pos_nan[0]));
  CHECK(float_bits(neg_nan[0]) == (float_bits(pos_nan[0]) ^ 0x80000000u));
}

TEST_CASE("broadcast_binary's VJP reduces the broadcast dims: bias gradient = column sums of g") {
  std::mt19937 rng(7);
  EagerVjpBuilder b;
  const ValueRef x = b.add(random_tensor(Shape{5, 4}, rng, false));
  const ValueRef bias = b.add(random_tensor(Shape{4}, rng, false));
  const ValueRef y = b.emit(OpKind::BroadcastBinary, {{1}, {}}, {x, bias});  // x − bias
  const Tensor gt = random_tensor(Shape{5, 4}, rng, false);
  const ValueRef g = b.add(gt);
  const std::vector<ValueRef> inputs{x, bias}, outputs{y}, grads{g};
  const bool need[2] = {true, true};
  const Attrs sub{{1}, {}};
  std::vector<ValueRef> in_grads(2, 0);
  op_info(OpKind::BroadcastBinary).vjp(b, VjpArgs{sub, inputs, outputs, grads, need}, in_grads);
  CHECK(in_grads[0] == g);  // same shape and +1: no node
  const Tensor& gb = b.value(in_grads[1]);
  REQUIRE(gb.shape() == Shape{4});
  const Tensor cols = run_everywhere({OpKind::SumRows, {}, {gt}})[0];
  for (int64_t j = 0; j < 4; ++j) CHECK(float_bits(gb[j]) == (float_bits(cols[j]) ^ 0x80000000u));
}
