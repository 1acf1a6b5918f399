// Every op of the registry, three ways (DESIGN §4 "the proof of the contract is tests"):
//  1. mathematics: the reference kernel against a float64 implementation written here from the
//     op's definition (PyTorch semantics for the optimizers), within a tolerance derived per op;
//  2. reproducibility: run_fast on 1, 2 and 3 threads is bitwise equal (memcmp) to run_reference on
//     random shapes with 1, primes and odd sizes, including shapes big enough to split over threads;
//  3. validation: infer_shapes (and, for labels, the kernels) throw OpError on bad input.
// Each loop runs over OpKind up to Count and fails for a kind it has no case for, so adding an op
// without tests here breaks this file.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/math.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

using namespace tribunal;

namespace {

// Relative tolerance of the float64 comparisons. Each tolerance below is kRel times a magnitude that
// bounds the op's rounding error (e.g. Σ|terms| for a dot product, not |result|, because a float dot
// product of cancelling terms is only accurate relative to the terms).
constexpr double kRel = 1e-5;

ThreadPool& pool(int threads) {
  static ThreadPool p1(1), p2(2), p3(3);
  return threads == 1 ? p1 : threads == 2 ? p2 : p3;
}

OpKind kind_at(size_t i) { return static_cast<OpKind>(i); }

// ---- Random inputs ------------------------------------------------------------------------------

/// Uniform in [lo, hi); with `specials`, about one value in 32 is a random subnormal (either sign), so
/// that a path flushing subnormals to zero would show up in the bitwise comparisons.
std::vector<float> random_values(int64_t n, std::mt19937& rng, float lo, float hi, bool specials) {
  std::uniform_real_distribution<float> uniform(lo, hi);
  std::uniform_int_distribution<uint32_t> mantissa(1, (1u << 23) - 1);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    if (specials && rng() % 32 == 0)
      x = float_from_bits(mantissa(rng) | ((rng() & 1u) << 31));
    else
      x = uniform(rng);
  }
  return v;
}

Tensor random_tensor(Shape s, std::mt19937& rng, bool specials, float lo = -1.0f, float hi = 1.0f) {
  return Tensor(s, random_values(s.numel(), rng, lo, hi, specials));
}

/// Class ids stored as floats, as the data set stores them.
Tensor random_labels(int64_t batch, int64_t classes, std::mt19937& rng) {
  Tensor t(Shape{batch});
  for (int64_t b = 0; b < batch; ++b) t[b] = static_cast<float>(rng() % static_cast<uint32_t>(classes));
  return t;
}

Tensor scalar(float v) {
  Tensor t(Shape{});
  t[0] = v;
  return t;
}

/// 1, primes and odd sizes, plus the SIMD-friendly 32 and its neighbours.
int64_t small_dim(std::mt19937& rng) {
  static constexpr int64_t kDims[] = {1, 2, 3, 5, 7, 11, 13, 17, 31, 32, 33, 61};
  return kDims[rng() % std::size(kDims)];
}

Shape random_shape(std::mt19937& rng, int min_rank, int max_rank) {
  const int rank = min_rank + static_cast<int>(rng() % static_cast<uint32_t>(max_rank - min_rank + 1));
  std::vector<int64_t> d;
  for (int i = 0; i < rank; ++i) d.push_back(small_dim(rng));
  return Shape(std::span<const int64_t>(d));
}

// ---- One op invocation --------------------------------------------------------------------------

struct Case {
  OpKind kind = OpKind::Count;
  Attrs attrs;
  std::vector<Tensor> in;

  std::string str() const {
    std::ostringstream s;
    s << op_name(kind) << "(";
    for (size_t i = 0; i < in.size(); ++i) s << (i ? ", " : "") << in[i].shape().str();
    s << ")";
    if (!attrs.floats.empty() || (!attrs.ints.empty() && attrs.ints.size() <= 4)) {
      s << " ints {";
      for (int64_t v : attrs.ints) s << v << " ";
      s << "} floats {";
      for (float v : attrs.floats) s << v << " ";
      s << "}";
    }
    return s.str();
  }
};

/// How many attribute variants a kind's cases cycle through (transposes, weight decay on/off).
int variants(OpKind kind) {
  switch (kind) {
    case OpKind::Matmul: return 4;
    case OpKind::SgdMomentum: return 2;
    case OpKind::AdamW: return 2;
    default: return 1;
  }
}

