// Where, WhereBackward and GatherRows (ops/kernels/select.cpp): their random cases, float64 model and
// bad inputs for the per-op checks of test_op_coverage.cpp and test_float64.cpp, plus hand-computed
// values, the truth of NaN and −0 conditions, the refusal of bad ids on every thread count, and the VJPs'
// nodes and values (docs/numerics.md "Selection: where, gather_rows").
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

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

/// A condition tensor: +0, −0, 1, NaN, a subnormal, or a random value (true unless ±0).
Tensor condition(const Shape& s, std::mt19937& rng) {
  const float kinds[] = {0.0f, -0.0f, 1.0f, kNan, std::numeric_limits<float>::denorm_min(), -2.5f};
  Tensor t(s);
  for (float& v : t.values()) v = rng() % 2 ? kinds[rng() % std::size(kinds)] : (rng() % 2 ? 0.0f : 1.0f);
  return t;
}

/// Token ids in [0, rows) as floats; about one in 16 that is 0 is stored as −0 (an integer too).
Tensor ids_tensor(const Shape& s, int64_t rows, std::mt19937& rng) {
  Tensor t(s);
  for (float& v : t.values()) {
    v = static_cast<float>(rng() % static_cast<uint32_t>(rows));
    if (v == 0.0f && rng() % 16 == 0) v = -0.0f;
  }
  return t;
}

/// Source offset of output element i of the NumPy broadcast `y` in `s` (independent of ops/broadcast.h).
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

bool truth(float c) {
  return c != 0.0f || std::isnan(c);
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c{kind, {}, {}};
  if (kind == OpKind::Where) {
    Shape sc, sa, sb;
    if (big) {
      const int64_t b = 3, h = 5, t = 67;  // masked_fill of attention scores: cond [1,1,T,T], fill scalar
      sc = Shape{1, 1, t, t};
      sa = Shape{b, h, t, t};
      sb = rng() % 2 ? Shape{} : Shape{b, h, t, t};
    } else {
      switch (rng() % 4) {
        case 0: {
          const Shape same = random_shape(rng, 0, 3);
          sc = sa = sb = same;
          break;
        }
        case 1: {
          const int64_t t = tiny_dim(rng) + 1;
          sc = Shape{1, 1, t, t};
          sa = Shape{tiny_dim(rng), tiny_dim(rng), t, t};
          sb = Shape{};
          break;
        }
        case 2:
          sc = Shape{};
          sa = Shape{small_dim(rng), small_dim(rng)};
          sb = Shape{sa[1]};
          break;
        default: {
          const Shape full{tiny_dim(rng), tiny_dim(rng), tiny_dim(rng), tiny_dim(rng)};
          sc = broadcast_source(full, rng);
          sa = broadcast_source(full, rng);
          sb = broadcast_source(full, rng);
          break;
        }
      }
    }
    c.in.push_back(condition(sc, rng));
    c.in.push_back(random_tensor(sa, rng, specials));
    c.in.push_back(random_tensor(sb, rng, specials));
    return c;
  }
  if (kind == OpKind::WhereBackward) {
    const Shape dy = big ? Shape{3, 5, 67, 67}
                         : (rng() % 2 ? random_shape(rng, 0, 3)
                                      : Shape{tiny_dim(rng), tiny_dim(rng), tiny_dim(rng), tiny_dim(rng)});
    const Shape cond = big ? Shape{1, 1, 67, 67} : broadcast_source(dy, rng);
    c.attrs.ints = {variant};
    c.in.push_back(condition(cond, rng));
    c.in.push_back(random_tensor(dy, rng, specials));
    return c;
  }
  if (kind == OpKind::GatherRows) {
    Shape table, ids;
    if (big) {
      table = Shape{389, 229};
      ids = Shape{7, 31};
    } else {
      const int table_rank = 1 + static_cast<int>(rng() % 4);
      std::vector<int64_t> td{small_dim(rng)};
      for (int d = 1; d < table_rank; ++d) td.push_back(tiny_dim(rng));
      table = shape_of(td);
      const int max_ids = std::min(3, 5 - table_rank);
      const int ids_rank = static_cast<int>(rng() % static_cast<uint32_t>(max_ids + 1));
      std::vector<int64_t> id;
      for (int d = 0; d < ids_rank; ++d) id.push_back(tiny_dim(rng));
      ids = shape_of(id);
    }
    c.in.push_back(random_tensor(table, rng, specials));
    c.in.push_back(ids_tensor(ids, table[0], rng));
    return c;
  }
  return std::nullopt;
}

