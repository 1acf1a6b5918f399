// Rounding quanta (ops/float64/float64.h rounding_quanta, ops/rounding_log.h): the grid of multiples of
// a power of two that a gemm op's values are rounded to below 2^23·q, the quanta derived from the
// operands' magnitudes, and the reason for both: a sum that cancels to near zero, summed in two orders,
// is refused on the float32 grid and replays bit for bit on the quantum grid.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/float64/float64.h"
#include "ops/rounding_log.h"
#include "ops/tensor.h"

using namespace tribunal;

namespace {

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

std::vector<std::vector<double>> quanta_of(OpKind kind, const Attrs& attrs, std::vector<const Tensor*> in) {
  std::vector<std::vector<double>> q(1);
  REQUIRE(rounding_quanta(kind, attrs, in, q, kDefaultRoundingQuantumBits));
  return q;
}

}  // namespace

TEST_CASE(
    "rounding quanta: below 2^23·q values round to multiples of q; above, to float32 as without a quantum") {
  const double q = 0x1p-20, tau = 1.0 / 32;
  const double x = 3.3 * q;  // between 3q and 4q, 0.2 steps from the midpoint 3.5q
  CHECK(boundary_distance(x, q) == doctest::Approx(0.2));
  CHECK(boundary_distance(x) != doctest::Approx(0.2));  // on the float32 grid it is elsewhere
  LoggedRounding r = round_logged(x, tau, q);
  CHECK(r.decision == Rounding::Nearest);
  CHECK(r.value == static_cast<float>(3 * q));
  r = round_logged(3.49 * q, tau, q);  // 0.01 steps below the midpoint: logged
  CHECK(r.decision == Rounding::Down);
  CHECK(r.value == static_cast<float>(3 * q));
  CHECK(round_replayed(3.51 * q, Rounding::Down, q) == static_cast<float>(3 * q));
  CHECK(round_replayed(3.49 * q, Rounding::Up, q) == static_cast<float>(4 * q));
  CHECK(round_logged(2.5 * q, 0.0, q).value == static_cast<float>(2 * q));  // ties to the even multiple
  CHECK(round_logged(-2.5 * q, 0.0, q).value == static_cast<float>(-2 * q));
  CHECK(boundary_distance(7 * q, q) == 0.5);  // on the grid
  CHECK_FALSE(rounding_allowed(7 * q, Rounding::Up, tau, q));
  // At and above 2^23·q every float32 is a multiple of q: the same as the float32 grid.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(1.0, 1e6);
  for (int i = 0; i < 10000; ++i) {
    const double y = 0x1p23 * q * u(rng) * (i % 2 ? -1 : 1);
    REQUIRE(boundary_distance(y, q) == boundary_distance(y));
    REQUIRE(bits(round_logged(y, tau, q).value) == bits(round_logged(y, tau).value));
  }
  // Just below 2^23·q the float32 spacing is q/2: the grid keeps every other float32, and the others
  // are its midpoints.
  const double below = 0x1p23 * q - 1.5 * q;
  CHECK(boundary_distance(below, q) == 0);
  CHECK(boundary_distance(below) == 0.5);  // a float32 itself
  // Zero on the quantum's grid is +0 from either side (two kernels' cancelling sums may straddle it).
  CHECK(bits(round_replayed(-0.49 * q, Rounding::Up, q)) == bits(0.0f));
  CHECK(bits(round_logged(-0.2 * q, tau, q).value) == bits(0.0f));
  CHECK(bits(round_logged(0.2 * q, tau, q).value) == bits(0.0f));
  CHECK(bits(round_logged(-0x1p-200, 0.0).value) == bits(-0.0f));  // without a quantum: IEEE-754's −0
  // A quantum must be 0 or a power of two in [2^-149, 2^104].
  CHECK_THROWS_AS(boundary_distance(1.0, 3.0), OpError);
  CHECK_THROWS_AS(round_logged(1.0, tau, 0x1p-150), OpError);
  CHECK_THROWS_AS(round_replayed(1.0, Rounding::Up, -0x1p-10), OpError);
}

