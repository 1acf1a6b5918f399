// Shared machinery of the op tests (docs/numerics.md "How the contract is checked").
//
// Each op family's test file registers, per OpKind, how to make random valid invocations, what the
// float64 result of an invocation is, and which invalid invocations infer_shapes must refuse
// (RegisterOpTests). test_op_coverage.cpp then runs the same checks over every OpKind and fails for
// a kind nobody registered: the float64 comparison of the reference, the bitwise comparison of the
// fast kernel on every SIMD path × 1, 2, 3 threads, and the bad-input refusals.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

namespace tribunal::optest {

// Relative tolerance of the float64 comparisons. Each tolerance is kRel times a magnitude that
// bounds the op's rounding error (e.g. Σ|terms| for a dot product, not |result|, because a float dot
// product of cancelling terms is only accurate relative to the terms).
constexpr double kRel = 1e-5;

/// Pools of 1, 2 and 3 threads shared by all op tests.
ThreadPool& pool(int threads);

/// Uniform in [lo, hi); with `specials`, about one value in 32 is a random subnormal (either sign), so
/// that a path flushing subnormals to zero would show up in the bitwise comparisons.
std::vector<float> random_values(int64_t n, std::mt19937& rng, float lo, float hi, bool specials);
Tensor random_tensor(Shape s, std::mt19937& rng, bool specials, float lo = -1.0f, float hi = 1.0f);
/// Class ids stored as floats, as the data set stores them.
Tensor random_labels(int64_t batch, int64_t classes, std::mt19937& rng);
Tensor scalar(float v);
/// 1, primes and odd sizes, plus the SIMD-friendly 32 and its neighbours.
int64_t small_dim(std::mt19937& rng);
Shape random_shape(std::mt19937& rng, int min_rank, int max_rank);

/// One op invocation.
struct Case {
  OpKind kind = OpKind::Count;
  Attrs attrs;
  std::vector<Tensor> in;
  std::string str() const;
};

/// The float64 value of each output element and the largest error the float kernel may have there.
struct Expected {
  std::vector<double> want;
  std::vector<double> tol;  ///< 0 for ops that are exact in float (copies, selections)
};

/// An invocation infer_shapes must refuse, and why.
struct BadCase {
  Attrs attrs;
  std::vector<Shape> in;
  const char* why;
};

/// The tests of one op kind.
struct OpTests {
  int variants = 1;  ///< attribute variants the cases cycle through (transposes, flags)
  /// A random, valid invocation. `big`: shapes large enough that the fast kernel splits its work over
  /// 3 threads; `specials`: inputs carry subnormals.
  std::optional<Case> (*make)(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) = nullptr;
  /// The float64 result of the case, one Expected per output.
  std::optional<std::vector<Expected>> (*expect)(const Case& c) = nullptr;
  std::vector<BadCase> bad;  ///< at least one per kind
  /// Inputs the op's VJP rule differentiates, checked against central differences of `expect` by
  /// test_op_coverage.cpp (e.g. {0, 1, 2} for linear's x, w, b; not ids or labels). Must be non-empty
  /// exactly when the op has a VJP rule.
  std::vector<int> grad_inputs = {};
};

/// Registers the tests of `kind` (at static initialization). Registering a kind twice aborts.
struct RegisterOpTests {
  RegisterOpTests(OpKind kind, OpTests tests);
};

/// The registered tests of `kind`, or nullptr.
const OpTests* find_op_tests(OpKind kind);

/// Runs the reference kernel (pool == nullptr) or the fast one on outputs pre-filled with a NaN
/// sentinel, so an element a kernel never writes is visible.
std::vector<Tensor> run_case(const Case& c, ThreadPool* pool);

/// Number of elements where |got − want| > tol (a NaN counts); the first one is described in `first`.
int64_t mismatches(const Tensor& got, const Expected& e, std::string& first);

/// Runs the reference kernel and checks every output against `want` (doctest CHECKs).
void check_against(const Case& c, const std::vector<Expected>& want);

bool bitwise_equal(const Tensor& a, const Tensor& b);

/// Runs `c` with the reference and with the fast kernel on every SIMD path this CPU has × 1, 2, 3
/// threads; CHECKs that every output agrees with the reference under `same` (default: memcmp) and
/// returns the reference's outputs.
std::vector<Tensor> run_everywhere(const Case& c, bool (*same)(const Tensor&, const Tensor&) = bitwise_equal);

/// A VjpBuilder that evaluates each emitted node at once with the reference kernels, so a VJP rule
/// can be checked on its own, without the engine's graph and executor.
class EagerVjpBuilder : public VjpBuilder {
 public:
  ValueRef add(Tensor t);
  const Tensor& value(ValueRef r) const { return values_.at(r); }
  ValueRef emit(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) override;
  std::vector<ValueRef> emit_all(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) override;
  Shape shape(ValueRef r) const override { return values_.at(r).shape(); }

 private:
  std::vector<Tensor> values_;
};

std::vector<double> to_f64(const Tensor& t);

}  // namespace tribunal::optest
