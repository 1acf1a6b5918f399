// The float64 execution of every op (ops/float64/float64.h), for rounding-log mode. Over the random
// cases every op family registers (op_test_support.h: shapes with 1, primes and odd sizes, big cases,
// subnormal inputs), on every float64 gemm this build has:
//  1. against the RepOps reference: each float64 output rounded to nearest float32 is within kUlps
//     float32 ulps of run_reference's output, or, where the reference's own rounding is larger than
//     that (cancellation), within the registered bound of the reference's error (c·u·Σ|terms|; the
//     largest difference seen is 0.15 of it); the exact ops (copies, selections) give its bits;
//  2. float64 accuracy: each output is within 1e-6 of that bound (about 1e-11 of the terms' magnitude)
//     of the registered float64 model: a float32-precision step anywhere inside the op, or a float32
//     constant, would be ~10⁴ times further (the results are in fact within 1e-8 of the bound);
//  3. both checks fail for wrong functions (a dropped bias, a flipped transpose, shifted labels,
//     swapped γ and β) and check 2 fails for float32-rounded results;
//  4. the naive and OpenBLAS gemms differ bitwise on a K ≥ 256 product and agree to 1e-12 of Σ|terms|;
//     naive is exactly the sequential-over-k chain;
//  5. bad input (shapes, labels, ids, indices, output counts, every registered bad case) throws OpError.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/float64/exp.h"
#include "ops/float64/float64.h"
#include "ops/float64/internal.h"
#include "ops/math.h"
#include "ops/pointwise.h"
#include "ops/registry.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

/// Float32 ulps a rounded float64 result may be from the reference. The reference's transcendentals
/// are within 1 (exp32, log32) and 2 (tanh32) ulps, and a few roundings follow them.
constexpr int64_t kUlps = 4;
/// Fraction of the registered reference-error bound (kRel = 1e-5 of the terms' magnitude, or more) the
/// float64 result may be from the float64 model.
constexpr double kModelFraction = 1e-6;

std::vector<Float64Gemm> built_gemms() {
  std::vector<Float64Gemm> g{Float64Gemm::Naive};
  if (float64_gemm_built(Float64Gemm::OpenBlas)) g.push_back(Float64Gemm::OpenBlas);
  return g;
}

std::vector<std::vector<double>> run64(const Case& c, Float64Gemm gemm) {
  std::vector<const Tensor*> in;
  for (const Tensor& t : c.in) in.push_back(&t);
  std::vector<std::vector<double>> out(static_cast<size_t>(op_info(c.kind).num_outputs));
  run_float64(c.kind, c.attrs, in, out, gemm);
  return out;
}

/// Position of x on the float32 number line (±0 both 0), so that adjacent floats differ by 1.
int64_t ordered(float x) {
  const uint32_t u = float_bits(x);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7FFFFFFFu) : static_cast<int64_t>(u);
}

int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

/// Check 1: elements of `got` whose float32 rounding is more than kUlps from `ref` and that are also
/// further than the reference's error bound `tol` from it; where the op is exact (tol = 0), elements
/// whose rounding is not `ref` bit for bit. The first is described in `first`.
int64_t reference_disagreements(const std::vector<double>& got, const Tensor& ref, const Expected& e,
                                std::string& first) {
  if (got.size() != static_cast<size_t>(ref.numel())) {
    first = "float64 output has " + std::to_string(got.size()) + " elements, the reference " +
            std::to_string(ref.numel());
    return 1;
  }
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float r = ref[static_cast<int64_t>(i)];
    const float g = static_cast<float>(got[i]);
    const int64_t ulps = ulp_distance(g, r);
    if (e.tol[i] == 0) {  // an exact op (copies, selections): the same float32, bit for bit
      if (float_bits(g) == float_bits(r) || (std::isnan(g) && std::isnan(r))) continue;
    } else if (ulps <= kUlps || std::fabs(got[i] - static_cast<double>(r)) <= std::fabs(e.tol[i])) {
      continue;
    }
    if (bad++ == 0) {
      std::ostringstream s;
      s.precision(17);
      s << "element " << i << ": float64 " << got[i] << ", reference " << r << " (" << ulps
        << " ulps; reference bound " << e.tol[i] << ")";
      first = s.str();
    }
  }
  return bad;
}

