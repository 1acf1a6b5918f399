// Rounding logs: the second road to exactness (Srivastava, Arora, Boneh, "Optimistic Verifiable
// Training by Controlling Hardware Nondeterminism", NeurIPS 2024, arXiv 2403.09603, §4).
//
// An op computed in float64 by any kernel (a vendor BLAS, another thread count) is rounded to float32.
// Two honest kernels' float64 results differ by a little; they round to the same float32 unless they
// straddle a rounding boundary — the midpoint between two adjacent float32 values. So the trainer logs
// the direction it rounded every value that lies within τ of a midpoint, and anyone replaying with
// another kernel rounds those values the logged way: the float32 results are then identical, as long
// as the two kernels' float64 values differ by at most τ/2 (the contract between τ and the kernels).
//
// Distances are measured in units of the float32 spacing at the value (the gap between its two float32
// neighbours), so τ is a fraction of one float32 ulp: 0 ≤ τ ≤ 1/4. A value may also have a rounding
// quantum q (a power of two; ops/float64/float64.h rounding_quanta): it is then rounded to
// the float32 values that are multiples of q — every float32 above 2^23·q, coarser below, zero as +0 — so
// that a sum that cancels to near zero keeps a step larger than the kernels' absolute error instead of a
// float32 spacing that shrinks with the value (docs/numerics.md, "Rounding-log mode"). q = 0: the
// float32 grid. τ = 0 is for ops whose float64
// result is the same on every IEEE-754 machine (copies, one correctly rounded operation per value):
// nothing is logged and a replay must round to nearest, ties to even. A decision is a trit — Nearest
// (nothing logged), Down, Up — and the log packs five trits per byte (3^5 = 243 ≤ 256), as the paper's
// code does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ops/tensor.h"

namespace tribunal {

class ThreadPool;

/// How one float64 value was rounded to float32.
enum class Rounding : uint8_t {
  Nearest = 0,  ///< not near a boundary: round to nearest (ties to even), nothing to log
  Down = 1,     ///< near a boundary: the float32 neighbour below the midpoint
  Up = 2,       ///< near a boundary: the float32 neighbour above the midpoint
};

/// The largest τ: beyond a quarter of the spacing, the bands around two midpoints would leave too
/// little room for the τ/2 discrepancy the check allows on each side.
inline constexpr double kMaxRoundingTau = 0.25;

/// Distance of x from the nearest rounding boundary (the midpoint between x's two neighbours on the grid
/// of `quantum`: float32 values, multiples of quantum when it is not 0), in units of their spacing: in
/// [0, 0.5]; 0.5 for a value that is on the grid (it sits between two midpoints). NaN and ±inf: 0.5
/// (never near a boundary). Beyond FLT_MAX the upper neighbour is taken as 2^128, the value above which
/// float32 rounding overflows. `quantum` must be 0 or a power of two in [2^-149, 2^104] (OpError).
double boundary_distance(double x, double quantum = 0);

/// One value rounded by the trainer: the float32 result and the decision to log.
struct LoggedRounding {
  float value = 0;
  Rounding decision = Rounding::Nearest;
};

/// Rounds x to nearest on the grid of `quantum` (ties to even) and, if x lies within `tau` of a boundary
/// (boundary_distance(x, quantum) < tau), logs the side it rounded to (Down or Up). Requires
/// 0 ≤ tau ≤ kMaxRoundingTau and a valid quantum (OpError otherwise).
LoggedRounding round_logged(double x, double tau, double quantum = 0);

/// Rounds a replayer's x by a logged decision: Nearest → nearest on the grid; Down / Up → the grid
/// neighbour of x below / above the midpoint x is near. An x on the grid is that value.
float round_replayed(double x, Rounding decision, double quantum = 0);

/// Whether the referee, holding its own float64 value x of the op, accepts a logged decision: a Down
/// or Up only where x is within 3τ/2 of a boundary (the trainer's value was within τ, and may differ
/// by τ/2), and Nearest only where x is at least τ/2 away (closer, the trainer's value was within τ
/// and a decision was owed). Either direction is accepted in the band: which side of the midpoint the
/// trainer's value fell on cannot be checked — the scheme's freedom of at most one float32 ulp on
/// near-boundary values (the paper's §4.2).
bool rounding_allowed(double x, Rounding decision, double tau, double quantum = 0);

/// Packs decisions five per byte: byte j holds trits 5j … 5j+4 as base-3 digits, the first the least
/// significant; a last partial byte has zero digits above `decisions.size()`.
std::vector<uint8_t> pack_trits(std::span<const Rounding> decisions);

/// Unpacks `count` decisions. Throws OpError if the size is not ⌈count / 5⌉ bytes, a byte is above 242
/// or a digit past `count` is not zero (so each log has exactly one encoding).
std::vector<Rounding> unpack_trits(std::span<const uint8_t> packed, size_t count);

/// One node's rounding log: a decision for every value of its outputs, in output order then element
/// order, packed (pack_trits). What the node record commits to in rounding-log mode.
struct RoundingLog {
  uint64_t count = 0;           ///< decisions (the node's output elements)
  std::vector<uint8_t> packed;  ///< ⌈count / 5⌉ bytes
  bool operator==(const RoundingLog&) const = default;
};

/// How many of the log's decisions are Down or Up (not Nearest): the values that were near a boundary.
uint64_t count_logged(const RoundingLog& log);

/// Value e of output i's quantum in a node's `quanta` (round_outputs_logged): 0 where there is none.
inline double quantum_at(std::span<const std::vector<double>> quanta, size_t i, size_t e) {
  return i < quanta.size() && !quanta[i].empty() ? quanta[i][e] : 0.0;
}

/// A gemm op's rounding quanta (ops/float64/float64.h rounding_quanta) in factored form, so that the
/// trainer's rounding makes each value's quantum where it rounds it instead of reading it from memory
/// (docs/performance.md, "Rounding-log mode"). Output 0's value e, in row r = e / columns and column
/// c = e % columns, has p = rows[r] · cols[(r / rows_per_group) · columns + c] (both powers of two or 0,
/// so the product is exact); where `bias` is not empty and bias[c] > 0, a p > 0 becomes 2·max(p, bias[c]);
/// a result below 2^-149 is 0. Empty `rows`: no quanta (the float32 grid).
struct QuantaFactors {
  std::vector<double> rows;  ///< one factor per row
  std::vector<double> cols;  ///< `columns` factors per group of rows_per_group rows
  std::vector<double> bias;  ///< empty, or one per column
  size_t columns = 1, rows_per_group = 1;

