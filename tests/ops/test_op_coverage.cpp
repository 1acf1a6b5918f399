// The checks every OpKind must pass, run over the whole registry (docs/numerics.md "How the contract is
// checked": the proof of the contract is tests"; issue "registry coverage"): each kind has a reference
// kernel, a fast kernel, an attribute encoding, a float64 model of its definition, random cases and bad-input
// cases registered by its family's test file (op_test_support.h). A kind without them fails here.
//  1. mathematics: the reference kernel against the float64 model within the per-op tolerance;
//  2. reproducibility: run_fast on every SIMD path this CPU has × 1, 2 and 3 threads is bitwise
//     equal (memcmp) to run_reference, on random shapes with 1, primes and odd sizes, including
//     shapes big enough to split over threads, with and without subnormal inputs;
//  3. validation: infer_shapes throws OpError on the registered bad invocations.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "ops/registry.h"
#include "ops/simd.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

OpKind kind_at(size_t i) {
  return static_cast<OpKind>(i);
}

/// The tests registered for `kind`; a kind without them fails the calling test case.
const OpTests& tests_of(OpKind kind) {
  const OpTests* tests = find_op_tests(kind);
  REQUIRE_MESSAGE(tests != nullptr, "no tests registered for op " << std::string(op_name(kind)));
  return *tests;
}

/// A registered random case of `kind`; a kind whose maker gives none fails the calling test case.
Case make_case(const OpTests& tests, OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  std::optional<Case> c = tests.make(kind, rng, big, variant, specials);
  REQUIRE_MESSAGE(c.has_value(), "no test case for op " << std::string(op_name(kind)));
  return std::move(*c);
}

}  // namespace

TEST_CASE("every op kind has a reference, a fast kernel, an attribute encoding and registered tests") {
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpInfo& info = op_info(kind_at(k));
    CAPTURE(info.name);
    CHECK(std::string(info.name).size() > 0);
    CHECK((info.num_inputs >= 1 || info.num_inputs == -1));
    CHECK(info.num_outputs >= 1);
    // Compared outside the macros: doctest cannot print function pointers.
    const bool has_kernels = info.reference != nullptr && info.fast != nullptr && info.infer != nullptr;
    CHECK(has_kernels);
    for (size_t j = 0; j < k; ++j) CHECK(std::string(info.name) != op_name(kind_at(j)));
    const OpTests& tests = tests_of(kind_at(k));
    const bool has_cases = tests.make != nullptr && tests.expect != nullptr;
    REQUIRE(has_cases);
    CHECK(!tests.bad.empty());
    // The attribute encoding of a real case round-trips its counts (u32 count ‖ i64s ‖ u32 count ‖ f32s).
    std::mt19937 rng(1);
    const Case c = make_case(tests, kind_at(k), rng, false, 0, false);
    CHECK(encode_attrs(c.attrs).size() == 8 + 8 * c.attrs.ints.size() + 4 * c.attrs.floats.size());
  }
}

TEST_CASE("every op's reference kernel matches a float64 implementation of its definition") {
  std::mt19937 rng(42);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    CAPTURE(op_name(kind));
    const OpTests& tests = tests_of(kind);
    for (int variant = 0; variant < tests.variants; ++variant) {
      for (int trial = 0; trial < 12; ++trial) {
        const Case c = make_case(tests, kind, rng, /*big=*/trial == 0, variant, /*specials=*/false);
        const std::optional<std::vector<Expected>> want = tests.expect(c);
        REQUIRE_MESSAGE(want.has_value(), "no float64 model for op " << std::string(op_name(kind)));
        check_against(c, *want);
      }
    }
  }
}

TEST_CASE("every op's fast kernel on every SIMD path and 1, 2, 3 threads is bitwise equal to its reference") {
  std::mt19937 rng(7);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    CAPTURE(op_name(kind));
    const OpTests& tests = tests_of(kind);
    for (int variant = 0; variant < tests.variants; ++variant) {
      for (int trial = 0; trial < 16; ++trial) {
        // Trials 0 and 1 are big enough to split over threads; odd trials carry subnormals.
        const Case c = make_case(tests, kind, rng, trial < 2, variant, trial % 2 == 1);
        run_everywhere(c);
      }
    }
  }
}

TEST_CASE("infer_shapes throws OpError for bad shapes and attribute counts, for every op") {
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    const OpTests& tests = tests_of(kind);
    CHECK_MESSAGE(!tests.bad.empty(), "no bad-input case for op " << std::string(op_name(kind)));
    for (const BadCase& b : tests.bad) {
      INFO(op_name(kind) << ": " << b.why);
      CHECK_THROWS_AS(infer_shapes(kind, b.attrs, b.in), OpError);
    }
  }
}