/// Check 2: elements of `got` further than kModelFraction·tol from the float64 model (exactly equal
/// where the op is exact, tol = 0).
int64_t model_disagreements(const std::vector<double>& got, const Expected& e, std::string& first) {
  if (got.size() != e.want.size()) {
    first = "float64 output has " + std::to_string(got.size()) + " elements, the model " +
            std::to_string(e.want.size());
    return 1;
  }
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // Both NaN agree (a negative subnormal v of an AdamW case gives sqrt(v′) = NaN in both); a
    // model's bound may carry the value's sign.
    if (got[i] == e.want[i] || (std::isnan(got[i]) && std::isnan(e.want[i]))) continue;
    if (std::fabs(got[i] - e.want[i]) <= kModelFraction * std::fabs(e.tol[i])) continue;
    if (bad++ == 0) {
      std::ostringstream s;
      s.precision(17);
      s << "element " << i << ": float64 " << got[i] << ", model " << e.want[i] << " ± "
        << kModelFraction * e.tol[i];
      first = s.str();
    }
  }
  return bad;
}

/// Total check-1 disagreements of `got` with the reference outputs of `ref_case` (its model's bounds).
int64_t reference_disagreements(const std::vector<std::vector<double>>& got, const Case& ref_case) {
  const std::vector<Tensor> ref = run_case(ref_case, nullptr);
  const std::optional<std::vector<Expected>> want = find_op_tests(ref_case.kind)->expect(ref_case);
  REQUIRE(want.has_value());
  REQUIRE(got.size() == ref.size());
  int64_t bad = 0;
  for (size_t o = 0; o < got.size(); ++o) {
    std::string first;
    bad += reference_disagreements(got[o], ref[o], (*want)[o], first);
  }
  return bad;
}

const OpTests& tests_of(OpKind kind) {
  const OpTests* t = find_op_tests(kind);
  REQUIRE_MESSAGE(t != nullptr, "no tests registered for op " << op_name(kind));
  return *t;
}

/// Runs `check(case, gemm)` on the registered cases of every op kind: every variant, `trials` cases
/// each (the first big, odd ones with subnormal inputs), on every gemm this build has.
template <class Check>
void for_every_case(int trials, uint32_t seed, Check check) {
  std::mt19937 rng(seed);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    CAPTURE(op_name(kind));
    const OpTests& tests = tests_of(kind);
    for (int variant = 0; variant < tests.variants; ++variant)
      for (int trial = 0; trial < trials; ++trial) {
        const std::optional<Case> c = tests.make(kind, rng, trial == 0, variant, trial % 2 == 1);
        REQUIRE_MESSAGE(c.has_value(), "no test case for op " << op_name(kind));
        INFO(c->str());
        for (Float64Gemm gemm : built_gemms()) {
          INFO("gemm " << float64_gemm_name(gemm));
          check(*c, gemm);
        }
      }
  }
}

Case linear_case(std::mt19937& rng, int64_t m, int64_t k, int64_t n) {
  Case c{OpKind::Linear, {}, {}};
  c.in.push_back(random_tensor(Shape{m, k}, rng, false));
  c.in.push_back(random_tensor(Shape{k, n}, rng, false));
  c.in.push_back(random_tensor(Shape{n}, rng, false));
  return c;
}

}  // namespace

TEST_CASE(
    "float64: every op's result rounds to within a few float32 ulps (or the reference's error bound) of its "
    "RepOps reference") {
  for_every_case(6, 64, [](const Case& c, Float64Gemm gemm) {
    const std::vector<std::vector<double>> got = run64(c, gemm);
    const std::vector<Tensor> ref = run_case(c, nullptr);
    const std::optional<std::vector<Expected>> want = find_op_tests(c.kind)->expect(c);
    REQUIRE(want.has_value());
    REQUIRE(got.size() == ref.size());
    for (size_t o = 0; o < got.size(); ++o) {
      std::string first;
      const int64_t bad = reference_disagreements(got[o], ref[o], (*want)[o], first);
      INFO("output " << o << ": " << first);
      CHECK(bad == 0);
    }
  });
}

