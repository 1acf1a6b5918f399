// The layout ops of the transformer (reshape, embedding, embedding_backward, split/merge heads,
// dropout, dropout_backward) and the batched rank-3 matmul: their random cases, float64 models and
// bad inputs for the generic checks of test_op_coverage.cpp (op_test_support.h), plus what those
// checks cannot see: id validation on worker threads, dropout's keep rate and the forward/backward
// mask agreement, the split/merge round trip, attention-shaped batched matmuls and the VJP rules.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/philox.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/simd.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

double f64(float x) {
  return static_cast<double>(x);
}

/// A small dimension for ops whose tensors multiply four of them (keeps cases below ~10⁶ elements).
int64_t tiny_dim(std::mt19937& rng) {
  static constexpr int64_t kDims[] = {1, 2, 3, 5, 7};
  return kDims[rng() % std::size(kDims)];
}

/// Token ids in [0, vocab) stored as floats, shaped [b, t].
Tensor random_ids(int64_t b, int64_t t, int64_t vocab, std::mt19937& rng) {
  Tensor ids(Shape{b, t});
  for (float& v : ids.values()) v = static_cast<float>(rng() % static_cast<uint32_t>(vocab));
  return ids;
}

Attrs dropout_attrs(std::mt19937& rng) {
  static constexpr float kP[] = {0.0f, 0.1f, 0.25f, 0.5f, 0.9f};
  const uint64_t seed = static_cast<uint64_t>(rng()) << 32 | rng();
  return {{static_cast<int64_t>(seed), static_cast<int64_t>(rng()), static_cast<int64_t>(rng() >> 1)},
          {kP[rng() % std::size(kP)]}};
}

std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c;
  c.kind = kind;
  switch (kind) {
    case OpKind::Reshape: {
      // The reversed dimensions with a 1 inserted somewhere: a different shape of the same size.
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 0, 3);
      std::vector<int64_t> d(s.dims().rbegin(), s.dims().rend());
      d.insert(d.begin() + static_cast<long>(rng() % (d.size() + 1)), 1);
      c.attrs.ints = d;
      c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    case OpKind::Embedding: {
      const int64_t v = big ? 97 : small_dim(rng), d = big ? 67 : small_dim(rng),
                    t = big ? 37 : small_dim(rng), b = big ? 23 : tiny_dim(rng);
      c.in.push_back(random_tensor(Shape{v, d}, rng, specials));
      c.in.push_back(random_tensor(Shape{t, d}, rng, specials));
      c.in.push_back(random_ids(b, t, v, rng));
      return c;
    }
    case OpKind::EmbeddingBackward: {
      // Variant 0: narrow rows (the fast kernel splits the vocabulary); 1: wide rows (split columns).
      const int64_t d = big ? (variant ? 97 : 61) : (variant ? 64 + small_dim(rng) : small_dim(rng));
      const int64_t v = big ? 97 : small_dim(rng), b = big ? 13 : tiny_dim(rng),
                    t = big ? 67 : small_dim(rng);
      c.attrs.ints = {v};
      c.in.push_back(random_ids(b, t, v, rng));
      c.in.push_back(random_tensor(Shape{b * t, d}, rng, specials));
      return c;
    }
    case OpKind::SplitHeads:
    case OpKind::MergeHeads: {
      const int64_t b = big ? 3 : tiny_dim(rng), t = big ? 53 : small_dim(rng), h = big ? 5 : tiny_dim(rng),
                    e = big ? 67 : small_dim(rng);
      c.attrs.ints = {b, t, h};
      c.in.push_back(random_tensor(kind == OpKind::SplitHeads ? Shape{b * t, h * e} : Shape{b * h, t, e}, rng,
                                   specials));
      return c;
    }
    case OpKind::Dropout:
    case OpKind::DropoutBackward: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 0, 3);
      c.attrs = dropout_attrs(rng);
      c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    default:
      break;
  }
  return std::nullopt;
}