/// A random, valid invocation of `kind`. `big` picks shapes large enough that every fast kernel
/// splits its work over 3 threads (each op's grain is in its kernel file). nullopt: no case written
/// for this kind — the callers turn that into a failure.
std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c;
  c.kind = kind;
  switch (kind) {
    case OpKind::Gather: {
      const int64_t rows = big ? 97 : small_dim(rng);
      std::vector<int64_t> d{rows};
      const Shape rest = random_shape(rng, 0, 2);
      for (int64_t x : rest.dims()) d.push_back(x);
      c.in.push_back(random_tensor(Shape(std::span<const int64_t>(d)), rng, specials));
      const int64_t batch = big ? 211 : small_dim(rng);
      for (int64_t b = 0; b < batch; ++b) c.attrs.ints.push_back(static_cast<int64_t>(rng() % rows));
      return c;
    }
    case OpKind::Linear: {
      const int64_t m = big ? 67 : small_dim(rng), k = big ? 131 : small_dim(rng),
                    n = big ? 97 : small_dim(rng);
      c.in.push_back(random_tensor(Shape{m, k}, rng, specials));
      c.in.push_back(random_tensor(Shape{k, n}, rng, specials));
      c.in.push_back(random_tensor(Shape{n}, rng, specials));
      return c;
    }
    case OpKind::Matmul: {
      const int64_t ta = variant & 1, tb = (variant >> 1) & 1;
      const int64_t m = big ? 131 : small_dim(rng), k = big ? 67 : small_dim(rng),
                    n = big ? 197 : small_dim(rng);
      c.attrs.ints = {ta, tb};
      c.in.push_back(random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng, specials));
      c.in.push_back(random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng, specials));
      return c;
    }
    case OpKind::SumRows: {
      const int64_t m = big ? 61 : small_dim(rng), n = big ? 389 : small_dim(rng);
      c.in.push_back(random_tensor(Shape{m, n}, rng, specials));
      return c;
    }
    case OpKind::Add:
    case OpKind::Relu:
    case OpKind::ReluBackward: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 0, 3);
      c.in.push_back(random_tensor(s, rng, specials));
      if (kind != OpKind::Relu) c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward: {
      const int64_t batch = big ? 53 : small_dim(rng), classes = big ? 37 : small_dim(rng);
      c.in.push_back(random_tensor(Shape{batch, classes}, rng, specials, -4.0f, 4.0f));
      c.in.push_back(random_labels(batch, classes, rng));
      if (kind == OpKind::SoftmaxCrossEntropyBackward) c.in.push_back(scalar(0.75f));
      return c;
    }
    case OpKind::SgdMomentum: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 1, 3);
      c.attrs.floats = {0.05f, 0.9f, variant ? 0.01f : 0.0f};
      for (int i = 0; i < 3; ++i) c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    case OpKind::AdamW: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 1, 3);
      c.attrs.ints = {1 + static_cast<int64_t>(rng() % 10)};
      c.attrs.floats = {1e-2f, 0.9f, 0.999f, 1e-8f, variant ? 0.1f : 0.0f};
      for (int i = 0; i < 3; ++i) c.in.push_back(random_tensor(s, rng, specials));
      c.in.push_back(random_tensor(s, rng, specials, 0.0f, 0.01f));  // v ≥ 0: a running mean of g²
      return c;
    }
    case OpKind::Count: break;
  }
  return std::nullopt;
}

/// Outputs shaped by infer_shapes and filled with a NaN sentinel, so an element a kernel never
/// writes is visible (as a NaN in a float64 comparison, as a byte difference in memcmp).
std::vector<Tensor> make_outputs(const Case& c, uint32_t fill_bits) {
  std::vector<Shape> shapes;
  for (const Tensor& t : c.in) shapes.push_back(t.shape());
  std::vector<Tensor> out;
  for (const Shape& s : infer_shapes(c.kind, c.attrs, shapes)) {
    Tensor t(s);
    for (float& v : t.values()) v = float_from_bits(fill_bits);
    out.push_back(std::move(t));
  }
  return out;
}

constexpr uint32_t kRefFill = 0x7FBADBADu, kFastFill = 0x7FC0FFEEu;

/// Runs the reference kernel (pool == nullptr) or the fast one.
std::vector<Tensor> run_case(const Case& c, ThreadPool* p) {
  std::vector<Tensor> out = make_outputs(c, p ? kFastFill : kRefFill);
  std::vector<const Tensor*> in;
  std::vector<Tensor*> outs;
  for (const Tensor& t : c.in) in.push_back(&t);
  for (Tensor& t : out) outs.push_back(&t);
  if (p)
    run_fast(c.kind, c.attrs, in, outs, *p);
  else
    run_reference(c.kind, c.attrs, in, outs);
  return out;
}

// ---- Float64 implementations --------------------------------------------------------------------

/// The float64 value of each output element and the largest error the float kernel may have there.
struct Expected {
  std::vector<double> want;
  std::vector<double> tol;  ///< 0 for ops that are exact in float (copies, selections)
};

