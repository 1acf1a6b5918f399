// rounding_quanta: the rounding step a gemm op's float64 results may need. See float64.h.
#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "ops/conv_elements.h"
#include "ops/float64/internal.h"
#include "ops/simd.h"

namespace tribunal {
namespace {

/// The magnitude of a set of float32 values as a power of two: max|x| < 2^e. Exact: a maximum of
/// magnitudes depends on no order, and the exponent is an integer.
struct Magnitude {
  int e = 0;
  bool zero = true;    ///< every value is ±0: its products contribute exactly nothing
  bool finite = true;  ///< no NaN or infinity: there is a bound

  void add(float v) {
    if (!std::isfinite(v)) {
      finite = false;
    } else if (v != 0) {
      const int ev = std::ilogb(v) + 1;
      e = zero ? ev : std::max(e, ev);
      zero = false;
    }
  }
};

/// ⌈log2 k⌉ for k ≥ 1.
int ceil_log2(int64_t k) {
  return k <= 1 ? 0 : std::bit_width(static_cast<uint64_t>(k - 1));
}

/// The quantum of a sum of k products with |a| < 2^a.e and |b| < 2^b.e, added to a start value (bias)
/// bounded by `start` (a zero Magnitude: none). Every partial sum stays below 2^(a.e + b.e + ⌈log2 k⌉)
/// + 2^start.e < 2^(max(…) + 1), and the quantum is that bound over 2^bits. 0 (the
/// float32 grid) where the sum is exact (a zero operand: the result is the start value), a bound does
/// not exist (NaN or infinity), or the quantum would be finer than 2^-149.
double quantum(int bits, const Magnitude& a, const Magnitude& b, int log2k, const Magnitude& start = {}) {
  if (!a.finite || !b.finite || !start.finite || a.zero || b.zero) return 0;
  int e = a.e + b.e + log2k;
  if (!start.zero) e = std::max(e, start.e) + 1;
  e -= bits;
  // 2^e as a double's bits (ldexp(1, e)): e ≤ 2·128 + 64 + 1 − kMinRoundingQuantumBits < 1024.
  return e < -149 ? 0.0 : std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52);
}

/// The Magnitude of values whose largest magnitude has the float32 bits `max_abs` (sign cleared): the
/// same as adding them one by one, since ilogb grows with |v| and a NaN's or infinity's bits exceed
/// every finite value's.
Magnitude magnitude_of(uint32_t max_abs) {
  Magnitude m;
  if (max_abs >= 0x7f800000u) {
    m.finite = false;
  } else if (max_abs != 0) {
    m.zero = false;
    m.e = std::ilogb(std::bit_cast<float>(max_abs)) + 1;
  }
  return m;
}

/// |v|'s bits as a signed integer: never negative (the sign bit is cleared), so a signed maximum, which
/// SIMD units have, orders them as the unsigned bits.
inline int32_t abs_bits(float v) {
  return static_cast<int32_t>(std::bit_cast<uint32_t>(v) & 0x7fffffffu);
}

/// The largest abs_bits of each row of a row-major [rows, cols] block at x (contiguous runs) into m, or
/// of each column (a running maximum down the rows). Integer maxima: the same on every SIMD path.
__attribute__((always_inline)) inline void row_maxima(const float* x, int64_t rows, int64_t cols,
                                                      int32_t* m) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t v = 0;
    for (int64_t c = 0; c < cols; ++c) v = std::max(v, abs_bits(x[r * cols + c]));
    m[r] = v;
  }
}
__attribute__((always_inline)) inline void column_maxima(const float* x, int64_t rows, int64_t cols,
                                                         int32_t* m) {
  std::fill_n(m, cols, 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m[c] = std::max(m[c], abs_bits(x[r * cols + c]));
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) void row_maxima_avx2(const float* x, int64_t rows, int64_t cols, int32_t* m) {
  row_maxima(x, rows, cols, m);
}
__attribute__((target("avx2"))) void column_maxima_avx2(const float* x, int64_t rows, int64_t cols,
                                                        int32_t* m) {
  column_maxima(x, rows, cols, m);
}
#endif

/// Magnitudes of the rows (by_rows) or the columns of a row-major [rows, cols] block at x.
void block_magnitudes(const float* x, int64_t rows, int64_t cols, bool by_rows, Magnitude* out) {
  thread_local std::vector<int32_t> m;
  const int64_t n = by_rows ? rows : cols;
  m.resize(static_cast<size_t>(n));
#if defined(__x86_64__)
  if (active_simd_path() != SimdPath::Scalar) {
    (by_rows ? row_maxima_avx2 : column_maxima_avx2)(x, rows, cols, m.data());
  } else
#endif
  {
    (by_rows ? row_maxima : column_maxima)(x, rows, cols, m.data());
  }
  for (int64_t i = 0; i < n; ++i) out[i] = magnitude_of(static_cast<uint32_t>(m[static_cast<size_t>(i)]));
}

/// Magnitudes of the rows of a row-major [rows, cols] block at x.
void row_magnitudes(const float* x, int64_t rows, int64_t cols, Magnitude* out) {
  block_magnitudes(x, rows, cols, true, out);
}

/// Magnitudes of the columns of a row-major [rows, cols] block at x.
void column_magnitudes(const float* x, int64_t rows, int64_t cols, Magnitude* out) {
  block_magnitudes(x, rows, cols, false, out);
}

/// Magnitudes of `groups` groups of values, value v of x (flat) in group group(v).
template <class Group>
std::vector<Magnitude> magnitudes(const Tensor& x, size_t groups, Group group) {
  std::vector<Magnitude> m(groups);
  const std::span<const float> v = x.values();
  for (size_t i = 0; i < v.size(); ++i) m[group(i)].add(v[i]);
  return m;
}

/// 2^(m.e + offset), or 0 where m has no bound or is zero (its quanta are 0): a factor of
/// QuantaFactors, so that a product of two is quantum()'s 2^(a.e + b.e + …) exactly.
double factor(const Magnitude& m, int offset) {
  return m.finite && !m.zero ? std::ldexp(1.0, m.e + offset) : 0.0;
}

/// `q` with one quantum per row of `columns` values (the convolutions: one per image and filter or
/// channel).
void per_row(QuantaFactors& q, std::vector<double> rows, int64_t columns) {
  q.rows_per_group = std::max<size_t>(rows.size(), 1);
  q.rows = std::move(rows);
  q.columns = static_cast<size_t>(columns);
  q.cols.assign(q.columns, 1.0);
  q.bias.clear();
}

}  // namespace