std::optional<std::vector<Expected>> expect(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  Expected e;
  if (c.kind == OpKind::Where) {
    const Shape y =
        infer_shapes(c.kind, c.attrs, std::vector<Shape>{in[0].shape(), in[1].shape(), in[2].shape()})[0];
    for (int64_t i = 0; i < y.numel(); ++i) {
      const bool t = truth(in[0][source_offset(in[0].shape(), y, i)]);
      e.want.push_back(t ? in[1][source_offset(in[1].shape(), y, i)]
                         : in[2][source_offset(in[2].shape(), y, i)]);
      e.tol.push_back(0.0);
    }
    return std::vector<Expected>{e};
  }
  if (c.kind == OpKind::WhereBackward) {
    const Shape& y = in[1].shape();
    for (int64_t i = 0; i < y.numel(); ++i) {
      const bool t = truth(in[0][source_offset(in[0].shape(), y, i)]);
      e.want.push_back(t == (c.attrs.ints[0] == 1) ? in[1][i] : 0.0);
      e.tol.push_back(0.0);
    }
    return std::vector<Expected>{e};
  }
  if (c.kind == OpKind::GatherRows) {
    const Shape& table = in[0].shape();
    const int64_t row = table[0] == 0 ? 0 : table.numel() / table[0];
    for (int64_t p = 0; p < in[1].numel(); ++p)
      for (int64_t j = 0; j < row; ++j) {
        e.want.push_back(in[0][static_cast<int64_t>(in[1][p]) * row + j]);
        e.tol.push_back(0.0);
      }
    return std::vector<Expected>{e};
  }
  return std::nullopt;
}

const RegisterOpTests kWhereTests(OpKind::Where,
                                  {1,
                                   make_case,
                                   expect,
                                   {{{}, {Shape{2, 3}, Shape{4}, Shape{}}, "cond and a disagree"},
                                    {{}, {Shape{3}, Shape{2, 3}, Shape{2, 1, 4}}, "b's last dim"},
                                    {{}, {Shape{2, 3}, Shape{2, 3}}, "two inputs"},
                                    {{{1}, {}}, {Shape{3}, Shape{3}, Shape{3}}, "an int"}},
                                   {1, 2}});
const RegisterOpTests kWhereBackwardTests(
    OpKind::WhereBackward, {2,
                            make_case,
                            expect,
                            {{{{1}, {}}, {Shape{2, 3}, Shape{3}}, "cond of a larger shape than dy"},
                             {{{1}, {}}, {Shape{4}, Shape{2, 3}}, "cond does not broadcast"},
                             {{{2}, {}}, {Shape{3}, Shape{3}}, "branch 2"},
                             {{{-1}, {}}, {Shape{3}, Shape{3}}, "branch -1"},
                             {{{}, {}}, {Shape{3}, Shape{3}}, "no branch"},
                             {{{1}, {}}, {Shape{3}}, "one input"}}});
const RegisterOpTests kGatherRowsTests(OpKind::GatherRows,
                                       {1,
                                        make_case,
                                        expect,
                                        {{{}, {Shape{}, Shape{2}}, "a scalar table"},
                                         {{}, {Shape{5, 2}, Shape{1, 1, 1, 1}}, "ids of rank 4"},
                                         {{}, {Shape{5, 2, 3}, Shape{1, 1, 1}}, "output of rank 5"},
                                         {{}, {Shape{5, 2}}, "no ids"},
                                         {{{0}, {}}, {Shape{5, 2}, Shape{3}}, "an int"}},
                                        {0}});

std::vector<float> values(const Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<uint32_t> b;
  for (float v : t.values()) b.push_back(float_bits(v));
  return b;
}

}  // namespace

