// The op descriptors (ops/registry.h OpInfo): one entry per OpKind from which the registry, the float64
// kernels of rounding-log mode, the rounding quanta, the dispute cost's fma chains and the default τ
// are all derived. Adding an op is its entry plus its kernels; these tests fail, naming the op, for an
// entry that lacks a part, and show that the registry's own check catches each gap.
#include <doctest/doctest.h>

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/float64/float64.h"
#include "ops/registry.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;

namespace {

// Compared outside doctest's macros: it cannot print function pointers.
template <class Fn>
bool set(Fn* fn) {
  return fn != nullptr;
}

}  // namespace

TEST_CASE(
    "every op kind has one complete descriptor: kernels, float64, VJP or none, cost and numerics facts") {
  int differentiable = 0, contractions = 0;
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    const OpInfo& info = op_info(kind);
    CAPTURE(k);
    CAPTURE(std::string(info.name));
    CHECK(info.kind == kind);
    CHECK(op_info_defect(kind, info) == "");
    CHECK(std::string(info.name).size() > 0);
    CHECK(set(info.infer));
    CHECK(set(info.reference));
    CHECK(set(info.fast));
    CHECK(set(info.float64));
    CHECK((info.float64_spread == Float64Spread::Exact || info.float64_spread == Float64Spread::Sum ||
           info.float64_spread == Float64Spread::Libm));
    // A contraction has both cost and quanta, and its float64 is a sum a vendor kernel may reorder.
    CHECK(set(info.fma_chain) == set(info.quanta));
    if (set(info.fma_chain)) {
      CHECK(info.float64_spread == Float64Spread::Sum);
      ++contractions;
    }
    // The VJP rule or its absence matches the op tests' list of differentiated inputs (op_test_support.h).
    const optest::OpTests* tests = optest::find_op_tests(kind);
    REQUIRE(tests != nullptr);
    CHECK(set(info.vjp) == !tests->grad_inputs.empty());
    differentiable += set(info.vjp) ? 1 : 0;
  }
  // linear, matmul, conv2d and its input and weight gradients; the forward ops with a VJP rule.
  CHECK(contractions == 5);
  CHECK(differentiable == 28);
}

TEST_CASE("the registry's check names the op and the part its entry lacks") {
  const OpInfo good = op_info(OpKind::Linear);
  CHECK(op_info_defect(OpKind::Linear, good) == "");
  auto defect = [&](void (*spoil)(OpInfo&), OpKind as = OpKind::Linear) {
    OpInfo bad = good;
    spoil(bad);
    return op_info_defect(as, bad);
  };
  CHECK(defect([](OpInfo&) {}, OpKind::Matmul) == "op 'linear' (kind 2): its entry describes kind 1");
  CHECK(defect([](OpInfo& i) { i.reference = nullptr; }) == "op 'linear' (kind 1): no reference kernel");
  CHECK(defect([](OpInfo& i) { i.fast = nullptr; }) == "op 'linear' (kind 1): no fast kernel");
  CHECK(defect([](OpInfo& i) { i.infer = nullptr; }) == "op 'linear' (kind 1): no shape rule");
  CHECK(defect([](OpInfo& i) { i.float64 = nullptr; }) == "op 'linear' (kind 1): no float64 kernel");
  CHECK(defect([](OpInfo& i) { i.float64_spread = Float64Spread{}; }) ==
        "op 'linear' (kind 1): no float64 spread");
  CHECK(defect([](OpInfo& i) { i.quanta = nullptr; }) ==
        "op 'linear' (kind 1): a contraction needs both an fma chain and rounding quanta");
  CHECK(defect([](OpInfo& i) { i.num_outputs = 0; }) == "op 'linear' (kind 1): no output count");
  CHECK(defect([](OpInfo& i) { i.name = ""; }) == "op '' (kind 1): no name");
  // A missing VJP rule is no defect: it marks the op not differentiable.
  CHECK(defect([](OpInfo& i) { i.vjp = nullptr; }) == "");
}

TEST_CASE("the fma chains of the contractions, from attributes and input shapes") {
  auto chain = [](OpKind kind, Attrs attrs, std::vector<Shape> in) {
    return op_info(kind).fma_chain(attrs, in);
  };
  CHECK(chain(OpKind::Linear, {}, {Shape{2, 7}, Shape{7, 3}, Shape{3}}) == 7);
  CHECK(chain(OpKind::Linear, {{1}, {}}, {Shape{2, 7}, Shape{3, 7}, Shape{3}}) == 7);  // w[N,K]
  CHECK(chain(OpKind::Matmul, {{0, 0}, {}}, {Shape{3, 5}, Shape{5, 4}}) == 5);
  CHECK(chain(OpKind::Matmul, {{1, 0}, {}}, {Shape{5, 3}, Shape{5, 4}}) == 5);
  CHECK(chain(OpKind::Matmul, {{1, 1}, {}}, {Shape{2, 6, 3}, Shape{2, 4, 6}}) == 6);
  CHECK(chain(OpKind::Conv2d, {{1, 0}, {}}, {Shape{2, 3, 8, 8}, Shape{4, 3, 2, 5}, Shape{4}}) == 30);
  CHECK(chain(OpKind::Conv2dBackwardInput, {{1, 0, 8, 8}, {}}, {Shape{4, 3, 2, 5}, Shape{2, 4, 7, 4}}) == 40);
  CHECK(chain(OpKind::Conv2dBackwardWeight, {{1, 0, 2, 5}, {}}, {Shape{2, 3, 8, 8}, Shape{2, 4, 7, 4}}) ==
        56);
  // The general form with 2 groups: w[4, 3, 2, 5] holds C/G = 3 channels, each group has O/G = 2
  // filters, so the input gradient's chain is 2·2·5 taps.
  const std::vector<int64_t> grouped{1, 1, 0, 0, 0, 0, 1, 1, 2};
  CHECK(chain(OpKind::Conv2d, {grouped, {}}, {Shape{2, 6, 8, 8}, Shape{4, 3, 2, 5}, Shape{4}}) == 30);
  std::vector<int64_t> back = grouped;
  back.insert(back.end(), {8, 8});
  CHECK(chain(OpKind::Conv2dBackwardInput, {back, {}}, {Shape{4, 3, 2, 5}, Shape{2, 4, 7, 4}}) == 20);
}

TEST_CASE("rounding_quanta fills exactly the ops whose descriptor has quanta") {
  std::mt19937 rng(5);
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    CAPTURE(std::string(op_name(kind)));
    const optest::OpTests* tests = optest::find_op_tests(kind);
    REQUIRE(tests != nullptr);
    const std::optional<optest::Case> c = tests->make(kind, rng, false, 0, false);
    REQUIRE(c.has_value());
    std::vector<const Tensor*> in;
    for (const Tensor& t : c->in) in.push_back(&t);
    std::vector<std::vector<double>> quanta(static_cast<size_t>(op_info(kind).num_outputs));
    const bool filled = rounding_quanta(kind, c->attrs, in, quanta, kDefaultRoundingQuantumBits);
    CHECK(filled == set(op_info(kind).quanta));
    if (filled) {
      std::vector<Shape> shapes;
      for (const Tensor& t : c->in) shapes.push_back(t.shape());
      CHECK(quanta[0].size() == static_cast<size_t>(infer_shapes(kind, c->attrs, shapes)[0].numel()));
    } else {
      CHECK(quanta[0].empty());
    }
  }
}
