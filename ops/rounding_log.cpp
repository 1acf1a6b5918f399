// Rounding decisions and their packed log. See rounding_log.h.
#include "ops/rounding_log.h"

#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "ops/tensor.h"

namespace tribunal {
namespace {

/// 2^128: the float32 "value" above FLT_MAX. float32 rounding overflows above the midpoint between
/// FLT_MAX and it, so it stands in for the upper neighbour of FLT_MAX.
constexpr double kOverflow = 340282366920938463463374607431768211456.0;

/// x's float32 neighbours, as doubles, with lo ≤ x ≤ hi (lo == hi when x is a float32). Requires a
/// finite x with |x| < 2^128.
struct Neighbours {
  double lo = 0, hi = 0;
};

Neighbours float32_neighbours(double x) {
  const float f = static_cast<float>(x);
  if (std::isinf(f)) {  // between the overflow midpoint and 2^128
    const double max = std::numeric_limits<float>::max();
    return x > 0 ? Neighbours{max, kOverflow} : Neighbours{-kOverflow, -max};
  }
  const double fd = f;
  if (fd == x) return {fd, fd};
  const auto widen = [](float v) {  // a neighbour past ±FLT_MAX is the virtual ±2^128
    return std::isinf(v) ? std::copysign(kOverflow, static_cast<double>(v)) : static_cast<double>(v);
  };
  if (fd < x) return {fd, widen(std::nextafter(f, std::numeric_limits<float>::infinity()))};
  return {widen(std::nextafter(f, -std::numeric_limits<float>::infinity())), fd};
}

/// Below 2^23·q the grid is the multiples of q (docs/numerics.md, "Rounding-log mode"); above, every
/// float32 is one (their spacing there is at least q, both powers of two).
bool below_quantum(double x, double quantum) {
  return quantum > 0 && std::fabs(x) < 0x1p23 * quantum;
}

/// x's neighbours on the rounding grid: the float32 values that are multiples of `quantum` (every
/// float32 when it is 0). Below 2^23·quantum they are multiples m·quantum with |m| ≤ 2^23, all float32
/// values since quantum ≥ 2^-149; x / quantum, the floor and the products are exact in double.
Neighbours neighbours(double x, double quantum) {
  if (!below_quantum(x, quantum)) return float32_neighbours(x);
  const double lo = std::floor(x / quantum) * quantum;
  // −q + q is +0: zero on this grid is +0 only (see nearest).
  return lo == x ? Neighbours{x, x} : Neighbours{lo, lo + quantum};
}

/// x rounded to nearest on the grid, ties to the even multiple (float32 rounding above the quantum).
/// Zero on a quantum's grid is +0, whatever x's sign: values within q/2 of zero are sums that cancel,
/// and two kernels' values may lie on either side of it (IEEE-754 rounding would give them ±0).
float nearest(double x, double quantum) {
  if (!below_quantum(x, quantum)) return static_cast<float>(x);
  return static_cast<float>(std::nearbyint(x / quantum) * quantum + 0.0);
}

void check_quantum(double quantum) {
  // A power of two in range: a positive normal double with no mantissa bits (2^-149 is normal in double).
  const auto bits = std::bit_cast<uint64_t>(quantum);
  const uint64_t exponent = bits >> 52;  // the sign bit set makes it out of range
  if (!(quantum == 0 ||
        ((bits & ((uint64_t{1} << 52) - 1)) == 0 && exponent >= 1023 - 149 && exponent <= 1023 + 104)))
    throw OpError("rounding log: quantum " + std::to_string(quantum) +
                  " is not 0 or a power of two in [2^-149, 2^104]");
}

/// `quanta` is empty or one (possibly empty) vector per output, each empty or one quantum per value.
void check_quanta(std::span<const std::vector<double>> values, std::span<const std::vector<double>> quanta) {
  if (quanta.empty()) return;
  if (quanta.size() != values.size())
    throw OpError("rounding log: quanta for " + std::to_string(quanta.size()) + " outputs, values for " +
                  std::to_string(values.size()));
  for (size_t i = 0; i < quanta.size(); ++i) {
    if (!quanta[i].empty() && quanta[i].size() != values[i].size())
      throw OpError("rounding log: " + std::to_string(quanta[i].size()) + " quanta for output " +
                    std::to_string(i) + "'s " + std::to_string(values[i].size()) + " values");
    for (double q : quanta[i]) check_quantum(q);
  }
}

void check_tau(double tau) {
  if (!(tau >= 0 && tau <= kMaxRoundingTau))
    throw OpError("rounding log: tau " + std::to_string(tau) + " is outside [0, " +
                  std::to_string(kMaxRoundingTau) + "] (a fraction of the float32 spacing)");
}

// The per-value rules, unchecked: the public functions check tau and the quantum first, the per-node
// loops once per node (check_tau, check_quanta) instead of once per value.

double distance_unchecked(double x, double quantum) {
  if (!std::isfinite(x) || std::fabs(x) >= kOverflow) return 0.5;
  const Neighbours n = neighbours(x, quantum);
  if (n.lo == n.hi) return 0.5;
  // lo + hi and the halving are exact in double (both are float32 values, or 2^128).
  const double spacing = n.hi - n.lo, midpoint = (n.lo + n.hi) / 2;
  return std::fabs(x - midpoint) / spacing;
}

LoggedRounding logged_unchecked(double x, double tau, double quantum) {
  const float value = nearest(x, quantum);
  if (distance_unchecked(x, quantum) >= tau) return {value, Rounding::Nearest};
  return {value, static_cast<double>(value) == neighbours(x, quantum).lo ? Rounding::Down : Rounding::Up};
}

float replayed_unchecked(double x, Rounding decision, double quantum) {
  if (!std::isfinite(x) || std::fabs(x) >= kOverflow) return static_cast<float>(x);
  if (decision == Rounding::Nearest) return nearest(x, quantum);
  const Neighbours n = neighbours(x, quantum);
  // The virtual 2^128 is float32's +inf, as round-to-nearest would give above the overflow midpoint.
  return static_cast<float>(decision == Rounding::Down ? n.lo : n.hi);
}

bool allowed_unchecked(double x, Rounding decision, double tau, double quantum) {
  const double distance = distance_unchecked(x, quantum);
  switch (decision) {
    case Rounding::Nearest:
      return distance >= tau / 2;
    case Rounding::Down:
    case Rounding::Up:
      return distance < 1.5 * tau;
  }
  return false;
}

}  // namespace

double boundary_distance(double x, double quantum) {
  check_quantum(quantum);
  return distance_unchecked(x, quantum);
}

LoggedRounding round_logged(double x, double tau, double quantum) {
  check_tau(tau);
  check_quantum(quantum);
  return logged_unchecked(x, tau, quantum);
}

float round_replayed(double x, Rounding decision, double quantum) {
  check_quantum(quantum);
  return replayed_unchecked(x, decision, quantum);
}

bool rounding_allowed(double x, Rounding decision, double tau, double quantum) {
  check_tau(tau);
  check_quantum(quantum);
  return allowed_unchecked(x, decision, tau, quantum);
}

std::vector<uint8_t> pack_trits(std::span<const Rounding> decisions) {
  std::vector<uint8_t> out((decisions.size() + 4) / 5, 0);
  for (size_t j = 0; j < out.size(); ++j) {
    unsigned byte = 0;
    for (size_t k = 5; k-- > 0;) {  // the first trit is the least significant digit
      const size_t i = 5 * j + k;
      byte = byte * 3 + (i < decisions.size() ? static_cast<unsigned>(decisions[i]) : 0u);
    }
    out[j] = static_cast<uint8_t>(byte);
  }
  return out;
}

std::vector<Rounding> unpack_trits(std::span<const uint8_t> packed, size_t count) {
  if (packed.size() != (count + 4) / 5)
    throw OpError("rounding log: " + std::to_string(packed.size()) + " bytes for " + std::to_string(count) +
                  " decisions (5 per byte: " + std::to_string((count + 4) / 5) + " bytes)");
  std::vector<Rounding> out;
  out.reserve(count);
  for (size_t j = 0; j < packed.size(); ++j) {
    unsigned byte = packed[j];
    if (byte > 242)
      throw OpError("rounding log: byte " + std::to_string(j) + " is " + std::to_string(byte) +
                    " (at most 242)");
    for (size_t k = 0; k < 5; ++k, byte /= 3) {
      const size_t i = 5 * j + k;
      if (i < count) {
        out.push_back(static_cast<Rounding>(byte % 3));
      } else if (byte % 3 != 0) {
        throw OpError("rounding log: byte " + std::to_string(j) + " has a decision past the " +
                      std::to_string(count) + " logged");
      }
    }
  }
  return out;
}

uint64_t count_logged(const RoundingLog& log) {
  // Non-zero base-3 digits per byte value, computed once.
  static const std::array<uint8_t, 256> nonzero = [] {
    std::array<uint8_t, 256> t{};
    for (unsigned b = 0; b < 256; ++b)
      for (unsigned v = b; v > 0; v /= 3) t[b] = static_cast<uint8_t>(t[b] + (v % 3 != 0));
    return t;
  }();
  uint64_t n = 0;
  for (uint8_t b : log.packed) n += nonzero[b];
  return n;
}

namespace {

// The per-node loops below take a fast path for the common values: the same arithmetic as
// neighbours / nearest / distance_unchecked, without libm calls (floor, nearbyint and nextafterf are
// replaced by exact integer and magic-number forms), and fall back to the per-value rules above for
// the rare rest (zeros, subnormal neighbours at the edges, FLT_MAX, infinities, NaN). Same bits.

/// 1 / p for a power of two p in [2^-1022, 2^1023] (a quantum or a float32 spacing), exactly: the
/// exponent negated. Multiplying by it gives the same bits as dividing by p.
inline double reciprocal_pow2(double p) {
  return std::bit_cast<double>((uint64_t{2046} << 52) - std::bit_cast<uint64_t>(p));
}

/// x's neighbours lo ≤ x ≤ hi on the grid and its nearest grid value, as neighbours() and nearest()
/// give them. False (nothing written) where the fast path does not apply.
inline bool grid_fast(double x, double quantum, double& lo, double& hi, float& near) {
  if (below_quantum(x, quantum)) {  // |x| < 2^23·q: m = x / q is exact and |m| < 2^23
    const double m = x * reciprocal_pow2(quantum);
    const double t = static_cast<double>(static_cast<int64_t>(m));  // truncation, exact here
    const double fl = t > m ? t - 1 : t;                            // floor(m)
    // nearbyint(m), ties to even: adding and removing 2^52 rounds |m| < 2^52 in the current mode.
    const double r = std::copysign((std::fabs(m) + 0x1p52) - 0x1p52, m);
    near = static_cast<float>(r * quantum + 0.0);
    lo = fl * quantum;
    hi = lo == x ? x : lo + quantum;
    return true;
  }
  const float f = static_cast<float>(x);
  const auto bits = std::bit_cast<uint32_t>(f);
  const uint32_t mag = bits & 0x7fffffffu;
  if (mag == 0 || mag >= 0x7f7fffffu) return false;  // ±0, ±FLT_MAX, ±inf, NaN
  near = f;
  const double fd = f;
  if (fd == x) {
    lo = hi = fd;
    return true;
  }
  // nextafterf(f, ±inf) toward x: one more magnitude step away from zero when x lies beyond f.
  const bool up = fd < x;
  const double other = std::bit_cast<float>(up == (bits >> 31 == 0) ? bits + 1 : bits - 1);
  lo = up ? fd : other;
  hi = up ? other : fd;
  return true;
}

/// distance_unchecked from grid_fast's neighbours (lo == hi: on the grid).
inline double distance_fast(double x, double lo, double hi) {
  if (lo == hi) return 0.5;
  // The spacing of two neighbours on the grid is a power of two (a quantum, or one float32 step).
  const double spacing = hi - lo, midpoint = (lo + hi) / 2;
  return std::fabs(x - midpoint) * reciprocal_pow2(spacing);
}

/// Packs trits five per byte as pack_trits, one at a time.
class TritPacker {
 public:
  explicit TritPacker(uint8_t* out) : out_(out) {}
  void put(Rounding r) {
    byte_ += static_cast<unsigned>(r) * kPow3[k_];
    if (++k_ == 5) flush();
  }
  void flush() {
    if (k_ == 0) return;
    *out_++ = static_cast<uint8_t>(byte_);
    byte_ = 0;
    k_ = 0;
  }