TEST_CASE(
    "rounding quanta: 2^(row magnitude + column magnitude + ⌈log2 K⌉ − 38), the same for every layout") {
  REQUIRE(kDefaultRoundingQuantumBits == 38);
  // a[2,3]: row 0 max 0.75 (< 2^0), row 1 all zeros; b[3,2]: column 0 max 3 (< 2^2), column 1 max 0.1 (<
  // 2^-3).
  const Tensor a(Shape{2, 3}, std::vector<float>{0.5f, -0.75f, 0.25f, 0, -0.0f, 0});
  const Tensor b(Shape{3, 2}, std::vector<float>{1, 0.1f, -3, 0, 2, -0.05f});
  const auto q = quanta_of(OpKind::Matmul, {{0, 0}, {}}, {&a, &b});
  REQUIRE(q[0].size() == 4);
  CHECK(q[0][0] == std::ldexp(1.0, 0 + 2 + 2 - 38));  // K = 3: ⌈log2 3⌉ = 2
  CHECK(q[0][1] == std::ldexp(1.0, 0 - 3 + 2 - 38));
  CHECK(q[0][2] == 0);  // a zero row: the sum is exactly +0
  CHECK(q[0][3] == 0);
  // The same product with a and b stored transposed gives the same quanta.
  const Tensor at(Shape{3, 2}, std::vector<float>{0.5f, 0, -0.75f, -0.0f, 0.25f, 0});
  const Tensor bt(Shape{2, 3}, std::vector<float>{1, -3, 2, 0.1f, 0, -0.05f});
  CHECK(quanta_of(OpKind::Matmul, {{1, 1}, {}}, {&at, &bt}) == q);
  // Linear adds the bias: the bound doubles past the larger of the product's and the bias's.
  const Tensor bias(Shape{2}, std::vector<float>{100, 0});  // 100 < 2^7
  const auto ql = quanta_of(OpKind::Linear, {}, {&a, &b, &bias});
  CHECK(ql[0][0] == std::ldexp(1.0, 7 + 1 - 38));
  CHECK(ql[0][1] == q[0][1]);
  CHECK(ql[0][2] == 0);  // zero row: y = b exactly
  // Linear with trans_b takes w as [N,K] (bt): w's rows are the output columns, the same quanta.
  CHECK(quanta_of(OpKind::Linear, {{1}, {}}, {&a, &bt, &bias}) == ql);
  CHECK(quanta_of(OpKind::Linear, {{0}, {}}, {&a, &b, &bias}) == ql);
  // A NaN leaves no bound: the float32 grid.
  const Tensor an(Shape{2, 3}, std::vector<float>{std::nanf(""), 1, 1, 1, 1, 1});
  const auto qn = quanta_of(OpKind::Matmul, {{0, 0}, {}}, {&an, &b});
  CHECK(qn[0][0] == 0);
  CHECK(qn[0][2] > 0);
  // Ops that are this library's own float64 code have none.
  std::vector<std::vector<double>> none(1, std::vector<double>(3, 1.0));
  const Tensor x(Shape{2, 3});
  CHECK_FALSE(rounding_quanta(OpKind::SumRows, {}, std::vector<const Tensor*>{&x}, none, 38));
  CHECK(none[0].empty());
  // quantum_bits scales every quantum; outside [24, 64] it is refused.
  std::vector<std::vector<double>> q40(1);
  REQUIRE(rounding_quanta(OpKind::Matmul, {{0, 0}, {}}, std::vector<const Tensor*>{&a, &b}, q40, 40));
  CHECK(q40[0][0] == q[0][0] / 4);
  CHECK_THROWS_AS(rounding_quanta(OpKind::Matmul, {{0, 0}, {}}, std::vector<const Tensor*>{&a, &b}, q40, 23),
                  OpError);
  CHECK_THROWS_AS(rounding_quanta(OpKind::Matmul, {{0, 0}, {}}, std::vector<const Tensor*>{&a, &b}, q40, 65),
                  OpError);
}