/// keepᵢ as docs/numerics.md defines it.
bool dropout_keep(const Attrs& a, int64_t i) {
  const uint64_t element = static_cast<uint64_t>(a.ints[2]) << 32 | static_cast<uint64_t>(i);
  const uint32_t word = philox_random(static_cast<uint64_t>(a.ints[0]), RandomPurpose::Dropout,
                                      static_cast<uint32_t>(a.ints[1]), element)[0];
  return static_cast<double>(word >> 8) / 16777216.0 >= f64(a.floats[0]);
}

Expected exact(std::vector<double> want) {
  Expected e{std::move(want), {}};
  e.tol.assign(e.want.size(), 0.0);
  return e;
}

std::optional<std::vector<Expected>> expect(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  switch (c.kind) {
    case OpKind::Reshape:
      return std::vector<Expected>{exact(to_f64(in[0]))};
    case OpKind::Embedding: {
      const int64_t d = in[0].shape()[1], t = in[1].shape()[0];
      Expected e;
      for (int64_t p = 0; p < in[2].numel(); ++p) {
        const auto id = static_cast<int64_t>(in[2][p]);
        for (int64_t j = 0; j < d; ++j) {
          const double a = in[0][id * d + j], b = in[1][(p % t) * d + j];
          e.want.push_back(a + b);
          e.tol.push_back(kRel * (std::fabs(a) + std::fabs(b)));
        }
      }
      return std::vector<Expected>{e};
    }
    case OpKind::EmbeddingBackward: {
      const int64_t v = c.attrs.ints[0], d = in[1].shape()[1];
      std::vector<double> sum(static_cast<size_t>(v * d), 0.0), mag(sum.size(), 0.0), count(sum.size(), 0.0);
      for (int64_t p = 0; p < in[0].numel(); ++p) {
        const auto id = static_cast<int64_t>(in[0][p]);
        for (int64_t j = 0; j < d; ++j) {
          const auto k = static_cast<size_t>(id * d + j);
          sum[k] += in[1][p * d + j];
          mag[k] += std::fabs(in[1][p * d + j]);
          count[k] += 1.0;
        }
      }
      // A sequential float sum of n terms is within n·2⁻²⁴·Σ|terms| of the exact one.
      Expected e{sum, {}};
      for (size_t k = 0; k < sum.size(); ++k) e.tol.push_back((kRel + count[k] * 0x1p-24) * mag[k]);
      return std::vector<Expected>{e};
    }
    case OpKind::SplitHeads:
    case OpKind::MergeHeads: {
      const int64_t b = c.attrs.ints[0], t = c.attrs.ints[1], h = c.attrs.ints[2];
      const int64_t e = c.kind == OpKind::SplitHeads ? in[0].shape()[1] / h : in[0].shape()[2];
      std::vector<double> want(static_cast<size_t>(in[0].numel()));
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t ti = 0; ti < t; ++ti)
          for (int64_t hi = 0; hi < h; ++hi)
            for (int64_t ei = 0; ei < e; ++ei) {
              const int64_t row_major = (bi * t + ti) * h * e + hi * e + ei;  // x[b·T+t, h·E+e]
              const int64_t head_major = ((bi * h + hi) * t + ti) * e + ei;   // y[b·H+h, t, e]
              if (c.kind == OpKind::SplitHeads)
                want[static_cast<size_t>(head_major)] = in[0][row_major];
              else
                want[static_cast<size_t>(row_major)] = in[0][head_major];
            }
      return std::vector<Expected>{exact(std::move(want))};
    }
    case OpKind::Dropout:
    case OpKind::DropoutBackward: {
      const double scale = 1.0 / (1.0 - f64(c.attrs.floats[0]));
      Expected e;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        const double y = dropout_keep(c.attrs, i) ? in[0][i] * scale : 0.0;
        e.want.push_back(y);
        e.tol.push_back(kRel * std::fabs(y));
      }
      return std::vector<Expected>{e};
    }
    default:
      break;
  }
  return std::nullopt;
}

const Attrs kDrop{{1, 2, 3}, {0.5f}};