double f64(float x) { return static_cast<double>(x); }

std::vector<double> to_f64(const Tensor& t) { return {t.values().begin(), t.values().end()}; }

/// Row-major rows×cols matrix transposed (explicitly, so the product below never sees a flag).
std::vector<double> transposed(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[static_cast<size_t>(j * rows + i)] = a[static_cast<size_t>(i * cols + j)];
  return t;
}

/// C = A·B (+ bias) for row-major A[m,k], B[k,n], with tolerance kRel·(|bias| + Σ|a·b|).
Expected gemm64(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>* bias,
                int64_t m, int64_t k, int64_t n) {
  Expected e;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? (*bias)[static_cast<size_t>(j)] : 0.0, mag = std::fabs(s);
      for (int64_t p = 0; p < k; ++p) {
        const double t = a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(p * n + j)];
        s += t;
        mag += std::fabs(t);
      }
      e.want.push_back(s);
      e.tol.push_back(kRel * mag);
    }
  return e;
}

/// PyTorch AdamW (torch.optim.AdamW, bias-corrected, decoupled decay) in float64, element-wise
/// state plus the error budget of the float kernel that tracks it.
struct AdamW64 {
  std::vector<double> p, m, v;
  std::vector<double> mag_m;  ///< Σ of |terms| of m (m cancels; its float error is relative to this)
  std::vector<double> tol_p;  ///< accumulated allowed error of p

  void step(const std::vector<float>& g, double lr, double b1, double b2, double eps, double wd, int64_t t) {
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t)),
                 bc2 = 1.0 - std::pow(b2, static_cast<double>(t));
    // The contract computes 1 − β^t in float (powi, then one subtraction): β^t carries about t+1
    // rounding errors of ulp(1) = 2^-23·½ each, and the subtraction makes them relative to 1 − β^t,
    // which for β2 = 0.999 is ~10^-3·t. That is a documented difference from PyTorch (which forms the
    // bias corrections in double), so the budget states it explicitly instead of hiding it in kRel.
    const double bc_rel = (static_cast<double>(t) + 2.0) * 0x1p-24 * (1.0 / bc1 + 0.5 / bc2);
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i];
      const double p1 = p[i] * (1.0 - lr * wd);
      m[i] = b1 * m[i] + (1.0 - b1) * gi;
      mag_m[i] = b1 * mag_m[i] + (1.0 - b1) * std::fabs(gi);
      v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
      const double update = lr / bc1 * m[i] / denom;
      const double update_mag = lr / bc1 * mag_m[i] / denom;
      p[i] = p1 - update;
      tol_p[i] = tol_p[i] * (1.0 - lr * wd) + kRel * std::fabs(p1) + update_mag * (kRel + bc_rel);
    }
  }
};

