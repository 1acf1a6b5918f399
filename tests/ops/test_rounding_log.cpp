// Rounding logs (ops/rounding_log.h; Srivastava, Arora, Boneh, NeurIPS 2024): distances to the float32
// rounding boundary, the trainer's logged rounding, the replayer's rounding by the log, the referee's
// check of a decision, and the five-trits-per-byte packing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "ops/rounding_log.h"
#include "ops/simd.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

using namespace tribunal;

namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// The midpoint between float32 f and the next float32 up, and their spacing.
struct Gap {
  double midpoint, spacing;
};
Gap gap_above(float f) {
  const double lo = f, hi = std::nextafter(f, std::numeric_limits<float>::infinity());
  return {(lo + hi) / 2, hi - lo};
}

}  // namespace

TEST_CASE("rounding log: distance to the float32 boundary, in units of the float32 spacing") {
  const Gap g = gap_above(1.0f);
  CHECK(boundary_distance(1.0) == 0.5);  // a float32 sits between two midpoints
  CHECK(boundary_distance(g.midpoint) == 0.0);
  CHECK(boundary_distance(g.midpoint + g.spacing / 4) == 0.25);
  CHECK(boundary_distance(g.midpoint - g.spacing / 8) == 0.125);
  CHECK(boundary_distance(std::nan("")) == 0.5);
  CHECK(boundary_distance(std::numeric_limits<double>::infinity()) == 0.5);
  // Subnormal: halfway between 0 and the smallest subnormal float32.
  const double tiny = std::numeric_limits<float>::denorm_min();
  CHECK(boundary_distance(tiny / 2) == 0.0);
  CHECK(boundary_distance(-tiny / 2) == 0.0);
  // Overflow: the boundary between FLT_MAX and +inf is FLT_MAX + half its spacing.
  const double max = std::numeric_limits<float>::max();
  const double overflow_midpoint = max + (max - std::nextafter(std::numeric_limits<float>::max(), 0.0f)) / 2;
  CHECK(boundary_distance(overflow_midpoint) == 0.0);
  CHECK(boundary_distance(std::ldexp(1.0, 129)) == 0.5);
}

TEST_CASE("rounding log: the trainer logs the side of values near a boundary, and replays its own log") {
  const double tau = 1.0 / 64;
  const Gap g = gap_above(3.0f);
  const float lo = 3.0f, hi = std::nextafter(3.0f, 4.0f);
  // Far from the boundary: round to nearest, nothing logged.
  LoggedRounding r = round_logged(g.midpoint - g.spacing / 4, tau);
  CHECK(r.decision == Rounding::Nearest);
  CHECK(bits(r.value) == bits(lo));
  // Within τ below and above the midpoint.
  r = round_logged(g.midpoint - g.spacing / 128, tau);
  CHECK(r.decision == Rounding::Down);
  CHECK(bits(r.value) == bits(lo));
  r = round_logged(g.midpoint + g.spacing / 128, tau);
  CHECK(r.decision == Rounding::Up);
  CHECK(bits(r.value) == bits(hi));
  // On the midpoint: ties to even (3.0f's mantissa is even), logged as what it rounded to.
  r = round_logged(g.midpoint, tau);
  CHECK(bits(r.value) == bits(static_cast<float>(g.midpoint)));
  CHECK(r.decision == (bits(r.value) == bits(lo) ? Rounding::Down : Rounding::Up));
  // NaN and ±inf pass through; a value past the overflow boundary rounds up to +inf, logged.
  CHECK(std::isnan(round_logged(std::nan(""), tau).value));
  CHECK(round_logged(-std::numeric_limits<double>::infinity(), tau).decision == Rounding::Nearest);
  const double max = std::numeric_limits<float>::max();
  const double overflow_midpoint = max + (max - std::nextafter(std::numeric_limits<float>::max(), 0.0f)) / 2;
  r = round_logged(overflow_midpoint * (1 + 1e-16), tau);
  CHECK(r.decision == Rounding::Up);
  CHECK(std::isinf(r.value));
  CHECK(std::isinf(round_replayed(overflow_midpoint * (1 - 1e-16), Rounding::Up)));
  CHECK(round_replayed(overflow_midpoint * (1 + 1e-16), Rounding::Down) == std::numeric_limits<float>::max());
  // τ outside [0, 1/4] is refused. τ = 0 logs nothing and allows only "nearest" (an op whose float64
  // result every IEEE-754 implementation computes alike).
  CHECK_THROWS_AS(round_logged(1.0, -0.01), OpError);
  CHECK_THROWS_AS(round_logged(1.0, 0.3), OpError);
  const double midpoint = 1.0 + 0x1p-24;  // exactly between 1 and the float32 after it
  CHECK(round_logged(midpoint, 0.0).decision == Rounding::Nearest);
  CHECK(round_logged(midpoint, 0.0).value == 1.0f);  // ties to even
  CHECK(round_logged(midpoint, 0x1p-10).decision == Rounding::Down);
  CHECK(rounding_allowed(midpoint, Rounding::Nearest, 0.0));
  CHECK_FALSE(rounding_allowed(midpoint, Rounding::Down, 0.0));
  CHECK_FALSE(rounding_allowed(midpoint, Rounding::Up, 0.0));
  CHECK_THROWS_AS(rounding_allowed(1.0, Rounding::Nearest, -1.0), OpError);
}