const RegisterOpTests kReshapeTests(
    OpKind::Reshape,
    {1,
     make_case,
     expect,
     {{{{5}, {}}, {Shape{2, 3}}, "element count differs"},
      {{{-2, -3}, {}}, {Shape{2, 3}}, "negative dimensions"},
      {{{1, 1, 1, 2, 3}, {}}, {Shape{2, 3}}, "rank 5"},
      {{{std::numeric_limits<int64_t>::max(), 2}, {}}, {Shape{2, 3}}, "element count overflows"},
      {{{6}, {1.0f}}, {Shape{2, 3}}, "a float attribute"},
      {{{6}, {}}, {Shape{2, 3}, Shape{2, 3}}, "two inputs"}},
     {0}});
const RegisterOpTests kEmbeddingTests(
    OpKind::Embedding, {1,
                        make_case,
                        expect,
                        {{{}, {Shape{10}, Shape{4, 8}, Shape{2, 4}}, "rank-1 tok"},
                         {{}, {Shape{10, 8}, Shape{4, 7}, Shape{2, 4}}, "D differs"},
                         {{}, {Shape{10, 8}, Shape{4, 8}, Shape{2, 5}}, "ids longer than T"},
                         {{}, {Shape{10, 8}, Shape{4, 8}, Shape{8}}, "rank-1 ids"},
                         {{{1}, {}}, {Shape{10, 8}, Shape{4, 8}, Shape{2, 4}}, "an int attribute"},
                         {{}, {Shape{10, 8}, Shape{4, 8}}, "no ids"}},
                        {0, 1}});
const RegisterOpTests kEmbeddingBackwardTests(OpKind::EmbeddingBackward,
                                              {2,
                                               make_case,
                                               expect,
                                               {{{{-1}, {}}, {Shape{2, 4}, Shape{8, 3}}, "negative V"},
                                                {{{10}, {}}, {Shape{2, 4}, Shape{7, 3}}, "dy rows ≠ B·T"},
                                                {{{10}, {}}, {Shape{8}, Shape{8, 3}}, "rank-1 ids"},
                                                {{{10}, {}}, {Shape{2, 4}, Shape{24}}, "rank-1 dy"},
                                                {{{}, {}}, {Shape{2, 4}, Shape{8, 3}}, "no V"}}});
const RegisterOpTests kSplitHeadsTests(OpKind::SplitHeads,
                                       {1,
                                        make_case,
                                        expect,
                                        {{{{2, 3, 2}, {}}, {Shape{5, 8}}, "rows ≠ B·T"},
                                         {{{2, 3, 3}, {}}, {Shape{6, 8}}, "H does not divide the width"},
                                         {{{2, 3, 0}, {}}, {Shape{6, 8}}, "H = 0"},
                                         {{{-2, -3, 2}, {}}, {Shape{6, 8}}, "negative B and T"},
                                         {{{2, 3, 2}, {}}, {Shape{2, 3, 8}}, "rank-3 x"},
                                         {{{2, 3}, {}}, {Shape{6, 8}}, "two ints"}},
                                        {0}});
const RegisterOpTests kMergeHeadsTests(OpKind::MergeHeads,
                                       {1,
                                        make_case,
                                        expect,
                                        {{{{2, 3, 2}, {}}, {Shape{5, 3, 4}}, "rows ≠ B·H"},
                                         {{{2, 3, 2}, {}}, {Shape{4, 2, 4}}, "T differs"},
                                         {{{2, 3, 0}, {}}, {Shape{0, 3, 4}}, "H = 0"},
                                         {{{2, 3, 2}, {}}, {Shape{4, 12}}, "rank-2 x"}},
                                        {0}});
const RegisterOpTests kDropoutTests(
    OpKind::Dropout, {1,
                      make_case,
                      expect,
                      {{{{1, 2, 3}, {1.0f}}, {Shape{4}}, "p = 1"},
                       {{{1, 2, 3}, {-0.1f}}, {Shape{4}}, "negative p"},
                       {{{1, 2, 3}, {std::numeric_limits<float>::quiet_NaN()}}, {Shape{4}}, "NaN p"},
                       {{{1, -1, 3}, {0.5f}}, {Shape{4}}, "negative step"},
                       {{{1, int64_t{1} << 32, 3}, {0.5f}}, {Shape{4}}, "step = 2^32"},
                       {{{1, 2, int64_t{1} << 31}, {0.5f}}, {Shape{4}}, "site = 2^31"},
                       {{{1, 2, -1}, {0.5f}}, {Shape{4}}, "negative site"},
                       {kDrop, {Shape{65536, 65536}}, "2^32 elements"},
                       {{{1, 2, 3}, {}}, {Shape{4}}, "no p"},
                       {{{1, 2}, {0.5f}}, {Shape{4}}, "two ints"}},
                      {0}});