  bool empty() const { return rows.empty(); }
  /// The values' count: rows · columns.
  size_t size() const { return rows.size() * columns; }
  /// q[0, end − begin) := the quanta of values [begin, end); requires begin ≤ end ≤ size().
  void fill(size_t begin, size_t end, double* q) const;
  /// The largest quantum (0 for none): its check (a power of two in [2^-149, 2^104]) covers every value.
  double max() const;
};

/// The trainer's rounding of one node: out[i] (already shaped like values[i]) := values[i] rounded
/// to nearest on its grid by round_logged, and the log of its decisions. `quanta` is empty (the float32
/// grid) or holds each value's quantum, shaped like `values` (the node's rounding_quanta; an empty
/// quanta[i] for output i: none). Requires 0 ≤ tau ≤ kMaxRoundingTau and valid quanta (OpError).
/// `pool` (null: the caller's thread) splits the values and the packing; each value is rounded and each
/// byte packed on its own, so the results do not depend on it.
RoundingLog round_outputs_logged(std::span<const std::vector<double>> values, std::span<Tensor* const> out,
                                 double tau, std::span<const std::vector<double>> quanta,
                                 ThreadPool* pool = nullptr);

/// round_outputs_logged with output 0's quanta in factored form (none for the other outputs): the same
/// rounding and log as with `quanta` filled out (QuantaFactors::fill), made a cache-sized run at a
/// time. Throws OpError if the factors' count is not output 0's or their largest quantum is invalid.
RoundingLog round_outputs_logged(std::span<const std::vector<double>> values, std::span<Tensor* const> out,
                                 double tau, const QuantaFactors& quanta, ThreadPool* pool = nullptr);

/// A replayer's rounding of one node by another trainer's `log`: out[i] := round_replayed of each
/// value by its logged decision. Returns the index (in log order) of the first decision that
/// rounding_allowed refuses for this replayer's value — the log is then not this node's (a cheat, or
/// kernels that differ by more than τ/2) and `out` is left partly written — or nullopt. Throws
/// OpError if the log's count is not the outputs' element count or its bytes do not unpack.
std::optional<uint64_t> round_outputs_replayed(std::span<const std::vector<double>> values,
                                               const RoundingLog& log, std::span<Tensor* const> out,
                                               double tau, std::span<const std::vector<double>> quanta);

}  // namespace tribunal