TEST_CASE(
    "rounding log: another kernel's float64 within τ/2 replays to the same float32 bits, only with the log") {
  // Two honest kernels: the trainer's value x and a replayer's x + δ with |δ| ≤ τ/2 spacings (the
  // contract between τ and the kernels). Values are drawn near boundaries on purpose, where the
  // kernels' float64 results straddle a midpoint, across binades, signs and subnormals.
  const double tau = 1.0 / 256;
  std::mt19937_64 rng(2403);
  std::uniform_int_distribution<int> exponent(-140, 120);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  int straddled = 0;
  for (int i = 0; i < 200000; ++i) {
    const float base =
        static_cast<float>(std::ldexp(1.0 + std::fabs(unit(rng)), exponent(rng)) * (unit(rng) < 0 ? -1 : 1));
    const Gap g = gap_above(base);
    const double x = g.midpoint + unit(rng) * 2 * tau * g.spacing;  // within 2τ of a boundary
    const double x2 = x + unit(rng) * (tau / 2) * g.spacing;
    const LoggedRounding trained = round_logged(x, tau);
    CAPTURE(x);
    CAPTURE(x2);
    REQUIRE(bits(round_replayed(x2, trained.decision)) == bits(trained.value));
    REQUIRE(rounding_allowed(x2, trained.decision, tau));  // the referee, holding x2, accepts the log
    straddled += bits(static_cast<float>(x2)) != bits(trained.value);
  }
  // Without the log, round-to-nearest of the replayer's value differs from the trainer's often here.
  MESSAGE(straddled << " of 200000 near-boundary values round differently without the log");
  CHECK(straddled > 10000);
}

TEST_CASE("rounding log: the referee refuses a decision its own float64 value does not allow") {
  const double tau = 1.0 / 64;
  const Gap g = gap_above(-0.75f);
  const double far = g.midpoint + g.spacing / 4;  // distance 0.25 ≥ 3τ/2
  CHECK(rounding_allowed(far, Rounding::Nearest, tau));
  CHECK_FALSE(
      rounding_allowed(far, Rounding::Down, tau));  // a forged decision: flips a value that is not near
  CHECK_FALSE(rounding_allowed(far, Rounding::Up, tau));
  const double near = g.midpoint + g.spacing * tau / 4;         // distance τ/4 < τ/2
  CHECK_FALSE(rounding_allowed(near, Rounding::Nearest, tau));  // an omitted decision
  CHECK(rounding_allowed(near, Rounding::Down, tau));           // either side: the scheme's one-ulp freedom
  CHECK(rounding_allowed(near, Rounding::Up, tau));
  CHECK_FALSE(rounding_allowed(-0.75, Rounding::Up, tau));  // a float32 itself is never near a boundary
}