TEST_CASE(
    "float64: every op's result is float64-accurate (matches the float64 model far below float32 "
    "precision)") {
  for_every_case(6, 65, [](const Case& c, Float64Gemm gemm) {
    const std::vector<std::vector<double>> got = run64(c, gemm);
    const std::optional<std::vector<Expected>> want = find_op_tests(c.kind)->expect(c);
    REQUIRE(want.has_value());
    REQUIRE(got.size() == want->size());
    for (size_t o = 0; o < got.size(); ++o) {
      std::string first;
      const int64_t bad = model_disagreements(got[o], (*want)[o], first);
      INFO("output " << o << ": " << first);
      CHECK(bad == 0);
    }
  });
}

TEST_CASE("float64: the checks fail for a wrong function or a float32-precision result") {
  std::mt19937 rng(3);
  for (Float64Gemm gemm : built_gemms()) {
    INFO("gemm " << float64_gemm_name(gemm));
    // Linear without its bias.
    const Case lin = linear_case(rng, 7, 13, 11);
    CHECK(reference_disagreements(run64(lin, gemm), lin) == 0);
    Case no_bias = lin;
    for (float& b : no_bias.in[2].values()) b = 0.0f;
    CHECK(reference_disagreements(run64(no_bias, gemm), lin) > 0);

    // Linear with its trans_b flag dropped (a square w, so the shapes still agree).
    Case lin_t = linear_case(rng, 5, 9, 9);
    lin_t.attrs.ints = {1};
    CHECK(reference_disagreements(run64(lin_t, gemm), lin_t) == 0);
    Case dropped = lin_t;
    dropped.attrs.ints = {};
    CHECK(reference_disagreements(run64(dropped, gemm), lin_t) > 0);

    // Matmul with a's transpose flag flipped (a square a, so the shapes still agree).
    Case mm{OpKind::Matmul, {{0, 0}, {}}, {}};
    mm.in.push_back(random_tensor(Shape{9, 9}, rng, false));
    mm.in.push_back(random_tensor(Shape{9, 5}, rng, false));
    CHECK(reference_disagreements(run64(mm, gemm), mm) == 0);
    Case flipped = mm;
    flipped.attrs.ints[0] = 1;
    CHECK(reference_disagreements(run64(flipped, gemm), mm) > 0);

    // Conv2d as a true convolution (the kernel flipped) instead of the cross-correlation it is.
    Case conv{OpKind::Conv2d, {{1, 1}, {}}, {}};
    conv.in.push_back(random_tensor(Shape{2, 3, 7, 5}, rng, false));
    conv.in.push_back(random_tensor(Shape{4, 3, 3, 3}, rng, false));
    conv.in.push_back(random_tensor(Shape{4}, rng, false));
    CHECK(reference_disagreements(run64(conv, gemm), conv) == 0);
    Case flipped_kernel = conv;
    for (int64_t oc = 0; oc < 4 * 3; ++oc)
      for (int64_t t = 0; t < 9; ++t) flipped_kernel.in[1][oc * 9 + t] = conv.in[1][oc * 9 + 8 - t];
    CHECK(reference_disagreements(run64(flipped_kernel, gemm), conv) > 0);
  }
  // Softmax cross-entropy backward with every label shifted by one class.
  Case sce{OpKind::SoftmaxCrossEntropyBackward, {}, {}};
  sce.in.push_back(random_tensor(Shape{5, 7}, rng, false, -4.0f, 4.0f));
  sce.in.push_back(random_labels(5, 7, rng));
  sce.in.push_back(scalar(0.75f));
  CHECK(reference_disagreements(run64(sce, Float64Gemm::Naive), sce) == 0);
  Case shifted = sce;
  for (float& l : shifted.in[1].values()) l = static_cast<float>((static_cast<int>(l) + 1) % 7);
  CHECK(reference_disagreements(run64(shifted, Float64Gemm::Naive), sce) > 0);

  // LayerNorm with γ and β swapped.
  Case ln{OpKind::LayerNorm, {{}, {1e-5f}}, {}};
  ln.in.push_back(random_tensor(Shape{3, 17}, rng, false));
  ln.in.push_back(random_tensor(Shape{17}, rng, false));
  ln.in.push_back(random_tensor(Shape{17}, rng, false));
  CHECK(reference_disagreements(run64(ln, Float64Gemm::Naive), ln) == 0);
  Case swapped = ln;
  std::swap(swapped.in[1], swapped.in[2]);
  CHECK(reference_disagreements(run64(swapped, Float64Gemm::Naive), ln) > 0);

  // Check 2 sees float32 precision: the float32 reference itself, widened, is not float64-accurate.
  const Case big = linear_case(rng, 17, 61, 13);
  const std::vector<Expected> want = *find_op_tests(OpKind::Linear)->expect(big);
  std::string first;
  CHECK(model_disagreements(to_f64(run_case(big, nullptr)[0]), want[0], first) > 0);
  CHECK(model_disagreements(run64(big, Float64Gemm::Naive)[0], want[0], first) == 0);
}

