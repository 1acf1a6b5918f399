// Transpose, Slice, SliceBackward and Concat (ops/kernels/movement.cpp): their random cases, float64
// model and bad inputs for the per-op checks of test_op_coverage.cpp and test_float64.cpp, plus
// hand-computed values, NaN payloads moved bit for bit, each refusal's message and the VJP rules' nodes
// (docs/numerics.md "Data movement: transpose, slice, concat").
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/movement.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

Shape shape_of(const std::vector<int64_t>& d) {
  return Shape(std::span<const int64_t>(d));
}

std::vector<int64_t> dims_of(const Shape& s) {
  return {s.dims().begin(), s.dims().end()};
}

/// 0, 1, 2, … as floats: every element names its own flat index, so a misplaced copy shows.
Tensor iota(Shape s) {
  Tensor t(s);
  for (int64_t i = 0; i < t.numel(); ++i) t[i] = static_cast<float>(i);
  return t;
}

std::vector<float> values(const Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

int64_t tiny_dim(std::mt19937& rng) {
  static constexpr int64_t kDims[] = {1, 2, 3, 5, 7};
  return kDims[rng() % std::size(kDims)];
}

Shape random_rank_shape(std::mt19937& rng, int rank, bool big) {
  static const std::vector<std::vector<int64_t>> kBig{{65537}, {223, 229}, {7, 31, 229}, {3, 5, 17, 229}};
  if (big) return shape_of(kBig[static_cast<size_t>(rank - 1)]);
  std::vector<int64_t> d;
  for (int i = 0; i < rank; ++i) d.push_back(rank <= 2 ? small_dim(rng) : tiny_dim(rng) + (rng() % 2) * 6);
  return shape_of(d);
}

// ---- Index model (written out here, independently of ops/movement.h) -----------------------------------

std::vector<int64_t> coords(int64_t i, const Shape& s) {
  std::vector<int64_t> c(static_cast<size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    c[static_cast<size_t>(d)] = i % s[d];
    i /= s[d];
  }
  return c;
}

int64_t flat(const std::vector<int64_t>& c, const Shape& s) {
  int64_t i = 0;
  for (int d = 0; d < s.rank(); ++d) i = i * s[d] + c[static_cast<size_t>(d)];
  return i;
}

// ---- Random cases ----------------------------------------------------------------------------------------

/// Random slice bounds of an axis of length n: 0 ≤ start ≤ end ≤ n; step 1 (variant 0), 2 to 4
/// (variant 1), or anything up to n + 2 and possibly an empty range (variant 2).
void slice_bounds(std::mt19937& rng, int64_t n, int variant, int64_t& start, int64_t& end, int64_t& step) {
  start = static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 1));
  end = start + static_cast<int64_t>(rng() % static_cast<uint32_t>(n - start + 1));
  step = variant == 0   ? 1
         : variant == 1 ? 2 + static_cast<int64_t>(rng() % 3)
                        : 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(n + 2));
  if (variant == 2 && rng() % 4 == 0) end = start;
  if (variant != 2 && end == start && n > 0) {  // keep the other variants non-empty
    start = 0;
    end = n;
  }
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c{kind, {}, {}};
  if (kind == OpKind::Transpose) {  // variant = rank − 1
    const int rank = variant + 1;
    const Shape x = random_rank_shape(rng, rank, big);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    c.attrs.ints = perm;
    c.in.push_back(random_tensor(x, rng, specials));
    return c;
  }
  if (kind == OpKind::Slice || kind == OpKind::SliceBackward) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    const Shape x = random_rank_shape(rng, rank, big);
    const int axis = static_cast<int>(rng() % static_cast<uint32_t>(rank));
    int64_t start, end, step;
    slice_bounds(rng, x[axis], variant, start, end, step);
    if (kind == OpKind::Slice) {
      c.attrs.ints = {axis, start, end, step};
      c.in.push_back(random_tensor(x, rng, specials));
    } else {
      std::vector<int64_t> dy = dims_of(x);
      dy[static_cast<size_t>(axis)] = (end - start + step - 1) / step;
      c.attrs.ints = {axis, start, step, x[axis]};
      c.in.push_back(random_tensor(shape_of(dy), rng, specials));
    }
    return c;
  }
  if (kind == OpKind::Concat) {  // variant + 1 inputs
    const int rank = 1 + static_cast<int>(rng() % 4);
    const Shape base = random_rank_shape(rng, rank, big);
    const int axis = static_cast<int>(rng() % static_cast<uint32_t>(rank));
    c.attrs.ints = {axis};
    for (int k = 0; k <= variant; ++k) {
      std::vector<int64_t> d = dims_of(base);
      if (!big) d[static_cast<size_t>(axis)] = rng() % 8 == 0 ? 0 : small_dim(rng);  // sometimes empty
      c.in.push_back(random_tensor(shape_of(d), rng, specials));
    }
    return c;
  }
  return std::nullopt;
}