TEST_CASE("rounding log: five trits per byte, one encoding per log") {
  std::mt19937 rng(5);
  for (size_t count = 0; count <= 23; ++count) {
    std::vector<Rounding> d(count);
    for (Rounding& r : d) r = static_cast<Rounding>(rng() % 3);
    const std::vector<uint8_t> packed = pack_trits(d);
    CHECK(packed.size() == (count + 4) / 5);
    for (uint8_t b : packed) CHECK(b <= 242);
    CHECK(unpack_trits(packed, count) == d);
  }
  const std::vector<Rounding> all_up(5, Rounding::Up);
  CHECK(pack_trits(all_up) == std::vector<uint8_t>{242});
  CHECK(pack_trits(std::vector<Rounding>{Rounding::Down, Rounding::Up}) == std::vector<uint8_t>{1 + 2 * 3});
  CHECK_THROWS_WITH_AS(unpack_trits(std::vector<uint8_t>{243}, 5),
                       "rounding log: byte 0 is 243 (at most 242)", OpError);
  CHECK_THROWS_AS(unpack_trits(std::vector<uint8_t>{0, 0}, 5), OpError);  // one byte too many
  CHECK_THROWS_WITH_AS(unpack_trits(std::vector<uint8_t>{9}, 2),
                       "rounding log: byte 0 has a decision past the 2 logged", OpError);
}