 private:
  static constexpr unsigned kPow3[5] = {1, 3, 9, 27, 81};
  uint8_t* out_;
  unsigned byte_ = 0;
  int k_ = 0;
};

/// The five trits of every byte value ≤ 242 (unpack_trits' digits).
const std::array<std::array<Rounding, 5>, 243>& trit_table() {
  static const auto table = [] {
    std::array<std::array<Rounding, 5>, 243> t{};
    for (unsigned b = 0; b < 243; ++b)
      for (unsigned k = 0, v = b; k < 5; ++k, v /= 3) t[b][k] = static_cast<Rounding>(v % 3);
    return t;
  }();
  return table;
}

}  // namespace

RoundingLog round_outputs_logged(std::span<const std::vector<double>> values, std::span<Tensor* const> out,
                                 double tau, std::span<const std::vector<double>> quanta) {
  check_tau(tau);
  check_quanta(values, quanta);
  size_t count = 0;
  for (const std::vector<double>& v : values) count += v.size();
  RoundingLog log{count, std::vector<uint8_t>((count + 4) / 5, 0)};
  TritPacker pack(log.packed.data());
  for (size_t i = 0; i < values.size(); ++i) {
    const std::span<float> y = out[i]->values();
    const double* x = values[i].data();
    const size_t n = values[i].size();
    const double* q = i < quanta.size() && !quanta[i].empty() ? quanta[i].data() : nullptr;
    if (tau == 0 && q == nullptr) {  // nothing is ever near enough to log
      for (size_t e = 0; e < n; ++e) {
        y[e] = static_cast<float>(x[e]);
        pack.put(Rounding::Nearest);
      }
      continue;
    }
    for (size_t e = 0; e < n; ++e) {
      const double qe = q ? q[e] : 0.0;
      double lo = 0, hi = 0;
      float near = 0;
      if (!grid_fast(x[e], qe, lo, hi, near)) {
        const LoggedRounding r = logged_unchecked(x[e], tau, qe);
        y[e] = r.value;
        pack.put(r.decision);
        continue;
      }
      y[e] = near;
      if (distance_fast(x[e], lo, hi) >= tau) {
        pack.put(Rounding::Nearest);
      } else {
        pack.put(static_cast<double>(near) == lo ? Rounding::Down : Rounding::Up);
      }
    }
  }
  pack.flush();
  return log;
}

std::optional<uint64_t> round_outputs_replayed(std::span<const std::vector<double>> values,
                                               const RoundingLog& log, std::span<Tensor* const> out,
                                               double tau, std::span<const std::vector<double>> quanta) {
  check_tau(tau);
  check_quanta(values, quanta);
  size_t count = 0;
  for (const std::vector<double>& v : values) count += v.size();
  if (log.count != count)
    throw OpError("rounding log: " + std::to_string(log.count) + " decisions for " + std::to_string(count) +
                  " output values");
  // unpack_trits' checks (the size, bytes ≤ 242, no digit past the count), without its vector: it
  // throws with its own message where one fails.
  bool valid = log.packed.size() == (count + 4) / 5;
  for (size_t j = 0; valid && j < log.packed.size(); ++j) valid = log.packed[j] <= 242;
  constexpr unsigned kPow3[5] = {1, 3, 9, 27, 81};  // the last byte's bound with count % 5 digits
  if (valid && count % 5 != 0 && log.packed.back() >= kPow3[count % 5]) valid = false;
  if (!valid) (void)unpack_trits(log.packed, count);
  const auto& trits = trit_table();
  uint64_t k = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::span<float> y = out[i]->values();
    const double* x = values[i].data();
    const size_t n = values[i].size();
    const double* q = i < quanta.size() && !quanta[i].empty() ? quanta[i].data() : nullptr;
    for (size_t e = 0; e < n; ++e, ++k) {
      const Rounding d = trits[log.packed[k / 5]][k % 5];
      const double qe = q ? q[e] : 0.0;
      double lo = 0, hi = 0;
      float near = 0;
      if (!grid_fast(x[e], qe, lo, hi, near)) {
        if (!allowed_unchecked(x[e], d, tau, qe)) return k;
        y[e] = replayed_unchecked(x[e], d, qe);
        continue;
      }
      const double distance = distance_fast(x[e], lo, hi);
      if (d == Rounding::Nearest) {
        if (!(distance >= tau / 2)) return k;
        y[e] = near;
      } else {
        if (!(distance < 1.5 * tau)) return k;
        y[e] = static_cast<float>(d == Rounding::Down ? lo : hi);
      }
    }
  }
  return std::nullopt;
}

}  // namespace tribunal