TEST_CASE("where: hand-computed selections, broadcast cond of rank 0 and rank 4") {
  const Tensor cond(Shape{2, 3}, std::vector<float>{1, 0, -0.0f, kNan, 2, -3});
  const Tensor a(Shape{2, 3}, std::vector<float>{10, 11, 12, 13, 14, 15});
  const Tensor b(Shape{3}, std::vector<float>{-1, -2, -3});
  // ±0 false, NaN and any other value true.
  CHECK(values(run_everywhere({OpKind::Where, {}, {cond, a, b}})[0]) ==
        std::vector<float>{10, -2, -3, 13, 14, 15});
  // Rank-0 cond: one choice for every element.
  CHECK(values(run_everywhere({OpKind::Where, {}, {scalar(0.0f), a, b}})[0]) ==
        std::vector<float>{-1, -2, -3, -1, -2, -3});
  CHECK(values(run_everywhere({OpKind::Where, {}, {scalar(kNan), a, b}})[0]) == values(a));
  // Rank-4 causal mask [1,1,3,3] over scores [2,1,3,3] with a scalar fill: masked_fill(~tril, −inf).
  Tensor mask(Shape{1, 1, 3, 3});
  for (int r = 0; r < 3; ++r)
    for (int k = 0; k < 3; ++k) mask[r * 3 + k] = k <= r ? 1.0f : 0.0f;
  Tensor scores(Shape{2, 1, 3, 3});
  for (int64_t i = 0; i < 18; ++i) scores[i] = static_cast<float>(i);
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor y = run_everywhere({OpKind::Where, {}, {mask, scores, scalar(-inf)}})[0];
  REQUIRE(y.shape() == Shape{2, 1, 3, 3});
  CHECK(values(y) ==
        std::vector<float>{0, -inf, -inf, 3, 4, -inf, 6, 7, 8, 9, -inf, -inf, 12, 13, -inf, 15, 16, 17});
  CHECK(infer_shapes(OpKind::Where, {}, std::vector<Shape>{Shape{4, 1}, Shape{2, 1, 5}, Shape{}})[0] ==
        Shape{2, 4, 5});
}

TEST_CASE("where: a bit copy of the chosen element (NaN payloads, −0, subnormals), no arithmetic") {
  const float snan = float_from_bits(0x7F800001u), payload = float_from_bits(0xFFC12345u);
  const float sub = std::numeric_limits<float>::denorm_min();
  const Tensor a(Shape{6}, std::vector<float>{snan, -0.0f, sub, payload, -sub, 1.0f});
  const Tensor b(Shape{6}, std::vector<float>{payload, 0.0f, -0.0f, snan, sub, -1.0f});
  // A subnormal condition is true: decided on the bits, never flushed to zero.
  const Tensor cond(Shape{6}, std::vector<float>{1.0f, 1.0f, sub, 0.0f, -0.0f, -sub});
  const Tensor y = run_everywhere({OpKind::Where, {}, {cond, a, b}})[0];
  CHECK(bits(y) ==
        std::vector<uint32_t>{0x7F800001u, 0x80000000u, 0x00000001u, 0x7F800001u, 0x00000001u, 0x3F800000u});
}

TEST_CASE("where_backward: dy where the condition's truth equals the branch, +0 elsewhere") {
  const Tensor cond(Shape{3}, std::vector<float>{1.0f, -0.0f, kNan});
  const Tensor dy(Shape{2, 3}, std::vector<float>{-0.0f, 2, 3, 4, -5, kNan});
  const Tensor t = run_everywhere({OpKind::WhereBackward, {{1}, {}}, {cond, dy}})[0];
  const Tensor f = run_everywhere({OpKind::WhereBackward, {{0}, {}}, {cond, dy}})[0];
  CHECK(bits(t) == std::vector<uint32_t>{0x80000000u, 0u, 0x40400000u, 0x40800000u, 0u, float_bits(dy[5])});
  CHECK(bits(f) == std::vector<uint32_t>{0u, 0x40000000u, 0u, 0u, 0xC0A00000u, 0u});
}