TEST_CASE("rounding quanta: a cancelling dot product summed in two orders replays only on the quantum grid") {
  // y = x·w + 0 with K = 4096 terms of magnitude up to 1, the last two chosen so that the sum cancels to
  // ~1e-13: two summation orders (the trainer's forward chain, a replayer's reverse chain — two gemms)
  // then differ by millions of float32 spacings of the result, but by a tiny fraction of its quantum.
  const int64_t k = 4096;
  const double tau = 1.0 / 32;
  std::mt19937 rng(1803);
  std::uniform_real_distribution<float> u(-1, 1);
  int refused_on_float32_grid = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    std::vector<float> xv(k), wv(k);
    double partial = 0;
    for (int64_t i = 0; i + 2 < k; ++i) {
      // Magnitudes spread over 2^-12 … 1, so that the products' low bits fall below the partial sums'
      // ulp and the two orders round differently (with |x|, |w| ~ 1 every partial sum is exact).
      xv[i] = std::ldexp(u(rng), -static_cast<int>(rng() % 13));
      wv[i] = std::ldexp(u(rng), -static_cast<int>(rng() % 13));
      partial += static_cast<double>(xv[i]) * wv[i];
    }
    // Two last terms cancel the sum down to ~2^-48 of it: partial − fl32(partial) − fl32(the rest).
    xv[k - 2] = xv[k - 1] = 1;
    wv[k - 2] = -static_cast<float>(partial);
    wv[k - 1] = -static_cast<float>(partial + static_cast<double>(wv[k - 2]));
    const Tensor x(Shape{1, k}, xv), w(Shape{k, 1}, wv), b(Shape{1}, std::vector<float>{0});
    double forward = 0, reverse = 0;
    for (int64_t i = 0; i < k; ++i) forward += static_cast<double>(xv[i]) * wv[i];
    for (int64_t i = k; i-- > 0;) reverse += static_cast<double>(xv[i]) * wv[i];
    CAPTURE(forward);
    CAPTURE(reverse);
    const auto quanta = quanta_of(OpKind::Linear, {}, {&x, &w, &b});
    const double q = quanta[0][0];
    REQUIRE(q > 0);
    REQUIRE(std::fabs(forward - reverse) < q * tau / 2 / 1000);  // far inside the contract on this grid
    // On the quantum grid the replayer accepts the trainer's decision and lands on its bits.
    const LoggedRounding trained = round_logged(forward, tau, q);
    REQUIRE(rounding_allowed(reverse, trained.decision, tau, q));
    REQUIRE(bits(round_replayed(reverse, trained.decision, q)) == bits(trained.value));
    // On the float32 grid the two orders are far apart in spacings of the result.
    const LoggedRounding plain = round_logged(forward, tau);
    refused_on_float32_grid += !rounding_allowed(reverse, plain.decision, tau) ||
                               bits(round_replayed(reverse, plain.decision)) != bits(plain.value);
  }
  MESSAGE(refused_on_float32_grid << " of " << trials
                                  << " cancelling sums fail to replay on the float32 grid");
  CHECK(refused_on_float32_grid > trials * 9 / 10);
}

TEST_CASE("rounding quanta: the factored form rounds and logs as the quanta filled out, value by value") {
  std::mt19937 rng(44);
  std::uniform_real_distribution<float> u(-2, 2);
  const auto random = [&](Shape s, bool zero_rows) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = zero_rows && i % 23 < 7 ? 0.0f : u(rng) * (i % 5 ? 1 : 1e-3f);
    return Tensor(s, v);
  };
  const Tensor a = random(Shape{3, 50, 70}, true), b = random(Shape{3, 70, 61}, false);
  const Tensor x = random(Shape{90, 70}, true), w = random(Shape{70, 61}, false);
  std::vector<float> bias_values(61);
  for (size_t j = 0; j < bias_values.size(); ++j) bias_values[j] = j % 3 == 0 ? 0.0f : u(rng) * 300;
  const Tensor bias(Shape{61}, bias_values);
  struct Case {
    OpKind kind;
    Attrs attrs;
    std::vector<const Tensor*> in;
  };
  for (const Case& c :
       {Case{OpKind::Matmul, {{0, 0}, {}}, {&a, &b}}, Case{OpKind::Linear, {}, {&x, &w, &bias}}}) {
    CAPTURE(static_cast<int>(c.kind));
    std::vector<std::vector<double>> wide(1), quanta(1);
    run_float64(c.kind, c.attrs, c.in, wide, Float64Gemm::Naive);
    REQUIRE(rounding_quanta(c.kind, c.attrs, c.in, quanta, kDefaultRoundingQuantumBits));
    QuantaFactors factors;
    REQUIRE(rounding_quanta_factors(c.kind, c.attrs, c.in, factors, kDefaultRoundingQuantumBits));
    REQUIRE(factors.size() == quanta[0].size());
    // Values near the quanta's rounding boundaries, so that decisions are logged.
    for (size_t e = 0; e < wide[0].size(); e += 3)
      if (quanta[0][e] > 0) wide[0][e] = (std::floor(wide[0][e] / quanta[0][e]) + 0.5 + 1e-3) * quanta[0][e];
    Tensor by_value(Shape{static_cast<int64_t>(wide[0].size())}), by_factor = by_value;
    Tensor* const out_v[] = {&by_value};
    Tensor* const out_f[] = {&by_factor};
    const RoundingLog log = round_outputs_logged(wide, out_v, 1.0 / 32, quanta);
    CHECK(count_logged(log) > 0);
    CHECK(round_outputs_logged(wide, out_f, 1.0 / 32, factors) == log);
    CHECK(std::memcmp(by_value.data(), by_factor.data(), wide[0].size() * sizeof(float)) == 0);
  }
}