namespace f64 {

/// Output quanta of op(a)·op(b) per batch element: rows of op(a), columns of op(b).
void matmul_quanta(const Attrs& attrs, std::span<const Tensor* const> in, QuantaFactors& q, int bits) {
  const bool ta = attrs.ints[0] != 0, tb = attrs.ints[1] != 0;
  const Shape &as = in[0]->shape(), &bs = in[1]->shape();
  const int r = as.rank() - 2;
  const int64_t batch = r == 0 ? 1 : as[0];
  const int64_t m = ta ? as[r + 1] : as[r], k = ta ? as[r] : as[r + 1], n = tb ? bs[r] : bs[r + 1];
  // Rows of op(a) are the stored rows of a [batch, m, k] (no transpose) or the columns of a [batch, k, m];
  // columns of op(b) the stored columns of [batch, k, n] or the rows of [batch, n, k].
  std::vector<Magnitude> ma(static_cast<size_t>(batch * m)), mb(static_cast<size_t>(batch * n));
  const float* a = in[0]->values().data();
  const float* b = in[1]->values().data();
  for (int64_t e = 0; e < batch; ++e) {
    if (ta)
      column_magnitudes(a + e * k * m, k, m, &ma[e * m]);
    else
      row_magnitudes(a + e * m * k, m, k, &ma[e * m]);
    if (tb)
      row_magnitudes(b + e * n * k, n, k, &mb[e * n]);
    else
      column_magnitudes(b + e * k * n, k, n, &mb[e * n]);
  }
  // quantum() per element as 2^(a.e + ⌈log2 k⌉ − bits) · 2^(b.e): a row or column without a bound
  // (zero, NaN or infinity) has the factor 0, and so its quanta.
  const int lk = ceil_log2(k);
  q.rows.resize(ma.size());
  q.cols.resize(mb.size());
  for (size_t i = 0; i < ma.size(); ++i) q.rows[i] = factor(ma[i], lk - bits);
  for (size_t j = 0; j < mb.size(); ++j) q.cols[j] = factor(mb[j], 0);
  q.bias.clear();
  q.columns = static_cast<size_t>(n);
  q.rows_per_group = static_cast<size_t>(std::max<int64_t>(m, 1));
}

// y[M,N] = x[M,K]·w[K,N] + b[N]: rows of x, columns of w (rows of w[N,K] with trans_b), b per column.
void linear_quanta(const Attrs& attrs, std::span<const Tensor* const> in, QuantaFactors& q, int bits) {
  const bool tb = !attrs.ints.empty() && attrs.ints[0] != 0;
  const Shape &xs = in[0]->shape(), &ws = in[1]->shape();
  const int64_t m = xs[0], k = xs[1], n = ws[tb ? 0 : 1];
  std::vector<Magnitude> mx(static_cast<size_t>(m)), mw(static_cast<size_t>(n));
  row_magnitudes(in[0]->values().data(), m, k, mx.data());
  if (tb)
    row_magnitudes(in[1]->values().data(), n, k, mw.data());
  else
    column_magnitudes(in[1]->values().data(), k, n, mw.data());
  const auto mbias = magnitudes(*in[2], static_cast<size_t>(n), [](size_t i) { return i; });
  // quantum(bits, mx[i], mw[j], ⌈log2 k⌉, mbias[j]): the product of the row's and the column's factors,
  // 2·max(that, 2^(bias.e − bits)) with a nonzero bias; a bias without a bound zeroes its column.
  const int lk = ceil_log2(k);
  q.rows.resize(mx.size());
  q.cols.resize(mw.size());
  q.bias.resize(mw.size());
  for (size_t i = 0; i < mx.size(); ++i) q.rows[i] = factor(mx[i], lk - bits);
  for (size_t j = 0; j < mw.size(); ++j) {
    q.cols[j] = mbias[j].finite ? factor(mw[j], 0) : 0.0;
    q.bias[j] = factor(mbias[j], -bits);
  }
  q.columns = static_cast<size_t>(n);
  q.rows_per_group = static_cast<size_t>(std::max<int64_t>(m, 1));
}

// y[n,o,·] = b[o] + Σ over (C/G)·KH·KW taps of w[o,…]·x[n,…]: per image (its whole image bounds the
// group's channels), per filter.
void conv2d_quanta(const Attrs& attrs, std::span<const Tensor* const> in, QuantaFactors& q, int bits) {
  const Shape &xs = in[0]->shape(), &ws = in[1]->shape();
  const int64_t n = xs[0], o = ws[0], taps = ws[1] * ws[2] * ws[3];
  const std::vector<Shape> shapes{xs, ws, in[2]->shape()};
  const int64_t p = infer_shapes(OpKind::Conv2d, attrs, shapes)[0].numel() / (n * o);
  const auto mx = magnitudes(*in[0], static_cast<size_t>(n),
                             [&](size_t i) { return i / static_cast<size_t>(xs[1] * xs[2] * xs[3]); });
  const auto mw =
      magnitudes(*in[1], static_cast<size_t>(o), [&](size_t i) { return i / static_cast<size_t>(taps); });
  const auto mbias = magnitudes(*in[2], static_cast<size_t>(o), [](size_t i) { return i; });
  std::vector<double> rows(static_cast<size_t>(n * o));
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t oi = 0; oi < o; ++oi)
      rows[static_cast<size_t>(ni * o + oi)] = quantum(bits, mx[ni], mw[oi], ceil_log2(taps), mbias[oi]);
  per_row(q, std::move(rows), p);
}