const RegisterOpTests kDropoutBackwardTests(OpKind::DropoutBackward,
                                            {1,
                                             make_case,
                                             expect,
                                             {{{{1, 2, 3}, {1.0f}}, {Shape{4}}, "p = 1"},
                                              {{{1, int64_t{1} << 32, 3}, {0.5f}}, {Shape{4}}, "step = 2^32"},
                                              {{{1, 2, -1}, {0.5f}}, {Shape{4}}, "negative site"},
                                              {kDrop, {Shape{65536, 65536}}, "2^32 elements"},
                                              {kDrop, {Shape{4}, Shape{4}}, "two inputs"}}});

/// Runs kind's VJP on forward inputs `in` and output gradient `dy`; returns d loss / d input i.
std::vector<Tensor> vjp(OpKind kind, const Attrs& attrs, std::vector<Tensor> in, Tensor dy) {
  EagerVjpBuilder g;
  std::vector<ValueRef> ins;
  for (Tensor& t : in) ins.push_back(g.add(std::move(t)));
  const ValueRef out = g.emit(kind, attrs, ins), dout = g.add(std::move(dy));
  std::unique_ptr<bool[]> flags(new bool[in.size()]);
  for (size_t i = 0; i < in.size(); ++i) flags[i] = i < 2;  // ids (embedding's input 2) get none
  std::vector<ValueRef> grads(in.size(), 0);
  const VjpArgs args{attrs, ins, std::span<const ValueRef>(&out, 1), std::span<const ValueRef>(&dout, 1),
                     std::span<const bool>(flags.get(), in.size())};
  op_info(kind).vjp(g, args, grads);
  std::vector<Tensor> result;
  for (size_t i = 0; i < in.size() && i < 2; ++i) result.push_back(g.value(grads[i]));
  return result;
}

}  // namespace

TEST_CASE("embedding kernels throw OpError for ids that are not integers in [0, V), on any thread") {
  std::mt19937 rng(11);
  const int64_t vocab = 50, b = 4, t = 100, d = 128;  // 400 rows: the fast kernels use 3 threads
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float bad : {50.0f, 51.0f, -1.0f, 2.5f, 0.5f, nan, inf, -inf, 1e9f, 3e9f}) {
    for (int64_t at : {int64_t{0}, b * t / 2, b * t - 1}) {
      CAPTURE(bad);
      CAPTURE(at);
      Tensor ids = random_ids(b, t, vocab, rng);
      ids[at] = bad;
      Case fwd{OpKind::Embedding,
               {},
               {random_tensor(Shape{vocab, d}, rng, false), random_tensor(Shape{t, d}, rng, false), ids}};
      CHECK_THROWS_AS(run_case(fwd, nullptr), OpError);
      Case back{OpKind::EmbeddingBackward, {{vocab}, {}}, {ids, random_tensor(Shape{b * t, d}, rng, false)}};
      CHECK_THROWS_AS(run_case(back, nullptr), OpError);
      for (int threads : {1, 3}) {
        CHECK_THROWS_AS(run_case(fwd, &pool(threads)), OpError);
        CHECK_THROWS_AS(run_case(back, &pool(threads)), OpError);
      }
    }
  }
  // The extremes of the valid range, and −0 (an integer: 0), are accepted.
  Tensor ids = random_ids(b, t, vocab, rng);
  ids[0] = 0.0f;
  ids[1] = -0.0f;
  ids[2] = static_cast<float>(vocab - 1);
  Case ok{OpKind::Embedding,
          {},
          {random_tensor(Shape{vocab, d}, rng, false), random_tensor(Shape{t, d}, rng, false), ids}};
  const std::vector<Tensor> y = run_everywhere(ok);
  for (int64_t j = 0; j < d; ++j) CHECK(y[0][d + j] == ok.in[0][j] + ok.in[1][d + j]);
}