/// The float64 result of `c`'s op, one Expected per output; nullopt if this file has no model of it.
std::optional<std::vector<Expected>> expected_f64(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  switch (c.kind) {
    case OpKind::Gather: {
      const int64_t rows = in[0].shape()[0], row = rows ? in[0].numel() / rows : 0;
      Expected e;
      for (int64_t idx : c.attrs.ints)
        for (int64_t j = 0; j < row; ++j) {
          e.want.push_back(f64(in[0][idx * row + j]));
          e.tol.push_back(0.0);
        }
      return std::vector<Expected>{e};
    }
    case OpKind::Linear: {
      const int64_t m = in[0].shape()[0], k = in[0].shape()[1], n = in[1].shape()[1];
      const std::vector<double> bias = to_f64(in[2]);
      return std::vector<Expected>{gemm64(to_f64(in[0]), to_f64(in[1]), &bias, m, k, n)};
    }
    case OpKind::Matmul: {
      const bool ta = c.attrs.ints[0], tb = c.attrs.ints[1];
      const Shape &sa = in[0].shape(), &sb = in[1].shape();
      std::vector<double> a = to_f64(in[0]), b = to_f64(in[1]);
      if (ta) a = transposed(a, sa[0], sa[1]);
      if (tb) b = transposed(b, sb[0], sb[1]);
      const int64_t m = ta ? sa[1] : sa[0], k = ta ? sa[0] : sa[1], n = tb ? sb[0] : sb[1];
      return std::vector<Expected>{gemm64(a, b, nullptr, m, k, n)};
    }
    case OpKind::SumRows: {
      const int64_t m = in[0].shape()[0], n = in[0].shape()[1];
      Expected e;
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0, mag = 0.0;
        for (int64_t i = 0; i < m; ++i) {
          s += in[0][i * n + j];
          mag += std::fabs(in[0][i * n + j]);
        }
        e.want.push_back(s);
        e.tol.push_back(kRel * mag);
      }
      return std::vector<Expected>{e};
    }
    case OpKind::Add: {
      Expected e;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        e.want.push_back(f64(in[0][i]) + f64(in[1][i]));
        e.tol.push_back(kRel * (std::fabs(in[0][i]) + std::fabs(in[1][i])));
      }
      return std::vector<Expected>{e};
    }
    case OpKind::Relu: {
      Expected e;
      for (float x : in[0].values()) {
        e.want.push_back(x > 0.0f ? f64(x) : 0.0);
        e.tol.push_back(0.0);
      }
      return std::vector<Expected>{e};
    }
    case OpKind::ReluBackward: {
      Expected e;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        e.want.push_back(in[0][i] > 0.0f ? f64(in[1][i]) : 0.0);
        e.tol.push_back(0.0);
      }
      return std::vector<Expected>{e};
    }
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward: {
      const int64_t batch = in[0].shape()[0], classes = in[0].shape()[1];
      const double dloss = c.kind == OpKind::SoftmaxCrossEntropyBackward ? f64(in[2][0]) : 1.0;
      Expected loss, dz;
      double total = 0.0, total_mag = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        const float* z = in[0].data() + b * classes;
        const auto y = static_cast<int64_t>(in[1][b]);
        double mx = z[0];
        for (int64_t j = 1; j < classes; ++j) mx = std::max(mx, f64(z[j]));
        double s = 0.0;
        for (int64_t j = 0; j < classes; ++j) s += std::exp(f64(z[j]) - mx);
        const double lse = mx + std::log(s);
        total += lse - z[y];
        // nll = log s − (z[y] − max) may cancel, so its error is relative to both terms; the + 1 is
        // there because a relative error of s (exp32 and the canonical sum) is an absolute one of log s.
        total_mag += std::log(s) + std::fabs(z[y] - mx) + 1.0;
        for (int64_t j = 0; j < classes; ++j) {
          const double prob = std::exp(f64(z[j]) - lse), hot = j == y ? 1.0 : 0.0;
          // z[j] − max is rounded to float before exp32: an absolute error up to 2^-24·|z[j] − max|
          // of the exponent, i.e. that relative error of the probability (matters for logits ±100).
          // Probabilities below float's range (e^-150 for logits ±100) come out as 0 or a subnormal:
          // an absolute error of a few 2^-150, the subnormal spacing.
          const double arg_rel = 0x1p-24 * std::fabs(f64(z[j]) - mx);
          dz.want.push_back((prob - hot) * dloss / static_cast<double>(batch));
          dz.tol.push_back((kRel * (prob + hot) + arg_rel * prob) * std::fabs(dloss) /
                               static_cast<double>(batch) +
                           0x1p-148);
        }
      }
      loss.want.push_back(total / static_cast<double>(batch));
      loss.tol.push_back(kRel * total_mag / static_cast<double>(batch));
      return std::vector<Expected>{c.kind == OpKind::SoftmaxCrossEntropy ? loss : dz};
    }
    case OpKind::SgdMomentum: {
      // torch.optim.SGD(momentum=μ, dampening=0, nesterov=False, weight_decay=wd).
      const double lr = c.attrs.floats[0], mu = c.attrs.floats[1], wd = c.attrs.floats[2];
      Expected p2, v2;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        const double p = in[0][i], g = in[1][i], v = in[2][i];
        const double gw = g + wd * p, vn = mu * v + gw;
        const double v_mag = std::fabs(mu * v) + std::fabs(g) + std::fabs(wd * p);
        v2.want.push_back(vn);
        v2.tol.push_back(kRel * v_mag);
        p2.want.push_back(p - lr * vn);
        p2.tol.push_back(kRel * (std::fabs(p) + lr * v_mag));
      }
      return std::vector<Expected>{p2, v2};
    }
    case OpKind::AdamW: {
      const auto& f = c.attrs.floats;
      AdamW64 s{
          to_f64(in[0]), to_f64(in[2]), to_f64(in[3]), {}, std::vector<double>(in[0].values().size(), 0.0)};
      for (float m : in[2].values()) s.mag_m.push_back(std::fabs(m));
      s.step({in[1].values().begin(), in[1].values().end()}, f[0], f[1], f[2], f[3], f[4], c.attrs.ints[0]);
      Expected p2{s.p, s.tol_p}, m2{s.m, {}}, v2{s.v, {}};
      for (double mm : s.mag_m) m2.tol.push_back(kRel * mm);
      for (double vv : s.v) v2.tol.push_back(kRel * vv);
      return std::vector<Expected>{p2, m2, v2};
    }
    case OpKind::Count: break;
  }
  return std::nullopt;
}