TEST_CASE("where's VJP: where_backward then sum_to_shape to each branch's shape; none for cond") {
  std::mt19937 rng(5);
  EagerVjpBuilder b;
  const Tensor cond_t(Shape{2, 1}, std::vector<float>{1.0f, 0.0f});
  const ValueRef cond = b.add(cond_t);
  const ValueRef x = b.add(random_tensor(Shape{2, 3}, rng, false));
  const ValueRef fill = b.add(scalar(-7.0f));
  const ValueRef y = b.emit(OpKind::Where, {}, {cond, x, fill});
  const Tensor gt(Shape{2, 3}, std::vector<float>{1, 2, 4, 8, 16, 32});
  const ValueRef g = b.add(gt);
  const std::vector<ValueRef> inputs{cond, x, fill}, outputs{y}, grads{g};
  const bool need[3] = {false, true, true};
  const Attrs none;
  std::vector<ValueRef> in_grads(3, 0);
  op_info(OpKind::Where).vjp(b, VjpArgs{none, inputs, outputs, grads, need}, in_grads);
  CHECK(in_grads[0] == 0);
  CHECK(values(b.value(in_grads[1])) == std::vector<float>{1, 2, 4, 0, 0, 0});
  REQUIRE(b.value(in_grads[2]).shape() == Shape{});
  CHECK(b.value(in_grads[2])[0] == 56.0f);  // 8 + 16 + 32: the false row, summed to the scalar
}