namespace {

/// L = Σ_o Σ_e r_o[e]·y_o[e] evaluated by the op's float64 model, for the finite differences.
double f64_objective(const OpTests& tests, const Case& c, const std::vector<Tensor>& cotangents) {
  const std::optional<std::vector<Expected>> y = tests.expect(c);
  REQUIRE(y.has_value());
  double l = 0;
  for (size_t o = 0; o < y->size(); ++o)
    for (size_t e = 0; e < (*y)[o].want.size(); ++e)
      l += cotangents[o][static_cast<int64_t>(e)] * (*y)[o].want[e];
  return l;
}

}  // namespace

// The VJP rules against central differences. The objective L = Σ r·op(x) with a random cotangent r is
// evaluated in float64 by the op's registered model at float inputs x ± h (h = 2⁻¹⁰·max(1, |x|), the
// difference taken over the exact float spacing), so the quotient carries only the O(h²) truncation
// (~1e-6) and no float rounding; the analytic gradient is the VJP rule's nodes run by the reference
// kernels in float (error ~1e-6 of the gradient's scale). A wrong rule (a missed factor, a transposed
// operand, a dropped term) is off by far more than the 1e-3 relative tolerance.
TEST_CASE("every differentiable op's VJP rule matches float64 central differences") {
  std::mt19937 rng(2024);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    const OpInfo& info = op_info(kind);
    CAPTURE(std::string(info.name));
    const OpTests& tests = tests_of(kind);
    CHECK_MESSAGE(tests.grad_inputs.empty() == (info.vjp == nullptr),
                  "grad_inputs must be listed exactly for ops with a VJP rule");
    if (info.vjp == nullptr) continue;
    for (int variant = 0; variant < tests.variants; ++variant) {
      for (int trial = 0; trial < 3; ++trial) {
        const Case c = make_case(tests, kind, rng, false, variant, false);
        INFO(c.str());
        EagerVjpBuilder b;
        std::vector<ValueRef> in_refs, out_refs, grad_refs;
        for (const Tensor& t : c.in) in_refs.push_back(b.add(t));
        std::vector<Tensor> cotangents;
        for (Tensor& y : run_case(c, nullptr)) {
          out_refs.push_back(b.add(std::move(y)));
          cotangents.push_back(random_tensor(b.value(out_refs.back()).shape(), rng, false));
          grad_refs.push_back(b.add(cotangents.back()));
        }
        std::unique_ptr<bool[]> needs(new bool[c.in.size()]());
        for (int i : tests.grad_inputs) needs[static_cast<size_t>(i)] = true;
        std::vector<ValueRef> in_grads(c.in.size(), 0);
        info.vjp(
            b,
            VjpArgs{c.attrs, in_refs, out_refs, grad_refs, std::span<const bool>(needs.get(), c.in.size())},
            in_grads);

        for (int i : tests.grad_inputs) {
          const Tensor& grad = b.value(in_grads[static_cast<size_t>(i)]);
          REQUIRE(grad.shape() == c.in[static_cast<size_t>(i)].shape());
          double scale = 0;
          for (float g : grad.values()) scale = std::max(scale, std::fabs(static_cast<double>(g)));
          const int64_t n = grad.numel();
          for (int probe = 0; probe < std::min<int64_t>(n, 12); ++probe) {
            const int64_t e = n <= 12 ? probe : static_cast<int64_t>(rng() % static_cast<uint32_t>(n));
            Case plus = c, minus = c;
            const float x = c.in[static_cast<size_t>(i)][e];
            const float h = 0x1p-10f * std::max(1.0f, std::fabs(x));
            plus.in[static_cast<size_t>(i)][e] = x + h;
            minus.in[static_cast<size_t>(i)][e] = x - h;
            const double dx = static_cast<double>(x + h) - static_cast<double>(x - h);
            const double numeric =
                (f64_objective(tests, plus, cotangents) - f64_objective(tests, minus, cotangents)) / dx;
            const double analytic = grad[e];
            INFO("input " << i << " element " << e << ": analytic " << analytic << ", numeric " << numeric);
            CHECK(std::fabs(numeric - analytic) <= 1e-3 * (std::fabs(numeric) + 0.1 * scale) + 1e-6);
          }
        }
      }
    }
  }
}
