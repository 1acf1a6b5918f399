// A part of an op (ops/op_part.h) computes a range of one output with the full op's bits, reading only
// the input ranges it names.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/op_part.h"
#include "ops/registry.h"
#include "ops/simd.h"

using namespace tribunal;

namespace {

/// The float's bits with every NaN as 0x7FC00000: what a tensor leaf hashes (docs/commitments.md).
uint32_t canon_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return (b & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : b;
}

struct Case {
  std::string what;
  OpKind kind;
  Attrs attrs;
  std::vector<Shape> shapes;
  bool part_smaller;  // some 16384-element chunk's part runs on less than all of input 0
};

std::vector<float> random_values(const Shape& s, std::mt19937& rng, bool positive) {
  std::uniform_real_distribution<float> u(positive ? 0.01f : -2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (float& x : v) x = u(rng);
  if (!positive && v.size() > 100) {  // signed zeros and a NaN: their bits must come through too
    v[7] = -0.0f;
    v[v.size() / 2] = 0.0f;
    v[v.size() - 3] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

std::vector<Case> cases() {
  const Attrs adamw{{3}, {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f}};
  return {
      {"add", OpKind::Add, {}, {Shape{300, 200}, Shape{300, 200}}, true},
      {"relu", OpKind::Relu, {}, {Shape{50000}}, true},
      {"relu_backward", OpKind::ReluBackward, {}, {Shape{250, 200}, Shape{250, 200}}, true},
      {"gelu", OpKind::Gelu, {}, {Shape{4, 97, 130}}, true},
      {"gelu_backward", OpKind::GeluBackward, {}, {Shape{97, 400}, Shape{97, 400}}, true},
      {"unary exp", OpKind::Unary, {{3}, {0.0f}}, {Shape{40001}}, true},
      {"unary pow", OpKind::Unary, {{10}, {2.5f}}, {Shape{200, 201}}, true},
      {"unary_backward tanh",
       OpKind::UnaryBackward,
       {{5}, {0.0f}},
       {Shape{33000}, Shape{33000}, Shape{33000}},
       true},
      {"sgd_momentum",
       OpKind::SgdMomentum,
       {{}, {0.01f, 0.9f, 0.01f}},
       {Shape{180, 200}, Shape{180, 200}, Shape{180, 200}},
       true},
      {"adamw", OpKind::AdamW, adamw, {Shape{768, 64}, Shape{768, 64}, Shape{768, 64}, Shape{768, 64}}, true},
      {"scale", OpKind::Scale, {}, {Shape{300, 170}, Shape{}}, true},
      {"reshape", OpKind::Reshape, {{170, 300}, {}}, {Shape{300, 170}}, true},
      {"linear", OpKind::Linear, {}, {Shape{70, 300}, Shape{300, 500}, Shape{500}}, true},
      {"linear trans_b", OpKind::Linear, {{1}, {}}, {Shape{70, 300}, Shape{500, 300}, Shape{500}}, true},
      {"matmul", OpKind::Matmul, {{0, 0}, {}}, {Shape{90, 130}, Shape{130, 700}}, true},
      {"matmul trans_b", OpKind::Matmul, {{0, 1}, {}}, {Shape{90, 130}, Shape{700, 130}}, true},
      {"matmul trans_a (a window of a's columns)",
       OpKind::Matmul,
       {{1, 0}, {}},
       {Shape{130, 90}, Shape{130, 700}},
       true},
      {"matmul trans_a trans_b", OpKind::Matmul, {{1, 1}, {}}, {Shape{130, 90}, Shape{700, 130}}, true},
      {"batched matmul", OpKind::Matmul, {{0, 0}, {}}, {Shape{6, 150, 40}, Shape{6, 40, 90}}, true},
      {"batched matmul trans_a", OpKind::Matmul, {{1, 1}, {}}, {Shape{6, 40, 150}, Shape{6, 90, 40}}, true},
      {"batched matmul, one batch element",
       OpKind::Matmul,
       {{0, 0}, {}},
       {Shape{2, 500, 64}, Shape{2, 64, 300}},
       true},
      {"layer_norm", OpKind::LayerNorm, {{}, {1e-5f}}, {Shape{100, 300}, Shape{300}, Shape{300}}, true},
      {"layer_norm_backward",
       OpKind::LayerNormBackward,
       {{}, {1e-5f}},
       {Shape{100, 300}, Shape{300}, Shape{100, 300}},
       true},
      {"softmax", OpKind::Softmax, {{0}, {0.125f}}, {Shape{4, 3, 60, 70}}, true},
      {"softmax causal", OpKind::Softmax, {{1}, {0.125f}}, {Shape{4, 3, 64, 64}}, true},
      {"softmax_backward causal",
       OpKind::SoftmaxBackward,
       {{1}, {0.125f}},
       {Shape{2, 6, 64, 64}, Shape{2, 6, 64, 64}},
       true},
      {"softmax rank 2", OpKind::Softmax, {{0}, {1.0f}}, {Shape{400, 100}}, true},
  };
}

/// Output `slot` of the full op, and each tested range's part run against it.
void check_case(const Case& c, ThreadPool& pool) {
  CAPTURE(c.what);
  std::mt19937 rng(17);
  std::vector<std::vector<float>> values;
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    // Any values but AdamW's second moment, which is never negative.
    const bool positive = c.kind == OpKind::AdamW && i == 3;
    values.push_back(random_values(c.shapes[i], rng, positive));
    inputs.emplace_back(c.shapes[i], values.back());
  }
  const std::vector<Shape> out_shapes = infer_shapes(c.kind, c.attrs, c.shapes);
  std::vector<Tensor> outputs;
  for (const Shape& s : out_shapes) outputs.emplace_back(s);
  std::vector<const Tensor*> in_ptrs;
  std::vector<Tensor*> out_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(&t);
  for (Tensor& t : outputs) out_ptrs.push_back(&t);
  run_fast(c.kind, c.attrs, in_ptrs, out_ptrs, pool);

  size_t parts = 0, smaller = 0;  // parts, and chunks' parts that run on less than all of input 0
  for (size_t slot = 0; slot < outputs.size(); ++slot) {
    const int64_t n = outputs[slot].numel();
    std::vector<ElementRange> ranges;
    for (int64_t a = 0; a < n; a += 16384) ranges.push_back({a, std::min(n, a + 16384)});  // the chunks
    ranges.push_back({0, 1});
    ranges.push_back({n - 1, n});
    ranges.push_back({n / 3, std::min(n, n / 3 + 1000)});
    ranges.push_back({0, n});
    for (const ElementRange r : ranges) {
      CAPTURE(slot);
      CAPTURE(r.first);
      CAPTURE(r.end);
      const std::optional<OpPart> part = op_part(c.kind, c.attrs, c.shapes, static_cast<int>(slot), r);
      if (!part) continue;
      ++parts;
      REQUIRE(part->inputs.size() == c.shapes.size());
      std::vector<std::span<const float>> slices;
      for (size_t i = 0; i < c.shapes.size(); ++i) {
        const ElementRange in = part->inputs[i];
        REQUIRE(0 <= in.first);
        REQUIRE(in.first < in.end);
        REQUIRE(in.end <= c.shapes[i].numel());
        slices.push_back(std::span<const float>(values[i]).subspan(static_cast<size_t>(in.first),
                                                                   static_cast<size_t>(in.size())));
      }
      if (r.size() == 16384 && part->shapes[0].numel() < c.shapes[0].numel()) ++smaller;
      const std::vector<float> got = run_part(c.kind, *part, slices, static_cast<int>(slot), r.size(), pool);
      REQUIRE(static_cast<int64_t>(got.size()) == r.size());
      const std::span<const float> want = outputs[slot].values();
      for (int64_t k = 0; k < r.size(); ++k)
        if (canon_bits(got[static_cast<size_t>(k)]) != canon_bits(want[static_cast<size_t>(r.first + k)]))
          FAIL("element " << r.first + k << ": part " << got[static_cast<size_t>(k)] << ", whole op "
                          << want[static_cast<size_t>(r.first + k)]);
    }
  }
  CHECK(parts > 0);
  if (c.part_smaller) CHECK(smaller > 0);
}

}  // namespace

TEST_CASE("a part of an op computes its output range with the whole op's bits, on every SIMD path") {
  ThreadPool pool(2);
  for (SimdPath path : available_simd_paths()) {
    const std::string path_name = simd_path_name(path);
    CAPTURE(path_name);
    const ScopedSimdPath scoped(path);
    for (const Case& c : cases()) check_case(c, pool);
  }
}

TEST_CASE("a part of an op: an output range or slot out of bounds, or inputs of other sizes, are refused") {
  const std::vector<Shape> linear{Shape{70, 300}, Shape{300, 500}, Shape{500}};
  CHECK_THROWS_WITH_AS(op_part(OpKind::Linear, {}, linear, 1, {0, 10}), doctest::Contains("no output 1"),
                       OpError);
  CHECK_THROWS_AS(op_part(OpKind::Linear, {}, linear, 0, {0, 35001}), OpError);
  CHECK_THROWS_AS(op_part(OpKind::Linear, {}, linear, 0, {10, 10}), OpError);
  CHECK_THROWS_AS(op_part(OpKind::Linear, {}, linear, 0, {-1, 10}), OpError);
  // dγ and dβ of layer_norm_backward sum over every row: no part.
  const std::vector<Shape> ln{Shape{100, 300}, Shape{300}, Shape{100, 300}};
  CHECK_FALSE(op_part(OpKind::LayerNormBackward, {{}, {1e-5f}}, ln, 1, {0, 10}).has_value());
  CHECK(op_part(OpKind::LayerNormBackward, {{}, {1e-5f}}, ln, 0, {0, 10}).has_value());
  // A reduction has none.
  CHECK_FALSE(op_part(OpKind::SumRows, {}, std::vector<Shape>{Shape{100, 300}}, 0, {0, 10}).has_value());

  ThreadPool pool(1);
  const std::optional<OpPart> part = op_part(OpKind::Linear, {}, linear, 0, {600, 700});
  REQUIRE(part.has_value());
  CHECK(part->inputs[0] == ElementRange{300, 600});  // row 1 of x (y's row 1: elements 500 to 999)
  CHECK(part->offset == 100);
  const std::vector<float> x(599), w(150000), b(500);
  const std::span<const float> short_x[] = {x, w, b};
  CHECK_THROWS_WITH_AS(run_part(OpKind::Linear, *part, short_x, 0, 100, pool),
                       doctest::Contains("599 elements"), OpError);
}