/// Number of elements where |got − want| > tol (a NaN counts); the first one is described in `first`.
int64_t mismatches(const Tensor& got, const Expected& e, std::string& first) {
  if (static_cast<size_t>(got.numel()) != e.want.size()) {
    first =
        "output has " + std::to_string(got.numel()) + " elements, expected " + std::to_string(e.want.size());
    return 1;
  }
  int64_t bad = 0;
  for (size_t i = 0; i < e.want.size(); ++i) {
    const double g = got[static_cast<int64_t>(i)];
    if (std::fabs(g - e.want[i]) <= e.tol[i]) continue;
    if (bad++ == 0) {
      std::ostringstream s;
      s.precision(9);
      s << "element " << i << ": got " << g << ", want " << e.want[i] << " ± " << e.tol[i];
      first = s.str();
    }
  }
  return bad;
}

void check_against_f64(const Case& c) {
  const std::optional<std::vector<Expected>> want = expected_f64(c);
  INFO(c.str());
  REQUIRE_MESSAGE(want.has_value(), "no float64 model for op " << op_name(c.kind));
  const std::vector<Tensor> got = run_case(c, nullptr);
  REQUIRE(got.size() == want->size());
  for (size_t o = 0; o < got.size(); ++o) {
    std::string first;
    const int64_t bad = mismatches(got[o], (*want)[o], first);
    INFO("output " << o << ": " << first);
    CHECK(bad == 0);
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * 4) == 0;
}

}  // namespace

TEST_CASE("every op's reference kernel matches a float64 implementation of its definition") {
  std::mt19937 rng(42);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    CAPTURE(op_name(kind));
    for (int variant = 0; variant < variants(kind); ++variant) {
      for (int trial = 0; trial < 12; ++trial) {
        const std::optional<Case> c = make_case(kind, rng, /*big=*/trial == 0, variant, /*specials=*/false);
        REQUIRE_MESSAGE(c.has_value(), "no test case for op " << op_name(kind));
        check_against_f64(*c);
      }
    }
  }
}

TEST_CASE("every op's fast kernel on 1, 2 and 3 threads is bitwise equal to its reference") {
  std::mt19937 rng(7);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    CAPTURE(op_name(kind));
    for (int variant = 0; variant < variants(kind); ++variant) {
      for (int trial = 0; trial < 16; ++trial) {
        // Trials 0 and 1 are big enough to split over threads; odd trials carry subnormals.
        const std::optional<Case> c = make_case(kind, rng, trial < 2, variant, trial % 2 == 1);
        REQUIRE_MESSAGE(c.has_value(), "no test case for op " << op_name(kind));
        INFO(c->str());
        const std::vector<Tensor> ref = run_case(*c, nullptr);
        for (int threads : {1, 2, 3}) {
          const std::vector<Tensor> fast = run_case(*c, &pool(threads));
          REQUIRE(fast.size() == ref.size());
          for (size_t o = 0; o < ref.size(); ++o) {
            INFO(threads << " threads, output " << o);
            CHECK(bitwise_equal(fast[o], ref[o]));
          }
        }
      }
    }
  }
}

TEST_CASE("matmul: all four transpose combinations against float64") {
  // The generic loop already cycles the variants; this pins each combination on a fixed, non-square
  // shape where a swapped index would read out of place (m, k, n pairwise distinct).
  std::mt19937 rng(5);
  for (int variant = 0; variant < 4; ++variant) {
    const int64_t ta = variant & 1, tb = variant >> 1, m = 3, k = 5, n = 7;
    Case c{OpKind::Matmul, {{ta, tb}, {}}, {}};
    c.in.push_back(random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng, false));
    c.in.push_back(random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng, false));
    check_against_f64(c);
  }
}

TEST_CASE("relu and relu_backward on special values: NaN and −0 map to +0") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float dn = std::numeric_limits<float>::denorm_min();
  const std::vector<float> x{-0.0f, nan, -nan, inf, -inf, dn, -dn, 0.0f, 2.5f};
  const std::vector<uint32_t> want{0u, 0u, 0u, float_bits(inf), 0u, float_bits(dn), 0u, 0u, float_bits(2.5f)};
  Case relu{OpKind::Relu, {}, {Tensor(Shape{9}, x)}};
  const std::vector<Tensor> y = run_case(relu, nullptr);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("relu(" << x[i] << ")");
    CHECK(float_bits(y[0][static_cast<int64_t>(i)]) == want[i]);
  }
  Case back{OpKind::ReluBackward, {}, {Tensor(Shape{9}, x), Tensor(Shape{9}, std::vector<float>(9, -3.0f))}};
  const std::vector<Tensor> dx = run_case(back, nullptr);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("relu_backward at x = " << x[i]);
    CHECK(float_bits(dx[0][static_cast<int64_t>(i)]) == (x[i] > 0.0f ? float_bits(-3.0f) : 0u));
  }
}