/// The exact result of the case (every output element one input element or +0), tolerance 0.
std::optional<std::vector<Expected>> expect(const Case& c) {
  std::vector<Shape> shapes;
  for (const Tensor& t : c.in) shapes.push_back(t.shape());
  const Shape y = infer_shapes(c.kind, c.attrs, shapes)[0];
  Expected e;
  e.want.assign(static_cast<size_t>(y.numel()), 0.0);
  e.tol.assign(e.want.size(), 0.0);
  const std::vector<int64_t>& a = c.attrs.ints;
  switch (c.kind) {
    case OpKind::Transpose:
      for (int64_t i = 0; i < y.numel(); ++i) {
        const std::vector<int64_t> yc = coords(i, y);
        std::vector<int64_t> xc(yc.size());
        for (size_t d = 0; d < yc.size(); ++d) xc[static_cast<size_t>(a[d])] = yc[d];
        e.want[static_cast<size_t>(i)] = c.in[0][flat(xc, shapes[0])];
      }
      break;
    case OpKind::Slice:
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> xc = coords(i, y);
        xc[static_cast<size_t>(a[0])] = a[1] + xc[static_cast<size_t>(a[0])] * a[3];
        e.want[static_cast<size_t>(i)] = c.in[0][flat(xc, shapes[0])];
      }
      break;
    case OpKind::SliceBackward:
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> yc = coords(i, y);
        const int64_t rel = yc[static_cast<size_t>(a[0])] - a[1];
        if (rel < 0 || rel % a[2] != 0 || rel / a[2] >= shapes[0][static_cast<int>(a[0])]) continue;
        yc[static_cast<size_t>(a[0])] = rel / a[2];
        e.want[static_cast<size_t>(i)] = c.in[0][flat(yc, shapes[0])];
      }
      break;
    case OpKind::Concat:
      for (int64_t i = 0; i < y.numel(); ++i) {
        std::vector<int64_t> yc = coords(i, y);
        size_t k = 0;
        int64_t& p = yc[static_cast<size_t>(a[0])];
        while (p >= shapes[k][static_cast<int>(a[0])]) p -= shapes[k++][static_cast<int>(a[0])];
        e.want[static_cast<size_t>(i)] = c.in[k][flat(yc, shapes[k])];
      }
      break;
    default:
      return std::nullopt;
  }
  return std::vector<Expected>{e};
}

const RegisterOpTests kTransposeTests(OpKind::Transpose,
                                      {4,
                                       make_case,
                                       expect,
                                       {{{{1, 0}, {}}, {Shape{}}, "rank 0"},
                                        {{{1, 0}, {}}, {Shape{2, 3, 4}}, "perm shorter than the rank"},
                                        {{{0, 1, 1}, {}}, {Shape{2, 3, 4}}, "perm repeats an axis"},
                                        {{{0, 3, 1}, {}}, {Shape{2, 3, 4}}, "perm entry out of range"},
                                        {{{-1, 0}, {}}, {Shape{2, 3}}, "negative perm entry"},
                                        {{{0}, {}}, {Shape{2}, Shape{2}}, "two inputs"}},
                                       {0}});
const RegisterOpTests kSliceTests(OpKind::Slice, {3,
                                                  make_case,
                                                  expect,
                                                  {{{{0, 1, 3, 0}, {}}, {Shape{5}}, "step 0"},
                                                   {{{0, 1, 3, -1}, {}}, {Shape{5}}, "negative step"},
                                                   {{{0, 3, 2, 1}, {}}, {Shape{5}}, "start after end"},
                                                   {{{0, -1, 2, 1}, {}}, {Shape{5}}, "negative start"},
                                                   {{{0, 0, 6, 1}, {}}, {Shape{5}}, "end past the axis"},
                                                   {{{1, 0, 1, 1}, {}}, {Shape{5}}, "axis past the rank"},
                                                   {{{-1, 0, 1, 1}, {}}, {Shape{5}}, "negative axis"},
                                                   {{{0, 0, 1, 1}, {}}, {Shape{}}, "rank 0"},
                                                   {{{0, 0, 1}, {}}, {Shape{5}}, "three ints"}},
                                                  {0}});