// The naive gemm walks each element's k in order whichever way w is stored, so linear with trans_b on
// wᵀ gives linear's float64 values bit for bit (and every gemm agrees to float64 accuracy, checked above).
TEST_CASE("float64: linear with trans_b on wᵀ is bitwise linear on w (naive gemm)") {
  std::mt19937 rng(31);
  const Case lin = linear_case(rng, 7, 61, 11);
  Case lin_t{OpKind::Linear, {{1}, {}}, {lin.in[0], Tensor(Shape{11, 61}), lin.in[2]}};
  for (int64_t p = 0; p < 61; ++p)
    for (int64_t j = 0; j < 11; ++j) lin_t.in[1][j * 61 + p] = lin.in[1][p * 11 + j];
  const std::vector<double> y = run64(lin, Float64Gemm::Naive)[0], yt = run64(lin_t, Float64Gemm::Naive)[0];
  REQUIRE(yt.size() == y.size());
  CHECK(std::memcmp(y.data(), yt.data(), y.size() * sizeof(double)) == 0);
  Case bad = lin_t;
  bad.attrs.ints = {2};
  CHECK_THROWS_AS(run64(bad, Float64Gemm::Naive), OpError);
}

// Float32 inputs make every product a·b exact in double, so an fma and a multiply-then-add give the
// same chain: two gemms differ only where their summation orders do. OpenBLAS (every core type of
// Debian's 0.3.21: Prescott, Haswell, SkylakeX) keeps each element's k order within a block of a few
// hundred k and adds the blocks' partial sums into C, so K must exceed its block for any difference.
TEST_CASE("float64: the naive and OpenBLAS gemms differ bitwise on a K >= 256 matmul and agree to 1e-12") {
  std::mt19937 rng(11);
  const int64_t m = 37, k = 2053, n = 43;
  const bool blas_built = float64_gemm_built(Float64Gemm::OpenBlas);
  if (!blas_built) MESSAGE("this build has no OpenBLAS: the naive/OpenBLAS comparison is skipped");
  for (int64_t flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    CAPTURE(ta);
    CAPTURE(tb);
    Case c{OpKind::Matmul, {{ta, tb}, {}}, {}};
    c.in.push_back(random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng, false));
    c.in.push_back(random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng, false));
    const std::vector<double> naive = run64(c, Float64Gemm::Naive)[0];
    REQUIRE(naive.size() == static_cast<size_t>(m * n));
    // Naive is exactly the plain chain acc = acc + a·b, sequential over p from +0.
    auto a_at = [&](int64_t i, int64_t p) { return double(ta ? c.in[0][p * m + i] : c.in[0][i * k + p]); };
    auto b_at = [&](int64_t p, int64_t j) { return double(tb ? c.in[1][j * k + p] : c.in[1][p * n + j]); };
    std::vector<double> magnitude(naive.size());
    int64_t chain_mismatches = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0, mag = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          const double t = a_at(i, p) * b_at(p, j);
          acc = acc + t;
          mag += std::fabs(t);
        }
        magnitude[static_cast<size_t>(i * n + j)] = mag;
        if (std::memcmp(&acc, &naive[static_cast<size_t>(i * n + j)], sizeof acc) != 0) ++chain_mismatches;
      }
    CHECK(chain_mismatches == 0);

    if (!blas_built) {
      CHECK_THROWS_WITH_AS(run64(c, Float64Gemm::OpenBlas), doctest::Contains("this build has no OpenBLAS"),
                           OpError);
      continue;
    }
    const std::vector<double> blas = run64(c, Float64Gemm::OpenBlas)[0];
    REQUIRE(blas.size() == naive.size());
    int64_t differ = 0;
    double worst = 0;
    for (size_t e = 0; e < naive.size(); ++e) {
      if (std::memcmp(&naive[e], &blas[e], sizeof(double)) != 0) ++differ;
      worst = std::max(worst, std::fabs(naive[e] - blas[e]) / magnitude[e]);
    }
    INFO(differ << " of " << naive.size() << " entries differ bitwise; worst difference " << worst
                << " of Σ|terms|");
    if (flags == 0)
      MESSAGE("naive vs openblas, K = " << k << ": " << differ << " of " << naive.size()
                                        << " entries differ bitwise, worst by " << worst << " of Σ|terms|");
    CHECK(differ > 0);
    CHECK(worst <= 1e-12);
  }
}