TEST_CASE("softmax_cross_entropy is stable for large logits and exact for one class") {
  std::mt19937 rng(3);
  // Logits of ±100 overflow a naive exp in float; the max subtraction must keep the loss finite.
  Case c{OpKind::SoftmaxCrossEntropy,
         {},
         {random_tensor(Shape{9, 13}, rng, false, -100.0f, 100.0f), random_labels(9, 13, rng)}};
  check_against_f64(c);
  c.kind = OpKind::SoftmaxCrossEntropyBackward;
  c.in.push_back(scalar(1.0f));
  check_against_f64(c);

  // One class: softmax is 1, the loss log(1) − 0 = 0 exactly and the gradient (1 − 1)·s = 0.
  Case one{
      OpKind::SoftmaxCrossEntropy, {}, {random_tensor(Shape{5, 1}, rng, false), random_labels(5, 1, rng)}};
  CHECK(float_bits(run_case(one, nullptr)[0][0]) == 0u);
}

TEST_CASE("adamw matches a float64 PyTorch AdamW over steps t = 1..5") {
  std::mt19937 rng(2024);
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  for (float wd : {0.0f, 0.1f}) {
    CAPTURE(wd);
    const Shape s{37};
    Tensor p = random_tensor(s, rng, false), m(s), v(s);  // PyTorch starts m = v = 0
    AdamW64 ref{to_f64(p), to_f64(m), to_f64(v), std::vector<double>(37, 0.0), std::vector<double>(37, 0.0)};
    for (int64_t t = 1; t <= 5; ++t) {
      CAPTURE(t);
      const Tensor g = random_tensor(s, rng, false);
      Case c{OpKind::AdamW, {{t}, {lr, b1, b2, eps, wd}}, {p, g, m, v}};
      std::vector<Tensor> out = run_case(c, nullptr);
      ref.step({g.values().begin(), g.values().end()}, lr, b1, b2, eps, wd, t);
      Expected ep{ref.p, ref.tol_p}, em{ref.m, {}}, ev{ref.v, {}};
      for (double x : ref.mag_m) em.tol.push_back(kRel * x);
      for (double x : ref.v) ev.tol.push_back(kRel * x);
      std::string first_p, first_m, first_v;
      INFO("p: " << first_p);
      CHECK(mismatches(out[0], ep, first_p) == 0);
      INFO("m: " << first_m);
      CHECK(mismatches(out[1], em, first_m) == 0);
      INFO("v: " << first_v);
      CHECK(mismatches(out[2], ev, first_v) == 0);
      // The optimizer actually moved the parameters (a kernel that copied p would pass nothing else).
      CHECK_FALSE(bitwise_equal(out[0], p));
      p = std::move(out[0]);
      m = std::move(out[1]);
      v = std::move(out[2]);
    }
  }
}

TEST_CASE("sgd_momentum matches float64 torch.optim.SGD over several steps") {
  std::mt19937 rng(77);
  const float lr = 0.05f, mu = 0.9f, wd = 0.01f;
  const Shape s{23};
  Tensor p = random_tensor(s, rng, false), v(s);
  std::vector<double> pd = to_f64(p), vd(23, 0.0);
  for (int step = 0; step < 5; ++step) {
    const Tensor g = random_tensor(s, rng, false);
    Case c{OpKind::SgdMomentum, {{}, {lr, mu, wd}}, {p, g, v}};
    std::vector<Tensor> out = run_case(c, nullptr);
    for (size_t i = 0; i < 23; ++i) {
      vd[i] = f64(mu) * vd[i] + f64(g[static_cast<int64_t>(i)]) + f64(wd) * pd[i];
      pd[i] -= f64(lr) * vd[i];
    }
    // The errors of earlier steps add up (v carries them with factor μ < 1); 1e-5 absolute covers five
    // steps of O(1) values with a wide margin (a float ulp of 1 is 1.2e-7).
    double err_p = 0.0, err_v = 0.0;
    for (size_t i = 0; i < 23; ++i) {
      err_p = std::max(err_p, std::fabs(out[0][static_cast<int64_t>(i)] - pd[i]));
      err_v = std::max(err_v, std::fabs(out[1][static_cast<int64_t>(i)] - vd[i]));
    }
    CAPTURE(step);
    CHECK(err_p <= 1e-5);
    CHECK(err_v <= 1e-5);
    p = std::move(out[0]);
    v = std::move(out[1]);
  }
}