const RegisterOpTests kSliceBackwardTests(
    OpKind::SliceBackward, {3,
                            make_case,
                            expect,
                            {{{{0, 0, 0, 5}, {}}, {Shape{2}}, "step 0"},
                             {{{0, 4, 1, 5}, {}}, {Shape{2}}, "positions 4, 5 past full_dim 5"},
                             {{{0, 0, 3, 3}, {}}, {Shape{2}}, "positions 0, 3 by step 3 past full_dim 3"},
                             {{{0, 6, 1, 5}, {}}, {Shape{0}}, "empty, start past full_dim"},
                             {{{0, -1, 1, 5}, {}}, {Shape{2}}, "negative start"},
                             {{{0, 0, 1, -1}, {}}, {Shape{0}}, "negative full_dim"},
                             {{{2, 0, 1, 5}, {}}, {Shape{2, 2}}, "axis past the rank"},
                             {{{0, 1, int64_t{1} << 62, 5}, {}}, {Shape{3}}, "overflowing step"},
                             {{{0, 0, 1, int64_t{1} << 62}, {}}, {Shape{1, 8}}, "dx too large"},
                             {{{0, 0, 1}, {}}, {Shape{2}}, "three ints"}},
                            {0}});
const RegisterOpTests kConcatTests(OpKind::Concat,
                                   {4,
                                    make_case,
                                    expect,
                                    {{{{1}, {}}, {Shape{2, 3}, Shape{3, 3}}, "inputs differ on axis 0"},
                                     {{{0}, {}}, {Shape{2, 3}, Shape{2}}, "inputs of different ranks"},
                                     {{{2}, {}}, {Shape{2, 3}}, "axis past the rank"},
                                     {{{-1}, {}}, {Shape{2, 3}}, "negative axis"},
                                     {{{0}, {}}, {Shape{}}, "rank 0"},
                                     {{{}, {}}, {Shape{2}}, "no axis"},
                                     {{{0}, {}}, {}, "no input"}},
                                    {0}});

/// The message of infer_shapes' OpError, or "" when it accepts.
std::string refusal(OpKind kind, Attrs attrs, std::vector<Shape> in) {
  try {
    infer_shapes(kind, attrs, in);
  } catch (const OpError& e) {
    return e.what();
  }
  return "";
}

Tensor run(OpKind kind, Attrs attrs, std::vector<Tensor> in) {
  return run_everywhere({kind, std::move(attrs), std::move(in)})[0];
}

}  // namespace