// run_float64 computes a product of more than kFloat64GemmRowBlock rows or kFloat64GemmColumnBlock
// columns as one gemm call per fixed tile, on whatever pool it has: the bits must not depend on the
// thread count. Against the single call over the whole product: the naive loop keeps each element's
// k order whatever the call's size, so its bits are the single call's; OpenBLAS's kernels need not (on
// its SkylakeX kernels the tiles' sums differ from the single call's in the last bits), so there the
// tiles are checked against the summation bound. Shapes: row and column tiles with ragged
// edges; a weight gradient's few rows and many columns.
TEST_CASE("float64: a product split into tiles over a pool has the same bits on any thread count") {
  std::mt19937 rng(12);
  const int64_t shapes[][3] = {{2 * kFloat64GemmRowBlock + 37, 1029, f64::kFloat64GemmColumnBlock + 67},
                               {100, 1029, 2 * f64::kFloat64GemmColumnBlock + 5}};
  ThreadPool one(1), two(2), three(3);
  for (const auto& shape : shapes)
    for (Float64Gemm g : {Float64Gemm::Naive, Float64Gemm::OpenBlas}) {
      const int64_t m = shape[0], k = shape[1], n = shape[2];
      if (!float64_gemm_built(g)) continue;
      for (int64_t flags = 0; flags < 8; ++flags) {
        const bool ta = flags & 1, tb = flags & 2, accumulate = flags & 4;
        CAPTURE(float64_gemm_name(g));
        CAPTURE(flags);
        CAPTURE(m);
        const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng, false);
        const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng, false);
        const std::vector<double> ad(a.values().begin(), a.values().end()),
            bd(b.values().begin(), b.values().end());
        std::vector<double> start(static_cast<size_t>(m * n));
        for (double& v : start) v = std::uniform_real_distribution<double>(-1, 1)(rng);
        const f64::GemmArgs args{ad.data(),  bd.data(),  nullptr, m,  n,  k,
                                 ta ? m : k, tb ? k : n, n,       ta, tb, accumulate};
        std::vector<double> whole = start, on_one = start, on_two = start, on_three = start;
        f64::GemmArgs x = args;
        x.c = whole.data();
        f64::gemm(g, x);
        x.c = on_one.data();
        f64::gemm(g, x, one);
        x.c = on_two.data();
        f64::gemm(g, x, two);
        x.c = on_three.data();
        f64::gemm(g, x, three);
        CHECK(std::memcmp(on_one.data(), on_two.data(), whole.size() * sizeof(double)) == 0);
        CHECK(std::memcmp(on_one.data(), on_three.data(), whole.size() * sizeof(double)) == 0);
        if (g == Float64Gemm::Naive) {
          CHECK(std::memcmp(whole.data(), on_one.data(), whole.size() * sizeof(double)) == 0);
        } else {
          // Each is C + Σ a·b over k terms, all in [−1, 1]: two summation orders differ by at most
          // 2 · (k + 1)² · ε (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1).
          const double bound =
              2.0 * static_cast<double>((k + 1) * (k + 1)) * std::numeric_limits<double>::epsilon();
          double worst = 0;
          for (size_t i = 0; i < whole.size(); ++i) worst = std::max(worst, std::abs(whole[i] - on_one[i]));
          CHECK(worst <= bound);
        }
      }
    }
}

