#include "tests/ops/op_test_support.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "ops/math.h"
#include "ops/simd.h"

namespace tribunal::optest {

ThreadPool& pool(int threads) {
  static ThreadPool p1(1), p2(2), p3(3);
  return threads == 1 ? p1 : threads == 2 ? p2 : p3;
}

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

Tensor random_tensor(Shape s, std::mt19937& rng, bool specials, float lo, float hi) {
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

std::string Case::str() const {
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

/// Outputs shaped by infer_shapes and filled with a NaN sentinel, so an element a kernel never
/// writes is visible (as a NaN in a float64 comparison, as a byte difference in memcmp).
namespace {

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

}  // namespace

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

void check_against(const Case& c, const std::vector<Expected>& want) {
  INFO(c.str());
  const std::vector<Tensor> got = run_case(c, nullptr);
  REQUIRE(got.size() == want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    std::string first;
    const int64_t bad = mismatches(got[o], want[o], first);
    INFO("output " << o << ": " << first);
    CHECK(bad == 0);
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  // An empty tensor may have no storage (a null data pointer, which memcmp must not see).
  return a.shape() == b.shape() &&
         (a.numel() == 0 || std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * 4) == 0);
}

std::vector<Tensor> run_everywhere(const Case& c, bool (*same)(const Tensor&, const Tensor&)) {
  INFO(c.str());
  std::vector<Tensor> ref = run_case(c, nullptr);
  for (SimdPath path : available_simd_paths()) {
    const ScopedSimdPath forced(path);
    for (int threads : {1, 2, 3}) {
      const std::vector<Tensor> fast = run_case(c, &pool(threads));
      REQUIRE(fast.size() == ref.size());
      for (size_t o = 0; o < ref.size(); ++o) {
        INFO(simd_path_name(path) << ", " << threads << " threads, output " << o);
        CHECK(same(fast[o], ref[o]));
      }
    }
  }
  return ref;
}

ValueRef EagerVjpBuilder::add(Tensor t) {
  values_.push_back(std::move(t));
  return static_cast<ValueRef>(values_.size() - 1);
}

ValueRef EagerVjpBuilder::emit(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) {
  return emit_all(kind, std::move(attrs), std::move(inputs)).front();
}

std::vector<ValueRef> EagerVjpBuilder::emit_all(OpKind kind, Attrs attrs, std::vector<ValueRef> inputs) {
  Case c{kind, std::move(attrs), {}};
  for (ValueRef r : inputs) c.in.push_back(values_.at(r));
  std::vector<ValueRef> out;
  for (Tensor& t : run_case(c, nullptr)) out.push_back(add(std::move(t)));
  return out;
}

std::vector<double> to_f64(const Tensor& t) {
  return {t.values().begin(), t.values().end()};
}

namespace {
std::map<OpKind, OpTests>& registry() {
  static std::map<OpKind, OpTests> r;
  return r;
}
}  // namespace

RegisterOpTests::RegisterOpTests(OpKind kind, OpTests tests) {
  if (!registry().emplace(kind, std::move(tests)).second) {
    std::fprintf(stderr, "op tests for '%s' registered twice\n", op_name(kind));
    std::abort();
  }
}

const OpTests* find_op_tests(OpKind kind) {
  const auto it = registry().find(kind);
  return it == registry().end() ? nullptr : &it->second;
}

}  // namespace tribunal::optest