TEST_CASE("transpose: hand-computed permutations of rank 1 to 4") {
  CHECK(values(run(OpKind::Transpose, {{0}, {}}, {iota(Shape{4})})) == std::vector<float>{0, 1, 2, 3});
  // [[0 1 2] [3 4 5]]ᵀ
  const Tensor t2 = run(OpKind::Transpose, {{1, 0}, {}}, {iota(Shape{2, 3})});
  CHECK(t2.shape() == Shape{3, 2});
  CHECK(values(t2) == std::vector<float>{0, 3, 1, 4, 2, 5});
  // x[2,3,2] by perm (2, 0, 1): y[k, i, j] = x[i, j, k] = 6i + 2j + k.
  const Tensor t3 = run(OpKind::Transpose, {{2, 0, 1}, {}}, {iota(Shape{2, 3, 2})});
  CHECK(t3.shape() == Shape{2, 2, 3});
  CHECK(values(t3) == std::vector<float>{0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
  // Attention's [B, T, H, E] → [B, H, T, E] (perm 0 2 1 3), B = 1, T = 2, H = 2, E = 2:
  // y[0, h, t, e] = x[0, t, h, e] = 4t + 2h + e.
  const Tensor t4 = run(OpKind::Transpose, {{0, 2, 1, 3}, {}}, {iota(Shape{1, 2, 2, 2})});
  CHECK(t4.shape() == Shape{1, 2, 2, 2});
  CHECK(values(t4) == std::vector<float>{0, 1, 4, 5, 2, 3, 6, 7});
  // Rank 4, every axis moved (perm 3 2 1 0 of [2,1,3,2]): y[l,k,j,i] = x[i,j,k,l] = 6i + 6j + 2k + l.
  const Tensor r4 = run(OpKind::Transpose, {{3, 2, 1, 0}, {}}, {iota(Shape{2, 1, 3, 2})});
  CHECK(r4.shape() == Shape{2, 3, 1, 2});
  CHECK(values(r4) == std::vector<float>{0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11});
  // Empty: a [0, 3] tensor transposes to [3, 0].
  CHECK(run(OpKind::Transpose, {{1, 0}, {}}, {Tensor(Shape{0, 3})}).shape() == Shape{3, 0});
}

TEST_CASE("slice: hand-computed slices, steps, a whole axis and an empty range") {
  const Tensor x = iota(Shape{2, 5});
  // Columns 1 and 3 (start 1, end 5, step 2: ceil(4/2) = 2 positions).
  const Tensor s = run(OpKind::Slice, {{1, 1, 5, 2}, {}}, {x});
  CHECK(s.shape() == Shape{2, 2});
  CHECK(values(s) == std::vector<float>{1, 3, 6, 8});
  // Columns 0, 3 (end 5 - 0 = 5 over step 3: ceil = 2) and rows [1, 2).
  CHECK(values(run(OpKind::Slice, {{1, 0, 5, 3}, {}}, {x})) == std::vector<float>{0, 3, 5, 8});
  CHECK(values(run(OpKind::Slice, {{0, 1, 2, 1}, {}}, {x})) == std::vector<float>{5, 6, 7, 8, 9});
  // A step past the range keeps one position; the whole axis is a copy.
  CHECK(values(run(OpKind::Slice, {{1, 2, 4, 100}, {}}, {x})) == std::vector<float>{2, 7});
  CHECK(values(run(OpKind::Slice, {{0, 0, 2, 1}, {}}, {x})) == values(x));
  // start = end: an empty slice (allowed: ONNX Slice can produce one).
  CHECK(run(OpKind::Slice, {{1, 3, 3, 1}, {}}, {x}).shape() == Shape{2, 0});
  CHECK(run(OpKind::Slice, {{1, 5, 5, 7}, {}}, {x}).shape() == Shape{2, 0});
  // Rank 1 and rank 4: rotate_half's halves of the last axis and a middle axis of [1,2,3,2].
  CHECK(values(run(OpKind::Slice, {{0, 3, 6, 1}, {}}, {iota(Shape{6})})) == std::vector<float>{3, 4, 5});
  CHECK(values(run(OpKind::Slice, {{2, 1, 3, 1}, {}}, {iota(Shape{1, 2, 3, 2})})) ==
        std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11});
  CHECK(values(run(OpKind::Slice, {{3, 0, 2, 2}, {}}, {iota(Shape{1, 2, 3, 2})})) ==
        std::vector<float>{0, 2, 4, 6, 8, 10});
}

TEST_CASE("slice_backward: dy at the sliced positions, +0 (not −0) everywhere else") {
  const Tensor dy(Shape{2, 2}, std::vector<float>{-1, -2, -3, -4});
  const Tensor dx = run(OpKind::SliceBackward, {{1, 1, 2, 5}, {}}, {dy});
  CHECK(dx.shape() == Shape{2, 5});
  CHECK(values(dx) == std::vector<float>{0, -1, 0, -2, 0, 0, -3, 0, -4, 0});
  for (int64_t i : {0, 2, 4, 5, 7, 9}) CHECK(float_bits(dx[i]) == 0u);
  // Along axis 0 of [3, 2] into full_dim 4 at position 2; an empty dy gives all +0; rank 4.
  CHECK(values(run(OpKind::SliceBackward, {{0, 2, 1, 4}, {}}, {iota(Shape{1, 2})})) ==
        std::vector<float>{0, 0, 0, 0, 0, 1, 0, 0});
  const Tensor zeros = run(OpKind::SliceBackward, {{1, 3, 1, 3}, {}}, {Tensor(Shape{2, 0})});
  CHECK(zeros.shape() == Shape{2, 3});
  for (float v : zeros.values()) CHECK(float_bits(v) == 0u);
  CHECK(values(run(OpKind::SliceBackward, {{3, 1, 1, 3}, {}}, {iota(Shape{1, 1, 2, 1})})) ==
        std::vector<float>{0, 0, 0, 0, 1, 0});
}

TEST_CASE("concat: hand-computed concatenations, one input, empty inputs") {
  const Tensor a = iota(Shape{2, 1}), b(Shape{2, 2}, std::vector<float>{10, 11, 12, 13}),
               c(Shape{2, 3}, std::vector<float>{20, 21, 22, 23, 24, 25});
  const Tensor y = run(OpKind::Concat, {{1}, {}}, {a, b, c});
  CHECK(y.shape() == Shape{2, 6});
  CHECK(values(y) == std::vector<float>{0, 10, 11, 20, 21, 22, 1, 12, 13, 23, 24, 25});
  // Along axis 0: the inputs one after another.
  const Tensor rows = run(OpKind::Concat, {{0}, {}}, {b, iota(Shape{1, 2})});
  CHECK(values(rows) == std::vector<float>{10, 11, 12, 13, 0, 1});
  // One input: a copy. An input of length 0 on the axis adds nothing.
  CHECK(values(run(OpKind::Concat, {{0}, {}}, {b})) == values(b));
  CHECK(values(run(OpKind::Concat, {{1}, {}}, {Tensor(Shape{2, 0}), a, Tensor(Shape{2, 0})})) ==
        std::vector<float>{0, 1});
  // Rank 1 and rank 4 (the last axis of [1,1,2,1] and [1,1,2,2]).
  CHECK(values(run(OpKind::Concat, {{0}, {}}, {iota(Shape{2}), iota(Shape{3})})) ==
        std::vector<float>{0, 1, 0, 1, 2});
  CHECK(values(run(OpKind::Concat, {{3}, {}},
                   {iota(Shape{1, 1, 2, 1}), Tensor(Shape{1, 1, 2, 2}, b.values())})) ==
        std::vector<float>{0, 10, 11, 1, 12, 13});
}

TEST_CASE("data movement moves NaN payloads, −0 and subnormals bit for bit on every path and thread count") {
  const uint32_t bits[] = {0x7FC00001u, 0xFFA00005u /* signalling */, 0x80000000u, 0x00000001u, 0x7F800000u};
  Tensor x(Shape{5, 64, 7});
  for (int64_t i = 0; i < x.numel(); ++i)
    x[i] = float_from_bits(bits[i % 5] + (i % 5 < 2 ? static_cast<uint32_t>(i % 1000) : 0u));
  auto same_bits = [](const Tensor& y, const Tensor& x, auto map) {
    for (int64_t i = 0; i < y.numel(); ++i)
      if (float_bits(y[i]) != float_bits(x[map(i)])) return false;
    return true;
  };
  const Tensor t = run(OpKind::Transpose, {{2, 1, 0}, {}}, {x});
  CHECK(same_bits(t, x, [](int64_t i) { return (i % 5) * 64 * 7 + (i / 5 % 64) * 7 + i / 320; }));
  const Tensor s = run(OpKind::Slice, {{1, 3, 64, 5}, {}}, {x});
  CHECK(same_bits(s, x, [](int64_t i) { return (i / 7 / 13) * 448 + (3 + 5 * (i / 7 % 13)) * 7 + i % 7; }));
  const Tensor c = run(OpKind::Concat, {{0}, {}}, {x, x});
  CHECK(same_bits(c, x, [&](int64_t i) { return i % x.numel(); }));
  const Tensor b = run(OpKind::SliceBackward, {{0, 0, 1, 5}, {}}, {x});
  CHECK(std::memcmp(b.data(), x.data(), static_cast<size_t>(x.numel()) * sizeof(float)) == 0);
}

TEST_CASE("data movement: each refusal says what is wrong") {
  CHECK(refusal(OpKind::Transpose, {{1, 0}, {}}, {Shape{}}) == "transpose: x must have rank 1 to 4, got []");
  CHECK(refusal(OpKind::Transpose, {{1, 0}, {}}, {Shape{2, 3, 4}}) ==
        "transpose: perm must have one entry per axis of x [2, 3, 4] (3), got 2");
  CHECK(refusal(OpKind::Transpose, {{0, 1, 1}, {}}, {Shape{2, 3, 4}}) ==
        "transpose: perm must be a permutation of 0..2, got entry 1 twice");
  CHECK(refusal(OpKind::Transpose, {{0, 3, 1}, {}}, {Shape{2, 3, 4}}) ==
        "transpose: perm must be a permutation of 0..2, got entry 3 out of range");
  CHECK(refusal(OpKind::Slice, {{0, 1, 3, 0}, {}}, {Shape{5}}) == "slice: step must be at least 1, got 0");
  CHECK(refusal(OpKind::Slice, {{0, 3, 2, 1}, {}}, {Shape{5}}) ==
        "slice: needs 0 ≤ start ≤ end ≤ x.shape[0] = 5, got start 3, end 2 (normalize negative and "
        "out-of-range bounds first)");
  CHECK(refusal(OpKind::Slice, {{0, -1, 2, 1}, {}}, {Shape{5}}).find("got start -1, end 2") !=
        std::string::npos);
  CHECK(refusal(OpKind::Slice, {{0, 0, 6, 1}, {}}, {Shape{5}}).find("end 6") != std::string::npos);
  CHECK(refusal(OpKind::Slice, {{1, 0, 1, 1}, {}}, {Shape{5}}) ==
        "slice: axis 1 is not an axis of [5] (0 ≤ axis < 1)");
  CHECK(refusal(OpKind::Slice, {{0, 0, 1}, {}}, {Shape{5}}) == "slice: expects 4 integer attributes, got 3");
  CHECK(refusal(OpKind::SliceBackward, {{0, 4, 1, 5}, {}}, {Shape{2}}) ==
        "slice_backward: dy has 2 positions along axis 0 from start 4 by step 1: they do not fit in "
        "full_dim 5");
  CHECK(refusal(OpKind::SliceBackward, {{0, 1, int64_t{1} << 62, 5}, {}}, {Shape{3}}).find("do not fit") !=
        std::string::npos);
  CHECK(refusal(OpKind::SliceBackward, {{0, -1, 1, 5}, {}}, {Shape{2}}) ==
        "slice_backward: start and full_dim must be ≥ 0, got start -1, full_dim 5");
  CHECK(refusal(OpKind::SliceBackward, {{0, 0, 1, int64_t{1} << 62}, {}}, {Shape{1, 8}}) ==
        "slice_backward: dx [4611686018427387904, 8] has more elements than an int64 counts");
  CHECK(refusal(OpKind::Concat, {{1}, {}}, {Shape{2, 3}, Shape{3, 3}}) ==
        "concat: input 1 [3, 3] differs from input 0 [2, 3] on an axis other than 1 (or in rank)");
  CHECK(refusal(OpKind::Concat, {{0}, {}}, {Shape{2, 3}, Shape{2}}) ==
        "concat: input 1 [2] differs from input 0 [2, 3] on an axis other than 0 (or in rank)");
  CHECK(refusal(OpKind::Concat, {{-1}, {}}, {Shape{2, 3}}) ==
        "concat: axis -1 is not an axis of [2, 3] (0 ≤ axis < 2)");
  CHECK(refusal(OpKind::Concat, {{0}, {}}, {}) == "concat: expects at least one input, got none");
  // What each accepts at its edges.
  CHECK(refusal(OpKind::Slice, {{0, 5, 5, 1}, {}}, {Shape{5}}) == "");
  CHECK(refusal(OpKind::SliceBackward, {{0, 5, 1, 5}, {}}, {Shape{0}}) == "");
  CHECK(refusal(OpKind::SliceBackward, {{0, 1, 3, 5}, {}}, {Shape{2}}) == "");  // positions 1 and 4
}

TEST_CASE("data movement VJPs: the inverse permutation, slice_backward, and one slice per concat input") {
  std::mt19937 rng(5);
  EagerVjpBuilder b;
  const bool need[3] = {true, false, true};
  // Transpose by (1, 2, 0): the gradient is dy transposed by the inverse (2, 0, 1).
  {
    const ValueRef x = b.add(iota(Shape{2, 3, 4}));
    const Attrs attrs{{1, 2, 0}, {}};
    const ValueRef y = b.emit(OpKind::Transpose, attrs, {x});
    const ValueRef g = b.add(random_tensor(Shape{3, 4, 2}, rng, false));
    const std::vector<ValueRef> ins{x}, outs{y}, grads{g};
    std::vector<ValueRef> dx(1, 0);
    op_info(OpKind::Transpose).vjp(b, VjpArgs{attrs, ins, outs, grads, std::span<const bool>(need, 1)}, dx);
    const Tensor want = run(OpKind::Transpose, {{2, 0, 1}, {}}, {b.value(g)});
    REQUIRE(b.value(dx[0]).shape() == Shape{2, 3, 4});
    CHECK(bitwise_equal(b.value(dx[0]), want));
    // Round trip: transposing y back gives x.
    CHECK(bitwise_equal(run(OpKind::Transpose, {{2, 0, 1}, {}}, {b.value(y)}), b.value(x)));
  }
  // Slice columns 1, 3 of [2, 5]: dy lands there, +0 elsewhere.
  {
    const ValueRef x = b.add(iota(Shape{2, 5}));
    const Attrs attrs{{1, 1, 5, 2}, {}};
    const ValueRef y = b.emit(OpKind::Slice, attrs, {x});
    const ValueRef g = b.add(Tensor(Shape{2, 2}, std::vector<float>{1, 2, 3, 4}));
    const std::vector<ValueRef> ins{x}, outs{y}, grads{g};
    std::vector<ValueRef> dx(1, 0);
    op_info(OpKind::Slice).vjp(b, VjpArgs{attrs, ins, outs, grads, std::span<const bool>(need, 1)}, dx);
    CHECK(values(b.value(dx[0])) == std::vector<float>{0, 1, 0, 2, 0, 0, 3, 0, 4, 0});
    // slice_backward's own VJP slices the same positions back out.
    const Attrs back{{1, 1, 2, 5}, {}};
    const ValueRef gg = b.add(iota(Shape{2, 5}));
    const std::vector<ValueRef> bins{g}, bouts{dx[0]}, bgrads{gg};
    std::vector<ValueRef> ddy(1, 0);
    op_info(OpKind::SliceBackward)
        .vjp(b, VjpArgs{back, bins, bouts, bgrads, std::span<const bool>(need, 1)}, ddy);
    CHECK(values(b.value(ddy[0])) == std::vector<float>{1, 3, 6, 8});
  }
  // Concat of [2,1], [2,2], [2,3] along axis 1: inputs 0 and 2 want gradients, input 1 none.
  {
    const ValueRef x0 = b.add(iota(Shape{2, 1})), x1 = b.add(iota(Shape{2, 2})),
                   x2 = b.add(iota(Shape{2, 3}));
    const Attrs attrs{{1}, {}};
    const ValueRef y = b.emit(OpKind::Concat, attrs, {x0, x1, x2});
    const ValueRef g = b.add(iota(Shape{2, 6}));
    const std::vector<ValueRef> ins{x0, x1, x2}, outs{y}, grads{g};
    constexpr ValueRef kNone = ~ValueRef{0};
    std::vector<ValueRef> dx(3, kNone);
    op_info(OpKind::Concat).vjp(b, VjpArgs{attrs, ins, outs, grads, std::span<const bool>(need, 3)}, dx);
    CHECK(dx[1] == kNone);  // no node for an input that wants no gradient
    CHECK(values(b.value(dx[0])) == std::vector<float>{0, 6});
    CHECK(values(b.value(dx[2])) == std::vector<float>{3, 4, 5, 9, 10, 11});
  }
}

TEST_CASE("coalesce: merges the dims a copy steps over as one, keeping every (src, dst) pair") {
  // A slice of axis 1 of [3, 8, 5] with step 1 is 3 rows of 2·5 contiguous floats.
  const int64_t x[] = {3, 8, 5};
  const CopyGeom g = slice_geom(axis_view(x, 3, 1), 2, 1, 2);
  const CopyGeom c = coalesce(g);
  CHECK(c.dims[0] == 1);
  CHECK(c.dims[1] == 1);
  CHECK(c.dims[2] == 3);
  CHECK(c.dims[3] == 10);
  CHECK(c.src_strides[3] == 1);
  CHECK(c.dst_strides[3] == 1);
  for (int64_t i = 0; i < 30; ++i) {
    CHECK(copy_src_offset(c, i) == copy_src_offset(g, i));
    CHECK(copy_dst_offset(c, i) == copy_dst_offset(g, i));
  }
  // A transpose of the last two axes stays strided: nothing merges.
  const int64_t t[] = {4, 6}, perm[] = {1, 0};
  const CopyGeom tg = coalesce(transpose_geom(t, 2, perm));
  CHECK(tg.dims[2] == 6);
  CHECK(tg.dims[3] == 4);
  CHECK(tg.src_strides[3] == 6);
}