TEST_CASE("float64: gemm names parse, and the build reports which gemms it has") {
  CHECK(std::string(float64_gemm_name(Float64Gemm::OpenBlas)) == "openblas");
  CHECK(std::string(float64_gemm_name(Float64Gemm::Naive)) == "naive");
  CHECK(parse_float64_gemm("openblas") == Float64Gemm::OpenBlas);
  CHECK(parse_float64_gemm("naive") == Float64Gemm::Naive);
  CHECK_THROWS_WITH_AS(parse_float64_gemm("mkl"), doctest::Contains("'mkl'"), OpError);
  CHECK_THROWS_WITH_AS(parse_float64_gemm("OpenBLAS"), doctest::Contains("openblas, naive"), OpError);
  CHECK(float64_gemm_built(Float64Gemm::Naive));
#if defined(TRIBUNAL_HAVE_OPENBLAS)
  CHECK(float64_gemm_built(Float64Gemm::OpenBlas));
#else
  CHECK_FALSE(float64_gemm_built(Float64Gemm::OpenBlas));
  Tensor x(Shape{2});
  const Tensor* in[] = {&x};
  std::vector<double> out[1];
  CHECK_THROWS_WITH_AS(run_float64(OpKind::Relu, {}, in, out, Float64Gemm::OpenBlas),
                       doctest::Contains("this build has no OpenBLAS"), OpError);
#endif
}

TEST_CASE("float64: bad input throws OpError") {
  std::mt19937 rng(5);
  auto run = [](OpKind kind, const Attrs& attrs, const std::vector<const Tensor*>& in, size_t outputs) {
    std::vector<std::vector<double>> out(outputs);
    run_float64(kind, attrs, in, out, Float64Gemm::Naive);
  };
  const Tensor a = random_tensor(Shape{2, 3}, rng, false), b = random_tensor(Shape{3, 2}, rng, false);
  CHECK_THROWS_AS(run(OpKind::Add, {}, {&a, &b}, 1), OpError);                       // shapes differ
  CHECK_THROWS_AS(run(OpKind::Linear, {}, {&a, &a, &a}, 1), OpError);                // inner sizes disagree
  CHECK_THROWS_AS(run(OpKind::Matmul, {{0, 0}, {}}, {&a, &a}, 1), OpError);          // 3 ≠ 2
  CHECK_THROWS_AS(run(OpKind::Add, {}, {&a}, 1), OpError);                           // one input short
  CHECK_THROWS_AS(run(OpKind::Add, {}, {&a, &a}, 2), OpError);                       // one output too many
  CHECK_THROWS_AS(run(OpKind::AdamW, {{1}, {0.1f}}, {&a, &a, &a, &a}, 3), OpError);  // float count
  CHECK_THROWS_AS(run(OpKind::Gather, {{0, 2}, {}}, {&a}, 1), OpError);              // row 2 of 2
  CHECK_THROWS_AS(run(OpKind::Count, {}, {&a}, 1), OpError);

  // Labels: out of range, fractional.
  const Tensor logits = random_tensor(Shape{2, 3}, rng, false);
  Tensor labels(Shape{2});
  labels[0] = 1.0f;
  labels[1] = 3.0f;
  CHECK_THROWS_WITH_AS(run(OpKind::SoftmaxCrossEntropy, {}, {&logits, &labels}, 1),
                       doctest::Contains("label"), OpError);
  const Tensor dloss = scalar(1.0f);
  CHECK_THROWS_AS(run(OpKind::SoftmaxCrossEntropyBackward, {}, {&logits, &labels, &dloss}, 1), OpError);
  labels[1] = 0.5f;
  CHECK_THROWS_AS(run(OpKind::SoftmaxCrossEntropy, {}, {&logits, &labels}, 1), OpError);

  // Token ids: ≥ V, negative.
  const Tensor tok = random_tensor(Shape{4, 3}, rng, false), pos = random_tensor(Shape{2, 3}, rng, false);
  Tensor ids(Shape{1, 2});
  ids[0] = 1.0f;
  ids[1] = 4.0f;
  CHECK_THROWS_WITH_AS(run(OpKind::Embedding, {}, {&tok, &pos, &ids}, 1), doctest::Contains("token id"),
                       OpError);
  ids[1] = -1.0f;
  const Tensor dy = random_tensor(Shape{2, 3}, rng, false);
  CHECK_THROWS_AS(run(OpKind::EmbeddingBackward, {{4}, {}}, {&ids, &dy}, 1), OpError);

  // Every registered bad invocation of every op (with zero inputs of its shapes) is refused too.
  int64_t checked = 0;
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const auto kind = static_cast<OpKind>(k);
    for (const BadCase& bad : tests_of(kind).bad) {
      bool small = true;
      for (const Shape& s : bad.in) small = small && s.numel() <= (int64_t{1} << 20);
      if (!small) continue;
      INFO(op_name(kind) << ": " << bad.why);
      std::vector<Tensor> tensors;
      for (const Shape& s : bad.in) tensors.emplace_back(s);
      std::vector<const Tensor*> in;
      for (const Tensor& t : tensors) in.push_back(&t);
      CHECK_THROWS_AS(run(kind, bad.attrs, in, static_cast<size_t>(op_info(kind).num_outputs)), OpError);
      ++checked;
    }
  }
  CHECK(checked > 2 * static_cast<int64_t>(kOpKindCount));
}

