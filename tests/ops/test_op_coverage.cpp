// The checks every OpKind must pass, run over the whole registry (DESIGN §4 "the proof of the
// contract is tests"; issue "registry coverage"): each kind has a reference kernel, a fast kernel,
// an attribute encoding, a float64 model of its definition, random cases and bad-input cases
// registered by its family's test file (op_test_support.h). A kind without them fails here.
//  1. mathematics: the reference kernel against the float64 model within the per-op tolerance;
//  2. reproducibility: run_fast on every SIMD path this CPU has × 1, 2 and 3 threads is bitwise
//     equal (memcmp) to run_reference, on random shapes with 1, primes and odd sizes, including
//     shapes big enough to split over threads, with and without subnormal inputs;
//  3. validation: infer_shapes throws OpError on the registered bad invocations.
#include <doctest/doctest.h>

#include <string>

#include "ops/registry.h"
#include "ops/simd.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

OpKind kind_at(size_t i) { return static_cast<OpKind>(i); }

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
    const OpTests* tests = find_op_tests(kind_at(k));
    REQUIRE_MESSAGE(tests != nullptr, "no tests registered for op " << std::string(info.name));
    const bool has_cases = tests->make != nullptr && tests->expect != nullptr;
    CHECK(has_cases);
    CHECK(!tests->bad.empty());
    // The attribute encoding of a real case round-trips its counts (u32 count ‖ i64s ‖ u32 count ‖ f32s).
    std::mt19937 rng(1);
    const std::optional<Case> c = tests->make(kind_at(k), rng, false, 0, false);
    REQUIRE(c.has_value());
    CHECK(encode_attrs(c->attrs).size() == 8 + 8 * c->attrs.ints.size() + 4 * c->attrs.floats.size());
  }
}

TEST_CASE("every op's reference kernel matches a float64 implementation of its definition") {
  std::mt19937 rng(42);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    CAPTURE(op_name(kind));
    const OpTests* tests = find_op_tests(kind);
    REQUIRE_MESSAGE(tests != nullptr, "no tests registered for op " << std::string(op_name(kind)));
    for (int variant = 0; variant < tests->variants; ++variant) {
      for (int trial = 0; trial < 12; ++trial) {
        const std::optional<Case> c = tests->make(kind, rng, /*big=*/trial == 0, variant, /*specials=*/false);
        REQUIRE_MESSAGE(c.has_value(), "no test case for op " << std::string(op_name(kind)));
        const std::optional<std::vector<Expected>> want = tests->expect(*c);
        REQUIRE_MESSAGE(want.has_value(), "no float64 model for op " << std::string(op_name(kind)));
        check_against(*c, *want);
      }
    }
  }
}

TEST_CASE("every op's fast kernel on every SIMD path and 1, 2, 3 threads is bitwise equal to its reference") {
  std::mt19937 rng(7);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    CAPTURE(op_name(kind));
    const OpTests* tests = find_op_tests(kind);
    REQUIRE_MESSAGE(tests != nullptr, "no tests registered for op " << std::string(op_name(kind)));
    for (int variant = 0; variant < tests->variants; ++variant) {
      for (int trial = 0; trial < 16; ++trial) {
        // Trials 0 and 1 are big enough to split over threads; odd trials carry subnormals.
        const std::optional<Case> c = tests->make(kind, rng, trial < 2, variant, trial % 2 == 1);
        REQUIRE_MESSAGE(c.has_value(), "no test case for op " << std::string(op_name(kind)));
        INFO(c->str());
        const std::vector<Tensor> ref = run_case(*c, nullptr);
        for (SimdPath path : available_simd_paths()) {
          const ScopedSimdPath forced(path);
          for (int threads : {1, 2, 3}) {
            const std::vector<Tensor> fast = run_case(*c, &pool(threads));
            REQUIRE(fast.size() == ref.size());
            for (size_t o = 0; o < ref.size(); ++o) {
              INFO(simd_path_name(path) << ", " << threads << " threads, output " << o);
              CHECK(bitwise_equal(fast[o], ref[o]));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("infer_shapes throws OpError for bad shapes and attribute counts, for every op") {
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = kind_at(k);
    const OpTests* tests = find_op_tests(kind);
    REQUIRE_MESSAGE(tests != nullptr, "no tests registered for op " << std::string(op_name(kind)));
    CHECK_MESSAGE(!tests->bad.empty(), "no bad-input case for op " << std::string(op_name(kind)));
    for (const BadCase& b : tests->bad) {
      INFO(op_name(kind) << ": " << b.why);
      CHECK_THROWS_AS(infer_shapes(kind, b.attrs, b.in), OpError);
    }
  }
}