TEST_CASE("infer_shapes returns the documented output shapes") {
  auto shapes = [](OpKind k, const Attrs& a, std::vector<Shape> in) { return infer_shapes(k, a, in); };
  CHECK(shapes(OpKind::Gather, {{2, 0, 2}, {}}, {Shape{3, 4, 5}}) == std::vector<Shape>{Shape{3, 4, 5}});
  CHECK(shapes(OpKind::Gather, {{1}, {}}, {Shape{3}}) == std::vector<Shape>{Shape{1}});
  CHECK(shapes(OpKind::Linear, {}, {Shape{2, 3}, Shape{3, 4}, Shape{4}}) == std::vector<Shape>{Shape{2, 4}});
  CHECK(shapes(OpKind::Matmul, {{1, 1}, {}}, {Shape{3, 2}, Shape{4, 3}}) == std::vector<Shape>{Shape{2, 4}});
  CHECK(shapes(OpKind::SumRows, {}, {Shape{5, 6}}) == std::vector<Shape>{Shape{6}});
  CHECK(shapes(OpKind::SoftmaxCrossEntropy, {}, {Shape{4, 3}, Shape{4}}) == std::vector<Shape>{Shape{}});
  CHECK(shapes(OpKind::SoftmaxCrossEntropyBackward, {}, {Shape{4, 3}, Shape{4}, Shape{}}) ==
        std::vector<Shape>{Shape{4, 3}});
  CHECK(shapes(OpKind::AdamW, {{1}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}},
               {Shape{7}, Shape{7}, Shape{7}, Shape{7}}) == std::vector<Shape>(3, Shape{7}));
  CHECK(shapes(OpKind::SgdMomentum, {{}, {0.1f, 0.9f, 0.0f}}, {Shape{2, 2}, Shape{2, 2}, Shape{2, 2}}) ==
        std::vector<Shape>(2, Shape{2, 2}));
}

TEST_CASE("infer_shapes throws OpError for bad shapes and attribute counts, for every op") {
  struct Bad {
    OpKind kind;
    Attrs attrs;
    std::vector<Shape> in;
    const char* why;
  };
  const std::vector<Bad> bad{
      {OpKind::Gather, {{5}, {}}, {Shape{5, 2}}, "index = rows"},
      {OpKind::Gather, {{-1}, {}}, {Shape{5, 2}}, "negative index"},
      {OpKind::Gather, {{0}, {}}, {Shape{}}, "rank-0 table"},
      {OpKind::Gather, {{0}, {1.0f}}, {Shape{5}}, "a float attribute"},
      {OpKind::Gather, {{0}, {}}, {Shape{5}, Shape{5}}, "two inputs"},
      {OpKind::Linear, {}, {Shape{3, 4}, Shape{5, 2}, Shape{2}}, "x and w disagree on K"},
      {OpKind::Linear, {}, {Shape{3, 4}, Shape{4, 2}, Shape{3}}, "bias of the wrong length"},
      {OpKind::Linear, {}, {Shape{4}, Shape{4, 2}, Shape{2}}, "rank-1 x"},
      {OpKind::Linear, {{1}, {}}, {Shape{3, 4}, Shape{4, 2}, Shape{2}}, "an int attribute"},
      {OpKind::Matmul, {{0}, {}}, {Shape{2, 3}, Shape{3, 4}}, "one transpose flag"},
      {OpKind::Matmul, {{0, 2}, {}}, {Shape{2, 3}, Shape{3, 4}}, "flag 2"},
      {OpKind::Matmul, {{0, 0}, {}}, {Shape{2, 3}, Shape{4, 3}}, "K mismatch"},
      {OpKind::Matmul, {{1, 0}, {}}, {Shape{2, 3}, Shape{3, 4}}, "K mismatch with aᵀ"},
      {OpKind::Matmul, {{0, 1}, {}}, {Shape{2, 3}, Shape{3, 4}}, "K mismatch with bᵀ"},
      {OpKind::Matmul, {{0, 0}, {}}, {Shape{2, 3, 1}, Shape{3, 4}}, "rank-3 a"},
      {OpKind::SumRows, {}, {Shape{5}}, "rank-1 input"},
      {OpKind::Add, {}, {Shape{2, 3}, Shape{3, 2}}, "shapes differ"},
      {OpKind::Add, {}, {Shape{2, 3}}, "one input"},
      {OpKind::Relu, {}, {Shape{2}, Shape{2}}, "two inputs"},
      {OpKind::ReluBackward, {}, {Shape{2}, Shape{3}}, "shapes differ"},
      {OpKind::SoftmaxCrossEntropy, {}, {Shape{4, 3}, Shape{5}}, "labels longer than the batch"},
      {OpKind::SoftmaxCrossEntropy, {}, {Shape{12}, Shape{12}}, "rank-1 logits"},
      {OpKind::SoftmaxCrossEntropy, {}, {Shape{0, 3}, Shape{0}}, "empty batch"},
      {OpKind::SoftmaxCrossEntropy, {}, {Shape{4, 3}, Shape{4, 1}}, "rank-2 labels"},
      {OpKind::SoftmaxCrossEntropyBackward, {}, {Shape{4, 3}, Shape{4}, Shape{1}}, "non-scalar dloss"},
      {OpKind::SoftmaxCrossEntropyBackward, {}, {Shape{4, 3}, Shape{4}}, "no dloss"},
      {OpKind::SgdMomentum, {{}, {0.1f, 0.9f}}, {Shape{2}, Shape{2}, Shape{2}}, "two floats"},
      {OpKind::SgdMomentum, {{}, {0.1f, 0.9f, 0.0f}}, {Shape{2}, Shape{3}, Shape{2}}, "gradient shape"},
      {OpKind::AdamW,
       {{0}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}},
       {Shape{2}, Shape{2}, Shape{2}, Shape{2}},
       "t = 0"},
      {OpKind::AdamW,
       {{}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}},
       {Shape{2}, Shape{2}, Shape{2}, Shape{2}},
       "no t"},
      {OpKind::AdamW,
       {{1}, {0.1f, 0.9f, 0.99f, 1e-8f}},
       {Shape{2}, Shape{2}, Shape{2}, Shape{2}},
       "4 floats"},
      {OpKind::AdamW,
       {{1}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}},
       {Shape{2}, Shape{2}, Shape{2}, Shape{1}},
       "v shape"},
  };
  std::array<bool, kOpKindCount> covered{};
  for (const Bad& b : bad) {
    INFO(op_name(b.kind) << ": " << b.why);
    CHECK_THROWS_AS(infer_shapes(b.kind, b.attrs, b.in), OpError);
    covered[static_cast<size_t>(b.kind)] = true;
  }
  for (size_t k = 0; k < kOpKindCount; ++k) {
    INFO("no bad-input case for op " << op_name(kind_at(k)));
    CHECK(covered[k]);
  }
}