namespace {

/// |got − want| in units of want's double spacing (its ulp; the subnormal spacing below 2^-1022).
double ulps_from(double got, long double want) {
  const double w = static_cast<double>(want);
  const double spacing = std::max(std::nextafter(std::fabs(w), INFINITY) - std::fabs(w), 0x1p-1074);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - want) / spacing);
}

}  // namespace

// f64::exp (ops/float64/exp.h) replaces libm's exp in the float64 kernels: it must be as accurate, and
// the same bits on every path (the AVX2 lanes and the scalar sequence), whatever the CPU.
TEST_CASE(
    "float64: f64::exp is within 2 ulps of expl, the same bits SIMD-wide and scalar, right at the edges") {
  std::mt19937_64 rng(7);
  std::vector<double> x;
  std::uniform_real_distribution<double> wide(-746.0, 710.0), narrow(-2.0, 2.0), tiny(-1e-8, 1e-8);
  for (int i = 0; i < 200000; ++i) x.push_back(i % 3 == 0 ? wide(rng) : i % 3 == 1 ? narrow(rng) : tiny(rng));
  for (double v : {0.0, -0.0, 1.0, -1.0, 0.5 * std::log(2.0), -708.39, -708.4, -744.0, -745.0, -745.13,
                   709.78, 709.0, 1e-300, -1e-300})
    x.push_back(v);
  std::vector<double> y(x.size());
  f64::exp(x.data(), y.data(), x.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double s = f64::exp(x[i]);
    REQUIRE_MESSAGE(std::memcmp(&s, &y[i], sizeof s) == 0, "x = ", x[i]);  // SIMD lanes == scalar
    worst = std::max(worst, ulps_from(y[i], std::exp(static_cast<long double>(x[i]))));
  }
  MESSAGE("f64::exp: worst error ", worst, " ulps over ", x.size(), " arguments");
  CHECK(worst <= 2.0);
  CHECK(f64::exp(0.0) == 1.0);
  CHECK(f64::exp(-INFINITY) == 0.0);
  CHECK(std::isinf(f64::exp(INFINITY)));
  CHECK(std::isinf(f64::exp(709.8)));
  CHECK(f64::exp(709.78) == doctest::Approx(1.7928227943945155e308).epsilon(1e-15));
  CHECK(f64::exp(-745.2) == 0.0);
  CHECK(f64::exp(-745.0) == 0x1p-1074);  // the smallest subnormal, as expl rounds it
  CHECK(std::isnan(f64::exp(NAN)));
}