TEST_CASE("gather_rows: hand-computed rows for ids of rank 0 to 3, −0 an id") {
  const Tensor table(Shape{3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
  const Tensor y0 = run_everywhere({OpKind::GatherRows, {}, {table, scalar(2.0f)}})[0];
  CHECK(y0.shape() == Shape{2});
  CHECK(values(y0) == std::vector<float>{5, 6});
  const Tensor ids(Shape{2, 2}, std::vector<float>{2, -0.0f, 1, 2});
  const Tensor y2 = run_everywhere({OpKind::GatherRows, {}, {table, ids}})[0];
  CHECK(y2.shape() == Shape{2, 2, 2});
  CHECK(values(y2) == std::vector<float>{5, 6, 1, 2, 3, 4, 5, 6});
  // A rank-1 table gathers scalars: ONNX Gather of a vector.
  const Tensor v(Shape{4}, std::vector<float>{10, 20, 30, 40});
  const Tensor ids3(Shape{1, 2, 2}, std::vector<float>{3, 0, 0, 1});
  const Tensor y3 = run_everywhere({OpKind::GatherRows, {}, {v, ids3}})[0];
  CHECK(y3.shape() == Shape{1, 2, 2});
  CHECK(values(y3) == std::vector<float>{40, 10, 10, 20});
  // No ids: an empty output, even from an empty table.
  CHECK(run_everywhere({OpKind::GatherRows, {}, {Tensor(Shape{0, 3}), Tensor(Shape{0})}})[0].shape() ==
        Shape{0, 3});
}

TEST_CASE(
    "gather_rows refuses ids that are not integers in [0, N), naming the value and position, on any "
    "thread") {
  std::mt19937 rng(11);
  const Tensor table = random_tensor(Shape{50, 128}, rng, false);
  for (float bad : {50.0f, -1.0f, 2.5f, kNan, std::numeric_limits<float>::infinity(), 3e9f}) {
    for (int64_t at : {int64_t{0}, int64_t{200}, int64_t{399}}) {
      CAPTURE(bad);
      CAPTURE(at);
      Tensor ids = ids_tensor(Shape{4, 100}, 50, rng);  // 400 rows: the fast kernel uses 3 threads
      ids[at] = bad;
      const Case c{OpKind::GatherRows, {}, {table, ids}};
      const std::string want = "gather_rows: id " + std::to_string(bad) + " at position " +
                               std::to_string(at) + " is not a token id in [0, 50)";
      CHECK_THROWS_WITH_AS(run_case(c, nullptr), want.c_str(), OpError);
      for (int threads : {1, 2, 3}) CHECK_THROWS_WITH_AS(run_case(c, &pool(threads)), want.c_str(), OpError);
    }
  }
  // An empty table has no valid id.
  CHECK_THROWS_WITH_AS(run_case({OpKind::GatherRows, {}, {Tensor(Shape{0, 2}), scalar(0.0f)}}, nullptr),
                       "gather_rows: id 0.000000 at position 0 is not a token id in [0, 0)", OpError);
}

TEST_CASE("gather_rows' VJP: reshapes around embedding_backward; rows added in increasing position from +0") {
  EagerVjpBuilder b;
  const Tensor table_t(Shape{3, 2, 1}, std::vector<float>{9, 9, 9, 9, 9, 9});
  const ValueRef table = b.add(table_t);
  const ValueRef ids = b.add(Tensor(Shape{2, 2}, std::vector<float>{2, 0, 2, 2}));
  const ValueRef y = b.emit(OpKind::GatherRows, {}, {table, ids});
  // Row 2 gets 1e8 + 1 + (−1e8) in that order: (1e8 + 1) rounds to 1e8, so the sum is +0, not 1.
  const Tensor gt(Shape{2, 2, 2, 1}, std::vector<float>{1e8f, -0.0f, 5, 6, 1, 2, -1e8f, 3});
  const ValueRef g = b.add(gt);
  const std::vector<ValueRef> inputs{table, ids}, outputs{y}, grads{g};
  const bool need[2] = {true, false};
  const Attrs none;
  std::vector<ValueRef> in_grads(2, 0);
  op_info(OpKind::GatherRows).vjp(b, VjpArgs{none, inputs, outputs, grads, need}, in_grads);
  CHECK(in_grads[1] == 0);
  const Tensor& dt = b.value(in_grads[0]);
  REQUIRE(dt.shape() == Shape{3, 2, 1});
  // Row 0: 5, 6; row 1: never gathered, +0; row 2: (+0 + 1e8 + 1 − 1e8, +0 + −0 + 2 + 3).
  CHECK(bits(dt) == std::vector<uint32_t>{float_bits(5.0f), float_bits(6.0f), 0u, 0u, 0u, float_bits(5.0f)});
}

TEST_CASE("the shape rules' refusals name the op, the shapes and what is wrong") {
  auto refusal = [](OpKind kind, Attrs attrs, std::vector<Shape> in) {
    try {
      infer_shapes(kind, attrs, in);
    } catch (const OpError& e) {
      return std::string(e.what());
    }
    return std::string("no refusal");
  };
  CHECK(refusal(OpKind::Where, {}, {Shape{2, 3}, Shape{4}, Shape{}}) ==
        "where: shapes [2, 3], [4], [] (cond, a, b) do not broadcast (dim 1 of the aligned shapes: 3 vs 4)");
  CHECK(refusal(OpKind::Where, {}, {Shape{3}, Shape{2, 3}, Shape{2, 1, 4}}) ==
        "where: shapes [3], [2, 3], [2, 1, 4] (cond, a, b) do not broadcast (dim 2 of the aligned shapes: 3 "
        "vs 4)");
  CHECK(refusal(OpKind::WhereBackward, {{1}, {}}, {Shape{2, 3}, Shape{3}}) ==
        "where_backward: cond [2, 3] does not broadcast to dy's shape [3]");
  CHECK(refusal(OpKind::WhereBackward, {{2}, {}}, {Shape{3}, Shape{3}}) ==
        "where_backward: branch must be 1 (keep dy where cond is true) or 0 (where false), got 2");
  CHECK(refusal(OpKind::GatherRows, {}, {Shape{}, Shape{2}}) ==
        "gather_rows: the table must have rank 1 to 4, got []");
  CHECK(refusal(OpKind::GatherRows, {}, {Shape{5, 2}, Shape{1, 1, 1, 1}}) ==
        "gather_rows: ids must have rank 0 to 3, got [1, 1, 1, 1]");
  CHECK(
      refusal(OpKind::GatherRows, {}, {Shape{5, 2, 3}, Shape{1, 1, 1}}) ==
      "gather_rows: the output ids.shape ++ table.shape[1:] of ids [1, 1, 1] and table [5, 2, 3] would have "
      "rank 5, more than 4");
}