TEST_CASE("embedding_backward: rows of unused ids are +0, a single −0 contribution gives +0") {
  Tensor ids(Shape{1, 3}, std::vector<float>{2.0f, 2.0f, 0.0f});
  Tensor dy(Shape{3, 2}, std::vector<float>{1.0f, -0.0f, 2.0f, -0.0f, -0.0f, 5.0f});
  const std::vector<Tensor> out = run_everywhere({OpKind::EmbeddingBackward, {{4}, {}}, {ids, dy}});
  const std::vector<float> want{0.0f, 5.0f, 0.0f, 0.0f, 3.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(float_bits(out[0][i]) == float_bits(want[static_cast<size_t>(i)]));  // +0 + −0 = +0, never −0
  }
}

TEST_CASE("dropout keeps about 1 − p of a large tensor, scaled by exactly 1/(1 − p)") {
  const int64_t n = int64_t{1} << 20;
  const Tensor ones(Shape{n}, std::vector<float>(static_cast<size_t>(n), 1.0f));
  for (float p : {0.1f, 0.5f, 0.9f}) {
    CAPTURE(p);
    const Case c{OpKind::Dropout, {{12345, 7, 3}, {p}}, {ones}};
    const Tensor y = run_case(c, &pool(3))[0];
    const float scale = 1.0f / (1.0f - p);
    int64_t kept = 0, other = 0;
    for (float v : y.values()) {
      if (v == scale)
        ++kept;
      else if (float_bits(v) != 0u)
        ++other;  // dropped elements are +0
    }
    CHECK(other == 0);
    // Binomial(n, 1 − p): the standard deviation of the fraction is sqrt(p(1 − p)/n) < 5e-4.
    CHECK(std::fabs(static_cast<double>(kept) / static_cast<double>(n) - (1.0 - p)) < 3e-3);
  }
  // p = 0 keeps everything and multiplies by exactly 1: the output is the input, bit for bit.
  std::mt19937 rng(4);
  const Case zero{OpKind::Dropout, {{99, 0, 0}, {0.0f}}, {random_tensor(Shape{1000}, rng, true)}};
  CHECK(bitwise_equal(run_case(zero, &pool(2))[0], zero.in[0]));
}

TEST_CASE("dropout and dropout_backward drop the same elements; other steps and sites drop others") {
  std::mt19937 rng(8);
  const Shape s{61, 67};
  // Inputs in [1, 2): never zero, so a zero output means "dropped".
  const Tensor x = random_tensor(s, rng, false, 1.0f, 2.0f), dy = random_tensor(s, rng, false, 1.0f, 2.0f);
  const Attrs attrs{{-5, 3, 9}, {0.3f}};
  const Tensor y = run_everywhere({OpKind::Dropout, attrs, {x}})[0];
  const Tensor dx = run_everywhere({OpKind::DropoutBackward, attrs, {dy}})[0];
  const float scale = 1.0f / (1.0f - 0.3f);
  int64_t dropped = 0;
  for (int64_t i = 0; i < s.numel(); ++i) {
    CAPTURE(i);
    CHECK((y[i] == 0.0f) == (dx[i] == 0.0f));
    if (y[i] == 0.0f)
      ++dropped;
    else
      CHECK(float_bits(dx[i]) == float_bits(dy[i] * scale));
  }
  CHECK(dropped > 0);
  // The VJP of dropout is dropout_backward with the same attributes.
  const std::vector<Tensor> g = vjp(OpKind::Dropout, attrs, {x}, dy);
  CHECK(bitwise_equal(g[0], dx));
  // Another step or site gives another mask.
  for (const Attrs& other :
       {Attrs{{-5, 4, 9}, {0.3f}}, Attrs{{-5, 3, 10}, {0.3f}}, Attrs{{-4, 3, 9}, {0.3f}}}) {
    const Tensor z = run_case({OpKind::Dropout, other, {x}}, nullptr)[0];
    CHECK_FALSE(bitwise_equal(z, y));
  }
}