// GELU's 1 + tanh(u) cancels for u ≪ 0: computed as h·t + h with libm's tanh it was off by ~5e-6 of the
// value at x = −6 (a libm's last bit there moves the float64 value by many float32 spacings, beyond
// what τ allows two parties). The float64 kernels now compute 1 ± tanh u without cancelling.
TEST_CASE("float64: GELU and its gradient are accurate to 1e-13 of the value where 1 + tanh cancels") {
  std::vector<float> xs;
  for (float v = -14.0f; v <= 6.0f; v += 0.0078125f) xs.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, -1e-40f}) xs.push_back(v);
  const Shape shape{static_cast<int64_t>(xs.size())};
  const Tensor x(shape, xs), dy(shape, std::vector<float>(xs.size(), 1.0f));
  const Tensor* gelu_in[] = {&x};
  const Tensor* grad_in[] = {&x, &dy};
  std::vector<std::vector<double>> y(1), g(1);
  run_float64(OpKind::Gelu, {}, gelu_in, y, Float64Gemm::Naive);
  run_float64(OpKind::GeluBackward, {}, grad_in, g, Float64Gemm::Naive);
  double worst_y = 0, worst_g = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double v = xs[i], c = 0.79788456080286535588L, k = 0.044715L;
    const long double u = c * (v + k * v * v * v);
    // 1 ± tanh u = 2/(1 + e^(∓2u)), without cancelling in long double either.
    const long double plus = 2 / (1 + std::exp(-2 * u)), minus = 2 / (1 + std::exp(2 * u));
    const long double want_y = 0.5L * v * plus;
    const long double want_g = 0.5L * plus + 0.5L * v * (plus * minus) * c * (1 + 3 * k * v * v);
    if (want_y != 0) worst_y = std::max(worst_y, static_cast<double>(std::fabs((y[0][i] - want_y) / want_y)));
    if (want_g != 0) worst_g = std::max(worst_g, static_cast<double>(std::fabs((g[0][i] - want_g) / want_g)));
  }
  MESSAGE("float64 GELU: worst relative error ", worst_y, ", gradient ", worst_g);
  CHECK(worst_y <= 1e-13);
  CHECK(worst_g <= 1e-13);
  // The reference's selects: gelu(−0) = +0, and saturation (x = −14: e^(2u) underflows) gives exactly 0.
  CHECK(std::signbit(y[0][xs.size() - 4]) == false);
  CHECK(y[0][xs.size() - 4] == 0.0);
}

// The float64 dropout reads its mask from the fast float32 kernel's output (keep ⇔ y ≠ 0), except at
// x = −0, where only the mask tells −0 (kept) from +0 (dropped): every element against dropout_keep.
TEST_CASE("float64: dropout and its backward keep exactly dropout_keep's elements, −0 and NaN included") {
  std::vector<float> xs;
  for (int i = 0; i < 4099; ++i)
    xs.push_back(i % 4 == 0    ? -0.0f
                 : i % 4 == 1  ? 0.0f
                 : i % 97 == 2 ? NAN
                               : 0.001f * static_cast<float>(i - 2000));
  const Tensor x(Shape{static_cast<int64_t>(xs.size())}, xs);
  const Tensor* in[] = {&x};
  const Attrs attrs{{1234567, 3, 9}, {0.375f}};
  const double s = 1.0 / (1.0 - 0.375);
  for (OpKind kind : {OpKind::Dropout, OpKind::DropoutBackward}) {
    std::vector<std::vector<double>> y(1);
    run_float64(kind, attrs, in, y, Float64Gemm::Naive);
    int64_t kept_negative_zeros = 0, mismatches = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const bool keep = dropout_keep(1234567, 3, 9, 0.375f, static_cast<int64_t>(i));
      const double want = keep ? static_cast<double>(xs[i]) * s : 0.0;
      if (std::memcmp(&want, &y[0][i], sizeof want) != 0 && !(std::isnan(want) && std::isnan(y[0][i])))
        ++mismatches;
      kept_negative_zeros += keep && xs[i] == 0.0f && std::signbit(xs[i]);
    }
    CHECK(mismatches == 0);
    CHECK(kept_negative_zeros > 100);  // the case the float32 output cannot tell
  }
}