namespace {
/// The group count of a conv2d gradient's ints (the general form's ninth, else 1).
int64_t conv_groups(const Attrs& attrs) {
  return attrs.ints.size() == kConvGeneralInts + 2 ? attrs.ints[8] : 1;
}
}  // namespace

// dx[n,c,·] = Σ over (O/G)·KH·KW of w[·,c mod C/G,…]·dy[n,…]: per image, per channel of w (its maximum
// over all filters bounds those of c's group).
void conv2d_backward_input_quanta(const Attrs& attrs, std::span<const Tensor* const> in, QuantaFactors& q,
                                  int bits) {
  const Shape &ws = in[0]->shape(), &dys = in[1]->shape();
  const size_t m = attrs.ints.size();
  const int64_t groups = conv_groups(attrs), cg = ws[1], c = cg * groups, n = dys[0],
                hw = attrs.ints[m - 2] * attrs.ints[m - 1], chain = ws[0] / groups * ws[2] * ws[3];
  const auto mw = magnitudes(*in[0], static_cast<size_t>(cg), [&](size_t i) {
    return i / static_cast<size_t>(ws[2] * ws[3]) % static_cast<size_t>(cg);
  });
  const auto mdy = magnitudes(*in[1], static_cast<size_t>(n),
                              [&](size_t i) { return i / static_cast<size_t>(ws[0] * dys[2] * dys[3]); });
  std::vector<double> rows(static_cast<size_t>(n * c));
  for (int64_t ni = 0; ni < n; ++ni)
    for (int64_t ci = 0; ci < c; ++ci)
      rows[static_cast<size_t>(ni * c + ci)] = quantum(bits, mw[ci % cg], mdy[ni], ceil_log2(chain));
  per_row(q, std::move(rows), hw);
}