TEST_CASE("split_heads and merge_heads are inverse permutations") {
  std::mt19937 rng(21);
  // A hand-checked element: x[b·T+t, h·E+e] → y[b·H+h, t, e] with B=2, T=3, H=2, E=2.
  Tensor x(Shape{6, 4});
  for (int64_t i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  const Tensor y = run_everywhere({OpKind::SplitHeads, {{2, 3, 2}, {}}, {x}})[0];
  CHECK(y.shape() == Shape{4, 3, 2});
  // b = 1, t = 2, h = 1, e = 0: x[5, 2] = 22 → y[3, 2, 0].
  CHECK(y[(3 * 3 + 2) * 2 + 0] == 22.0f);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t b = 1 + rng() % 4, t = small_dim(rng), h = 1 + rng() % 5, e = small_dim(rng);
    const Attrs attrs{{b, t, h}, {}};
    const Tensor x0 = random_tensor(Shape{b * t, h * e}, rng, true);
    const Tensor split = run_everywhere({OpKind::SplitHeads, attrs, {x0}})[0];
    const Tensor back = run_everywhere({OpKind::MergeHeads, attrs, {split}})[0];
    CHECK(bitwise_equal(back, x0));
    const Tensor y0 = random_tensor(Shape{b * h, t, e}, rng, true);
    // Each one's VJP is the other.
    const Tensor merged = run_case({OpKind::MergeHeads, attrs, {y0}}, nullptr)[0];
    CHECK(bitwise_equal(vjp(OpKind::SplitHeads, attrs, {x0}, y0)[0], merged));
    CHECK(bitwise_equal(vjp(OpKind::MergeHeads, attrs, {y0}, x0)[0], split));
  }
}

TEST_CASE("reshape and embedding VJPs are exact") {
  std::mt19937 rng(31);
  const Tensor x = random_tensor(Shape{3, 4, 5}, rng, false), dy = random_tensor(Shape{12, 5}, rng, false);
  const int64_t vocab = 7, b = 3, t = 5, d = 4;
  const Tensor tok = random_tensor(Shape{vocab, d}, rng, false), pos = random_tensor(Shape{t, d}, rng, false);
  const Tensor ids = random_ids(b, t, vocab, rng), dz = random_tensor(Shape{b * t, d}, rng, false);
  const Tensor dx = vjp(OpKind::Reshape, {{12, 5}, {}}, {x}, dy)[0];
  CHECK(dx.shape() == x.shape());
  CHECK(bitwise_equal(Tensor(Shape{12, 5}, dx.values()), dy));
  const std::vector<Tensor> g = vjp(OpKind::Embedding, {}, {tok, pos, ids}, dz);
  CHECK(bitwise_equal(g[0], run_case({OpKind::EmbeddingBackward, {{vocab}, {}}, {ids, dz}}, nullptr)[0]));
  REQUIRE(g[1].shape() == pos.shape());
  for (int64_t i = 0; i < t * d; ++i) {
    float want[3];
    for (int64_t bi = 0; bi < b; ++bi) want[bi] = dz[bi * t * d + i];
    CHECK(float_bits(g[1][i]) == float_bits(canonical_sum(want, b)));
  }
}

