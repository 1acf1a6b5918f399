// Rounding logs (ops/rounding_log.h; Srivastava, Arora, Boneh, NeurIPS 2024): distances to the float32
// rounding boundary, the trainer's logged rounding, the replayer's rounding by the log, the referee's
// check of a decision, and the five-trits-per-byte packing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ops/rounding_log.h"
#include "ops/tensor.h"

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