// dw[o,c,·] = Σ over N·OH·OW of dy[·,o,…]·x[·,(o/Og)·Cg + c,…]: per filter, per channel.
void conv2d_backward_weight_quanta(const Attrs& attrs, std::span<const Tensor* const> in, QuantaFactors& q,
                                   int bits) {
  const Shape &xs = in[0]->shape(), &dys = in[1]->shape();
  const size_t m = attrs.ints.size();
  const int64_t groups = conv_groups(attrs), n = xs[0], c = xs[1], cg = c / groups, o = dys[1],
                og = o / groups, taps = attrs.ints[m - 2] * attrs.ints[m - 1];
  const auto mx = magnitudes(*in[0], static_cast<size_t>(c), [&](size_t i) {
    return i / static_cast<size_t>(xs[2] * xs[3]) % static_cast<size_t>(c);
  });
  const auto mdy = magnitudes(*in[1], static_cast<size_t>(o), [&](size_t i) {
    return i / static_cast<size_t>(dys[2] * dys[3]) % static_cast<size_t>(o);
  });
  std::vector<double> rows(static_cast<size_t>(o * cg));
  for (int64_t oi = 0; oi < o; ++oi)
    for (int64_t ci = 0; ci < cg; ++ci)
      rows[static_cast<size_t>(oi * cg + ci)] =
          quantum(bits, mdy[oi], mx[oi / og * cg + ci], ceil_log2(n * dys[2] * dys[3]));
  per_row(q, std::move(rows), taps);
}

}  // namespace f64

bool rounding_quanta_factors(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                             QuantaFactors& quanta, int bits) {
  quanta = QuantaFactors{};
  if (bits < kMinRoundingQuantumBits || bits > kMaxRoundingQuantumBits)
    throw OpError("rounding_quanta: quantum_bits " + std::to_string(bits) + " is outside [" +
                  std::to_string(kMinRoundingQuantumBits) + ", " + std::to_string(kMaxRoundingQuantumBits) +
                  "]");
  // Only the gemm ops have quanta (their descriptors' OpInfo::quanta); every other op is this
  // library's own fixed-order float64 code.
  if (static_cast<size_t>(kind) >= kOpKindCount) return false;
  const QuantaFn fill = op_info(kind).quanta;
  if (fill == nullptr) return false;
  fill(attrs, in, quanta, bits);
  return true;
}

bool rounding_quanta(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                     std::span<std::vector<double>> quanta, int bits) {
  for (std::vector<double>& q : quanta) q.clear();
  if (quanta.empty()) throw OpError("rounding_quanta: no output to fill");
  QuantaFactors factors;
  if (!rounding_quanta_factors(kind, attrs, in, factors, bits)) return false;
  quanta[0].resize(factors.size());
  factors.fill(0, factors.size(), quanta[0].data());
  return true;
}

}  // namespace tribunal