TEST_CASE("rounding log: a node's rounding and replay on every SIMD path are the per-value rules") {
  // Values of every kind the per-node loops meet: near float32 midpoints and on them, float32 values,
  // ±0, subnormals, ±FLT_MAX and beyond, infinities, NaN; on a quantum's grid near its midpoints,
  // multiples of it, near 2^23·q where the grid changes, and values that cancel to near zero.
  std::mt19937_64 rng(32);
  std::uniform_real_distribution<double> unit(-1, 1);
  std::vector<double> x, q;
  const double quanta[] = {0.0, 0x1p-40, 0x1p-20, 0x1p-149, 0x1p-3, 1.0};
  for (int i = 0; i < 40000; ++i) {  // more than two of round_outputs_logged's pool ranges
    const double qi = quanta[i % 6];
    const float f = static_cast<float>(unit(rng) * std::ldexp(1.0, static_cast<int>(rng() % 60) - 30));
    const Gap g = gap_above(f);
    double v = 0;
    switch (rng() % 9) {
      case 0:  // within a few τ of a float32 midpoint
        v = g.midpoint + unit(rng) * 0.1 * g.spacing;
        break;
      case 1:  // a float32 value, or exactly a midpoint
        v = rng() % 2 ? f : g.midpoint;
        break;
      case 2:  // near a multiple of the quantum and its midpoints
        v = qi > 0 ? (std::floor(unit(rng) * 1e6) + 0.5 + unit(rng) * 0.05) * qi : unit(rng);
        break;
      case 3:  // near where the quantum's grid meets the float32 grid
        v = qi > 0 ? 0x1p23 * qi * (1 + unit(rng) * 1e-6) : unit(rng) * 1e-40;
        break;
      case 4:  // subnormal float32 magnitudes and tiny doubles
        v = unit(rng) * 1e-44;
        break;
      case 5: {  // near the midpoints beside a power of two p (the spacing below it is half the one above)
        const double p = std::ldexp(1.0, static_cast<int>(rng() % 260) - 130);
        const double below = p * 0x1p-24, above = p * 0x1p-23;
        v = (rng() % 2 ? p - below / 2 + unit(rng) * 0.1 * below : p + above / 2 + unit(rng) * 0.1 * above) *
            (rng() % 2 ? 1 : -1);
        break;
      }
      default:
        v = unit(rng) * std::ldexp(1.0, static_cast<int>(rng() % 300) - 150);
    }
    x.push_back(v);
    q.push_back(qi);
  }
  const double edges[] = {0.0,
                          -0.0,
                          std::numeric_limits<float>::max(),
                          -static_cast<double>(std::numeric_limits<float>::max()),
                          3.4028235677973366e38,
                          -3.4028235677973366e38,
                          1e39,
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min() * 0.5,
                          -std::numeric_limits<float>::denorm_min() * 0.75,
                          std::numeric_limits<float>::denorm_min()};
  for (double e : edges)
    for (double qi : quanta) {
      x.push_back(e);
      q.push_back(qi);
    }
  // Two outputs (the second on the float32 grid, the first with quanta), so the log runs across them.
  const std::vector<std::vector<double>> values{x, std::vector<double>(x.rbegin(), x.rend())};
  const std::vector<std::vector<double>> node_quanta{q, {}};
  const double tau = 0x1p-5;
  for (SimdPath path : available_simd_paths()) {
    CAPTURE(simd_path_name(path));
    const ScopedSimdPath scoped(path);
    Tensor y0(Shape{static_cast<int64_t>(x.size())}), y1(Shape{static_cast<int64_t>(x.size())});
    Tensor* out[] = {&y0, &y1};
    const RoundingLog log = round_outputs_logged(values, out, tau, node_quanta);
    const std::vector<Rounding> decisions = unpack_trits(log.packed, log.count);
    REQUIRE(log.count == 2 * x.size());
    uint64_t logged = 0, k = 0;
    for (size_t i = 0; i < 2; ++i)
      for (size_t e = 0; e < x.size(); ++e, ++k) {
        const double qe = quantum_at(node_quanta, i, e);
        const LoggedRounding want = round_logged(values[i][e], tau, qe);
        CAPTURE(values[i][e]);
        CAPTURE(qe);
        REQUIRE(bits(out[i]->values()[e]) == bits(want.value));
        REQUIRE(decisions[k] == want.decision);
        logged += want.decision != Rounding::Nearest;
      }
    CHECK(logged > 1000);  // the band was exercised on both sides
    // The values' ranges and the packing split over three threads: the same log and values.
    ThreadPool three(3);
    Tensor z0(y0.shape()), z1(y1.shape());
    Tensor* pooled[] = {&z0, &z1};
    CHECK(round_outputs_logged(values, pooled, tau, node_quanta, &three) == log);
    CHECK(std::memcmp(z0.data(), y0.data(), x.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(z1.data(), y1.data(), x.size() * sizeof(float)) == 0);
    // The replay by the same log: round_replayed's values (the logged ones, except at exactly the
    // overflow midpoint −(FLT_MAX + 2^103), which rounds to −inf and whose logged side, up, replays to
    // −FLT_MAX: the per-value rules' own edge); a flipped decision refused where the per-value check first
    // refuses one.
    Tensor r0(y0.shape()), r1(y1.shape());
    Tensor* replayed[] = {&r0, &r1};
    CHECK_FALSE(round_outputs_replayed(values, log, replayed, tau, node_quanta).has_value());
    uint64_t same = 0;
    k = 0;
    for (size_t i = 0; i < 2; ++i)
      for (size_t e = 0; e < x.size(); ++e, ++k) {
        const float want = round_replayed(values[i][e], decisions[k], quantum_at(node_quanta, i, e));
        CAPTURE(values[i][e]);
        REQUIRE(bits(replayed[i]->values()[e]) == bits(want));
        same += bits(want) == bits(out[i]->values()[e]);
      }
    CHECK(same == 2 * (x.size() - std::size(quanta)));  // all but −(FLT_MAX + 2^103), once per quantum
    std::vector<Rounding> flipped = decisions;
    size_t first_refused = flipped.size();
    for (size_t j = 0; j < flipped.size(); ++j) {
      flipped[j] = flipped[j] == Rounding::Nearest ? Rounding::Up : Rounding::Nearest;
      const size_t i = j / x.size(), e = j % x.size();
      if (first_refused == flipped.size() &&
          !rounding_allowed(values[i][e], flipped[j], tau, quantum_at(node_quanta, i, e)))
        first_refused = j;
    }
    REQUIRE(first_refused < flipped.size());
    const RoundingLog bad{log.count, pack_trits(flipped)};
    CHECK(round_outputs_replayed(values, bad, replayed, tau, node_quanta) ==
          std::optional<uint64_t>(first_refused));
  }
}
