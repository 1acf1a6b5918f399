// Rounding decisions and their packed log. See rounding_log.h.
#include "ops/rounding_log.h"

#include <array>
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

Neighbours neighbours(double x) {
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

void check_tau(double tau) {
  if (!(tau >= 0 && tau <= kMaxRoundingTau))
    throw OpError("rounding log: tau " + std::to_string(tau) + " is outside [0, " + std::to_string(kMaxRoundingTau) +
                  "] (a fraction of the float32 spacing)");
}

}  // namespace

double boundary_distance(double x) {
  if (!std::isfinite(x) || std::fabs(x) >= kOverflow) return 0.5;
  const Neighbours n = neighbours(x);
  if (n.lo == n.hi) return 0.5;
  // lo + hi and the halving are exact in double (both are float32 values, or 2^128).
  const double spacing = n.hi - n.lo, midpoint = (n.lo + n.hi) / 2;
  return std::fabs(x - midpoint) / spacing;
}

LoggedRounding round_logged(double x, double tau) {
  check_tau(tau);
  const float value = static_cast<float>(x);
  if (boundary_distance(x) >= tau) return {value, Rounding::Nearest};
  return {value, static_cast<double>(value) == neighbours(x).lo ? Rounding::Down : Rounding::Up};
}

float round_replayed(double x, Rounding decision) {
  if (decision == Rounding::Nearest || !std::isfinite(x) || std::fabs(x) >= kOverflow) return static_cast<float>(x);
  const Neighbours n = neighbours(x);
  // The virtual 2^128 is float32's +inf, as round-to-nearest would give above the overflow midpoint.
  return static_cast<float>(decision == Rounding::Down ? n.lo : n.hi);
}

bool rounding_allowed(double x, Rounding decision, double tau) {
  check_tau(tau);
  const double distance = boundary_distance(x);
  switch (decision) {
    case Rounding::Nearest: return distance >= tau / 2;
    case Rounding::Down:
    case Rounding::Up: return distance < 1.5 * tau;
  }
  return false;
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
    if (byte > 242) throw OpError("rounding log: byte " + std::to_string(j) + " is " + std::to_string(byte) + " (at most 242)");
    for (size_t k = 0; k < 5; ++k, byte /= 3) {
      const size_t i = 5 * j + k;
      if (i < count) {
        out.push_back(static_cast<Rounding>(byte % 3));
      } else if (byte % 3 != 0) {
        throw OpError("rounding log: byte " + std::to_string(j) + " has a decision past the " + std::to_string(count) +
                      " logged");
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

RoundingLog round_outputs_logged(std::span<const std::vector<double>> values, std::span<Tensor* const> out, double tau) {
  check_tau(tau);
  size_t count = 0;
  for (const std::vector<double>& v : values) count += v.size();
  std::vector<Rounding> decisions;
  decisions.reserve(count);
  for (size_t i = 0; i < values.size(); ++i) {
    const std::span<float> y = out[i]->values();
    if (tau == 0) {  // nothing is ever near enough to log
      for (size_t e = 0; e < values[i].size(); ++e) y[e] = static_cast<float>(values[i][e]);
      decisions.resize(decisions.size() + values[i].size(), Rounding::Nearest);
      continue;
    }
    for (size_t e = 0; e < values[i].size(); ++e) {
      const LoggedRounding r = round_logged(values[i][e], tau);
      y[e] = r.value;
      decisions.push_back(r.decision);
    }
  }
  return RoundingLog{count, pack_trits(decisions)};
}

std::optional<uint64_t> round_outputs_replayed(std::span<const std::vector<double>> values, const RoundingLog& log,
                                               std::span<Tensor* const> out, double tau) {
  check_tau(tau);
  size_t count = 0;
  for (const std::vector<double>& v : values) count += v.size();
  if (log.count != count)
    throw OpError("rounding log: " + std::to_string(log.count) + " decisions for " + std::to_string(count) +
                  " output values");
  const std::vector<Rounding> decisions = unpack_trits(log.packed, count);
  size_t k = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const std::span<float> y = out[i]->values();
    for (size_t e = 0; e < values[i].size(); ++e, ++k) {
      if (!rounding_allowed(values[i][e], decisions[k], tau)) return k;
      y[e] = round_replayed(values[i][e], decisions[k]);
    }
  }
  return std::nullopt;
}

}  // namespace tribunal