TEST_CASE("softmax_cross_entropy kernels throw OpError for labels that are not class ids") {
  std::mt19937 rng(9);
  // A batch of 64 splits over 3 threads in the fast kernels, so the throwing row is on a worker thread
  // for some positions: the pool must carry the exception back.
  for (float label : {10.0f, -1.0f, 2.5f, std::numeric_limits<float>::quiet_NaN(), 1e9f}) {
    for (int64_t row : {0, 63}) {
      CAPTURE(label);
      CAPTURE(row);
      Tensor labels = random_labels(64, 10, rng);
      labels[row] = label;
      Case c{OpKind::SoftmaxCrossEntropy, {}, {random_tensor(Shape{64, 10}, rng, false), labels}};
      CHECK_THROWS_AS(run_case(c, nullptr), OpError);
      CHECK_THROWS_AS(run_case(c, &pool(3)), OpError);
      c.kind = OpKind::SoftmaxCrossEntropyBackward;
      c.in.push_back(scalar(1.0f));
      CHECK_THROWS_AS(run_case(c, nullptr), OpError);
      CHECK_THROWS_AS(run_case(c, &pool(3)), OpError);
    }
  }
  // The largest valid label is accepted.
  Tensor labels = random_labels(4, 10, rng);
  labels[2] = 9.0f;
  Case ok{OpKind::SoftmaxCrossEntropy, {}, {random_tensor(Shape{4, 10}, rng, false), labels}};
  CHECK_NOTHROW(run_case(ok, nullptr));
}

TEST_CASE("run_reference and run_fast check arity") {
  Tensor a(Shape{3}), y(Shape{3});
  const Tensor* in[] = {&a};
  Tensor* out[] = {&y};
  CHECK_THROWS_AS(run_reference(OpKind::Add, {}, in, out), OpError);
  CHECK_THROWS_AS(run_fast(OpKind::Add, {}, in, out, pool(2)), OpError);
  Tensor* two_out[] = {&y, &y};
  CHECK_THROWS_AS(run_reference(OpKind::Relu, {}, in, two_out), OpError);
}

TEST_CASE("the registry names every op uniquely and its arities are consistent") {
  for (size_t i = 0; i < kOpKindCount; ++i) {
    const OpInfo& info = op_info(kind_at(i));
    CAPTURE(info.name);
    CHECK(std::string(info.name).size() > 0);
    CHECK(info.num_inputs >= 1);
    CHECK(info.num_outputs >= 1);
    // Compared outside the macros: doctest cannot print function pointers.
    const bool has_kernels = info.reference != nullptr && info.fast != nullptr && info.infer != nullptr;
    CHECK(has_kernels);
    for (size_t j = 0; j < i; ++j) CHECK(std::string(info.name) != op_name(kind_at(j)));
  }
}