TEST_CASE("batched matmul: attention shapes and edge cases, bitwise on every path and thread count") {
  std::mt19937 rng(64);
  // The GPT's attention: 64 heads × batch of 128×128 products with K = 32 (q·kᵀ) and K = 128 (p·v),
  // plus the transposes of their gradients.
  for (int variant = 0; variant < 4; ++variant) {
    const int64_t ta = variant & 1, tb = variant >> 1, bt = 64, m = 128, n = 128, k = variant == 0 ? 128 : 32;
    CAPTURE(variant);
    const Case c{OpKind::Matmul,
                 {{ta, tb}, {}},
                 {random_tensor(ta ? Shape{bt, k, m} : Shape{bt, m, k}, rng, false),
                  random_tensor(tb ? Shape{bt, n, k} : Shape{bt, k, n}, rng, false)}};
    const Tensor ref = run_everywhere(c)[0];
    // Element 37 of the batch is exactly the rank-2 product of its slices.
    const int64_t e = 37;
    const Case one{OpKind::Matmul,
                   {{ta, tb}, {}},
                   {Tensor(ta ? Shape{k, m} : Shape{m, k},
                           c.in[0].values().subspan(static_cast<size_t>(e * m * k), m * k)),
                    Tensor(tb ? Shape{n, k} : Shape{k, n},
                           c.in[1].values().subspan(static_cast<size_t>(e * k * n), k * n))}};
    const Tensor y = run_case(one, &pool(2))[0];
    CHECK(bitwise_equal(Tensor(Shape{m, n}, ref.values().subspan(static_cast<size_t>(e * m * n), m * n)), y));
  }
  // Two large elements (fewer than the threads: each product is itself split), K = 0 (every chain
  // empty: +0), M = 0, an empty batch, and a batch of 1×1×1 products.
  for (const std::array<int64_t, 4>& dims : std::vector<std::array<int64_t, 4>>{
           {2, 131, 257, 197}, {3, 5, 0, 7}, {4, 0, 3, 5}, {0, 3, 4, 5}, {97, 1, 1, 1}}) {
    const int64_t bt = dims[0], m = dims[1], k = dims[2], n = dims[3];
    CAPTURE(bt);
    CAPTURE(k);
    const Case c{OpKind::Matmul,
                 {{0, 0}, {}},
                 {random_tensor(Shape{bt, m, k}, rng, true), random_tensor(Shape{bt, k, n}, rng, true)}};
    const Tensor y = run_everywhere(c)[0];
    if (k == 0)
      for (float v : y.values()) CHECK(float_bits(v) == 0u);
  }
}

TEST_CASE("the matmul VJP rule differentiates batched products") {
  std::mt19937 rng(65);
  for (int variant = 0; variant < 4; ++variant) {
    const int64_t ta = variant & 1, tb = variant >> 1, bt = 3, m = 5, k = 7, n = 4;
    CAPTURE(variant);
    const Tensor a = random_tensor(ta ? Shape{bt, k, m} : Shape{bt, m, k}, rng, false);
    const Tensor b = random_tensor(tb ? Shape{bt, n, k} : Shape{bt, k, n}, rng, false);
    const Tensor dc = random_tensor(Shape{bt, m, n}, rng, false);
    const std::vector<Tensor> g = vjp(OpKind::Matmul, {{ta, tb}, {}}, {a, b}, dc);
    REQUIRE(g[0].shape() == a.shape());
    REQUIRE(g[1].shape() == b.shape());
    // d/dA(e, i, p) = Σ_j dc(e, i, j)·B(e, p, j);  d/dB(e, p, j) = Σ_i A(e, i, p)·dc(e, i, j).
    auto at = [&](int64_t e, int64_t i, int64_t p) {
      return f64(ta ? a[(e * k + p) * m + i] : a[(e * m + i) * k + p]);
    };
    auto bv = [&](int64_t e, int64_t p, int64_t j) {
      return f64(tb ? b[(e * n + j) * k + p] : b[(e * k + p) * n + j]);
    };
    for (int64_t e = 0; e < bt; ++e)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < k; ++p) {
          double s = 0.0, mag = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            s += f64(dc[(e * m + i) * n + j]) * bv(e, p, j);
            mag += std::fabs(f64(dc[(e * m + i) * n + j]) * bv(e, p, j));
          }
          const float got = ta ? g[0][(e * k + p) * m + i] : g[0][(e * m + i) * k + p];
          CHECK(std::fabs(got - s) <= kRel * mag);
        }
    for (int64_t e = 0; e < bt; ++e)
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0.0, mag = 0.0;
          for (int64_t i = 0; i < m; ++i) {
            s += at(e, i, p) * f64(dc[(e * m + i) * n + j]);
            mag += std::fabs(at(e, i, p) * f64(dc[(e * m + i) * n + j]));
          }
          const float got = tb ? g[1][(e * n + j) * k + p] : g[1][(e * k + p) * n + j];
          CHECK(std::fabs(got - s) <= kRel * mag);
        }
  }
}
