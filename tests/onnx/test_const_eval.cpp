// Folding of constant ONNX nodes (onnx/const_eval.h): each op against values computed by hand from the
// ONNX operator specification, the refusals, and a cross-check against ONNX's own node tests
// (libonnx-testdata, tests/onnx/onnx_test_data.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "onnx/const_eval.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "tests/onnx/onnx_test_data.h"

namespace tribunal {
namespace {

using Dims = std::vector<int64_t>;
using Floats = std::vector<float>;

const std::string kWhere = "m.onnx: node 'n' (Op, opset 17): ";

OnnxConstant F(Dims dims, Floats v) {
  OnnxConstant c;
  c.type = OnnxConstant::Type::Float32;
  c.dims = std::move(dims);
  c.floats = std::move(v);
  return c;
}
OnnxConstant I(Dims dims, Dims v) {
  OnnxConstant c;
  c.type = OnnxConstant::Type::Int64;
  c.dims = std::move(dims);
  c.ints = std::move(v);
  return c;
}

OnnxAttribute attr_i(int64_t i) {
  OnnxAttribute a;
  a.kind = OnnxAttribute::Kind::Int;
  a.i = i;
  return a;
}
OnnxAttribute attr_ints(Dims v) {
  OnnxAttribute a;
  a.kind = OnnxAttribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
OnnxAttribute attr_tensor(OnnxConstant t) {
  OnnxAttribute a;
  a.kind = OnnxAttribute::Kind::Tensor;
  a.tensor = std::move(t);
  return a;
}

OnnxNode node(const std::string& op, size_t inputs, std::map<std::string, OnnxAttribute> attrs = {}) {
  OnnxNode n{.name = std::string("n"),
             .op_type = op,
             .inputs = {},
             .outputs = {"y"},
             .attributes = std::move(attrs)};
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back(fmt::format("x{}", i));
  return n;
}

// Folds `op` on `in` (a missing optional input as nullopt) and returns its one output.
OnnxConstant fold(const std::string& op, std::vector<std::optional<OnnxConstant>> in,
                  std::map<std::string, OnnxAttribute> attrs = {}, uint64_t max_elements = 1 << 20) {
  std::vector<const OnnxConstant*> ptrs;
  for (const auto& c : in) ptrs.push_back(c ? &*c : nullptr);
  const auto out = fold_constant(node(op, in.size(), std::move(attrs)), ptrs, 17, kWhere, max_elements);
  REQUIRE(out.size() == 1);
  return out[0];
}

void check_ints(const OnnxConstant& c, const Dims& dims, const Dims& values) {
  CHECK(c.type == OnnxConstant::Type::Int64);
  CHECK(c.dims == dims);
  CHECK(c.ints == values);
  CHECK(c.floats.empty());
}
void check_floats(const OnnxConstant& c, const Dims& dims, const Floats& values) {
  CHECK(c.type == OnnxConstant::Type::Float32);
  CHECK(c.dims == dims);
  REQUIRE(c.floats.size() == values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    INFO("element ", i);
    CHECK(std::memcmp(&c.floats[i], &values[i], sizeof(float)) == 0);  // bitwise
  }
  CHECK(c.ints.empty());
}

// The OnnxError `call` throws: its message, which must start with the node's `where`.
template <class Call>
std::string refusal(Call&& call) {
  try {
    call();
  } catch (const OnnxError& e) {
    const std::string msg = e.what();
    CHECK(msg.rfind(kWhere, 0) == 0);
    return msg;
  }
  FAIL("no OnnxError");
  return "";
}

const int64_t kMin = std::numeric_limits<int64_t>::min(), kMax = std::numeric_limits<int64_t>::max();

TEST_CASE("broadcast_dims follows ONNX multidirectional broadcasting") {
  CHECK(broadcast_dims(Dims{2, 3, 4}, Dims{4}, kWhere) == Dims{2, 3, 4});
  CHECK(broadcast_dims(Dims{2, 1, 4}, Dims{3, 1}, kWhere) == Dims{2, 3, 4});
  CHECK(broadcast_dims(Dims{}, Dims{5}, kWhere) == Dims{5});
  CHECK(broadcast_dims(Dims{0, 3}, Dims{1, 1}, kWhere) == Dims{0, 3});
  const std::string msg = refusal([] { broadcast_dims(Dims{2, 3}, Dims{3, 2}, kWhere); });
  CHECK(msg.find("[2, 3] and [3, 2] do not broadcast") != std::string::npos);
}

TEST_CASE("is_foldable lists exactly the folded ops") {
  for (const char* op : {"Constant",
                         "Shape",
                         "Gather",
                         "Unsqueeze",
                         "Squeeze",
                         "Concat",
                         "Cast",
                         "Reshape",
                         "Flatten",
                         "Identity",
                         "ConstantOfShape",
                         "Range",
                         "Slice",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Equal",
                         "Where",
                         "Expand",
                         "Transpose",
                         "Neg",
                         "Less",
                         "Greater",
                         "Not",
                         "Min",
                         "Max",
                         "Sqrt",
                         "Reciprocal",
                         "Exp",
                         "Log",
                         "Tanh",
                         "Erf",
                         "Sigmoid",
                         "Sin",
                         "Cos",
                         "Pow",
                         "MatMul"})
    CHECK_MESSAGE(is_foldable(op), op);
  for (const char* op : {"Gemm", "Softmax", "Split", "ReduceMean", "", "add"})
    CHECK_MESSAGE(!is_foldable(op), op);
  const std::string msg = refusal([] { fold("Gemm", {F({1}, {1}), F({1}, {1})}); });
  CHECK(msg.find("Gemm cannot be folded") != std::string::npos);
}

TEST_CASE("Add, Sub, Mul, Div broadcast; float32 is one IEEE operation per element") {
  const OnnxConstant a = F({2, 3}, {1, 2, 3, 4, 5, 6}), b = F({3}, {10, 20, 30});
  check_floats(fold("Add", {a, b}), {2, 3}, {11, 22, 33, 14, 25, 36});
  check_floats(fold("Sub", {b, a}), {2, 3}, {9, 18, 27, 6, 15, 24});
  check_floats(fold("Mul", {F({2, 1}, {2, -1}), b}), {2, 3}, {20, 40, 60, -10, -20, -30});
  check_floats(fold("Div", {F({}, {1}), F({2}, {3, 0})}), {2},
               {1.0f / 3.0f, std::numeric_limits<float>::infinity()});
  check_floats(fold("Add", {F({}, {0.1f}), F({}, {0.2f})}), {}, {0.1f + 0.2f});
  check_ints(fold("Add", {I({2}, {kMax - 1, -5}), I({}, {1})}), {2}, {kMax, -4});
  check_ints(fold("Mul", {I({2, 1}, {3, -2}), I({1, 2}, {4, 5})}), {2, 2}, {12, 15, -8, -10});
}

TEST_CASE("int64 Div truncates toward zero and refuses division by zero and overflow") {
  check_ints(fold("Div", {I({4}, {7, -7, 7, -7}), I({4}, {2, 2, -2, -2})}), {4}, {3, -3, -3, 3});
  CHECK(refusal([] {
          fold("Div", {I({2}, {1, 2}), I({2}, {1, 0})});
        }).find("division of 2 by zero") != std::string::npos);
  CHECK(refusal([] { fold("Div", {I({}, {kMin}), I({}, {-1})}); }).find("overflows") != std::string::npos);
  CHECK(refusal([] { fold("Add", {I({}, {kMax}), I({}, {1})}); }).find("overflows") != std::string::npos);
  CHECK(refusal([] {
          fold("Mul", {I({}, {kMax / 2 + 1}), I({}, {2})});
        }).find("overflows") != std::string::npos);
  CHECK(refusal([] { fold("Add", {I({}, {1}), F({}, {1})}); }).find("int64 and float") != std::string::npos);
  CHECK(refusal([] {
          fold("Add", {F({2}, {1, 2}), F({3}, {1, 2, 3})});
        }).find("do not broadcast") != std::string::npos);
}

TEST_CASE("Equal, Less, Greater give int64 0/1; NaN compares false") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const OnnxConstant a = F({4}, {1, 2, nan, -0.0f}), b = F({4}, {1, 3, nan, 0.0f});
  check_ints(fold("Equal", {a, b}), {4}, {1, 0, 0, 1});
  check_ints(fold("Less", {a, b}), {4}, {0, 1, 0, 0});
  check_ints(fold("Greater", {a, b}), {4}, {0, 0, 0, 0});
  check_ints(fold("Equal", {I({2, 2}, {1, 2, 3, 4}), I({2}, {1, 4})}), {2, 2}, {1, 0, 0, 1});
  check_ints(fold("Greater", {I({3}, {-1, 0, 1}), I({}, {0})}), {3}, {0, 0, 1});
}

TEST_CASE("Where and Expand broadcast") {
  check_floats(fold("Where", {I({2, 1}, {1, 0}), F({2}, {1, 2}), F({}, {9})}), {2, 2}, {1, 2, 9, 9});
  check_ints(fold("Where", {I({3}, {0, 5, -1}), I({3}, {1, 2, 3}), I({3}, {7, 8, 9})}), {3}, {7, 2, 3});
  CHECK(refusal([] {
          fold("Where", {F({1}, {1}), F({1}, {1}), F({1}, {2})});
        }).find("condition") != std::string::npos);
  check_ints(fold("Expand", {I({3, 1}, {1, 2, 3}), I({3}, {2, 1, 2})}), {2, 3, 2},
             {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  // The shape may be smaller than the input's: the result is the broadcast of both.
  check_floats(fold("Expand", {F({2, 1}, {5, 6}), I({1}, {3})}), {2, 3}, {5, 5, 5, 6, 6, 6});
  CHECK(refusal([] {
          fold("Expand", {F({2}, {1, 2}), I({1}, {3})});
        }).find("do not broadcast") != std::string::npos);
}

TEST_CASE("Transpose: perm, and the axes reversed by default") {
  check_floats(fold("Transpose", {F({2, 3}, {0, 1, 2, 3, 4, 5})}), {3, 2}, {0, 3, 1, 4, 2, 5});
  // [2, 2, 3] with perm (1, 2, 0): out[j][k][i] = in[i][j][k].
  const OnnxConstant x = I({2, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  check_ints(fold("Transpose", {x}, {{"perm", attr_ints({1, 2, 0})}}), {2, 3, 2},
             {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11});
  CHECK(refusal([&] {
          fold("Transpose", {x}, {{"perm", attr_ints({0, 0, 1})}});
        }).find("given twice") != std::string::npos);
  CHECK(refusal([&] {
          fold("Transpose", {x}, {{"perm", attr_ints({0, 1})}});
        }).find("perm must list 3") != std::string::npos);
}

TEST_CASE("Neg, Not, Sqrt, Min, Max") {
  check_floats(fold("Neg", {F({3}, {1, -2, 0})}), {3}, {-1, 2, -0.0f});
  check_ints(fold("Neg", {I({2}, {5, kMax})}), {2}, {-5, -kMax});
  CHECK(refusal([] { fold("Neg", {I({1}, {kMin})}); }).find("overflows") != std::string::npos);
  check_ints(fold("Not", {I({3}, {0, 1, 0})}), {3}, {1, 0, 1});
  CHECK(refusal([] { fold("Not", {F({1}, {1})}); }).find("must be int64") != std::string::npos);
  const OnnxConstant s = fold("Sqrt", {F({3}, {4, 2, -1})});
  check_floats(OnnxConstant{s.type, s.dims, {s.floats[0], s.floats[1]}, {}}, {3},
               {2, 1.41421353816986083984375f});
  CHECK(std::isnan(s.floats[2]));
  CHECK(refusal([] { fold("Sqrt", {I({1}, {4})}); }).find("must be float") != std::string::npos);
  check_floats(fold("Max", {F({3}, {1, 5, 3}), F({}, {2}), F({1, 3}, {0, 0, 4})}), {1, 3}, {2, 5, 4});
  check_ints(fold("Min", {I({2}, {4, -7}), I({2, 1}, {5, 0})}), {2, 2}, {4, -7, 0, -7});
  const OnnxConstant nan_max =
      fold("Max", {F({2}, {1, std::numeric_limits<float>::quiet_NaN()}), F({2}, {std::nanf(""), 0})});
  CHECK(std::isnan(nan_max.floats[0]));
  CHECK(std::isnan(nan_max.floats[1]));
  check_ints(fold("Min", {I({1}, {3})}), {1}, {3});
}

TEST_CASE("Cast truncates toward zero and refuses what ONNX leaves undefined") {
  const OnnxConstant x = F({5}, {2.7f, -2.7f, -0.5f, 1e10f, -9.2233720e18f});
  check_ints(fold("Cast", {x}, {{"to", attr_i(7)}}), {5}, {2, -2, 0, 10000000000, -9223372036854775807 - 1});
  check_ints(fold("Cast", {F({3}, {2147483647.0f / 2, -2147483648.0f, 3.9f})}, {{"to", attr_i(6)}}), {3},
             {1073741824, -2147483648LL, 3});
  check_ints(fold("Cast", {F({4}, {0, -0.0f, 0.25f, std::nanf("")})}, {{"to", attr_i(9)}}), {4},
             {0, 0, 1, 1});
  check_ints(fold("Cast", {I({3}, {0, -3, 1})}, {{"to", attr_i(9)}}), {3}, {0, 1, 1});
  check_floats(fold("Cast", {I({3}, {16777217, -3, 1})}, {{"to", attr_i(1)}}), {3}, {16777216.0f, -3, 1});
  check_ints(fold("Cast", {I({2}, {kMin, 7})}, {{"to", attr_i(7)}}), {2}, {kMin, 7});
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(), 9.3e18f}) {
    CAPTURE(bad);
    CHECK(refusal([&] {
            fold("Cast", {F({1}, {bad})}, {{"to", attr_i(7)}});
          }).find("Cast of") != std::string::npos);
  }
  CHECK(refusal([] {
          fold("Cast", {F({1}, {3e9f})}, {{"to", attr_i(6)}});
        }).find("int32") != std::string::npos);
  CHECK(refusal([] {
          fold("Cast", {I({1}, {1LL << 40})}, {{"to", attr_i(6)}});
        }).find("out of range") != std::string::npos);
  CHECK(refusal([] {
          fold("Cast", {F({1}, {1})}, {{"to", attr_i(10)}});
        }).find("type 10") != std::string::npos);
  CHECK(refusal([] { fold("Cast", {F({1}, {1})}); }).find("'to' is required") != std::string::npos);
}

TEST_CASE("Constant: value, value_float(s), value_int(s); strings refused") {
  check_floats(fold("Constant", {}, {{"value", attr_tensor(F({2}, {1.5f, 2}))}}), {2}, {1.5f, 2});
  OnnxAttribute f;
  f.kind = OnnxAttribute::Kind::Float;
  f.f = 0.25f;
  check_floats(fold("Constant", {}, {{"value_float", f}}), {}, {0.25f});
  OnnxAttribute fs;
  fs.kind = OnnxAttribute::Kind::Floats;
  fs.floats = {1, 2, 3};
  check_floats(fold("Constant", {}, {{"value_floats", fs}}), {3}, {1, 2, 3});
  check_ints(fold("Constant", {}, {{"value_int", attr_i(-4)}}), {}, {-4});
  check_ints(fold("Constant", {}, {{"value_ints", attr_ints({4, 5})}}), {2}, {4, 5});
  OnnxAttribute s;
  s.kind = OnnxAttribute::Kind::String;
  s.s = "x";
  CHECK(refusal([&] {
          fold("Constant", {}, {{"value_string", s}});
        }).find("'value_string' is not supported") != std::string::npos);
  CHECK(refusal([] {
          fold("Constant", {}, {{"value_int", attr_i(1)}, {"value_ints", attr_ints({1})}});
        }).find("exactly one") != std::string::npos);
  CHECK(refusal([] {
          fold("Constant", {}, {{"value_int", attr_ints({1})}});
        }).find("wrong kind") != std::string::npos);
  CHECK(refusal([] {
          fold("Constant", {}, {{"value_ints", attr_ints({1, 2, 3})}}, 2);
        }).find("more than 2 elements") != std::string::npos);
}

TEST_CASE("fold_shape: start and end counted from the end and clamped (opset 15)") {
  const Dims x{2, 3, 4};
  auto shape = [&](std::map<std::string, OnnxAttribute> attrs) {
    return fold_shape(node("Shape", 1, std::move(attrs)), x, kWhere);
  };
  check_ints(shape({}), {3}, {2, 3, 4});
  check_ints(shape({{"start", attr_i(-1)}}), {1}, {4});
  check_ints(shape({{"end", attr_i(-1)}}), {2}, {2, 3});
  check_ints(shape({{"start", attr_i(1)}, {"end", attr_i(2)}}), {1}, {3});
  check_ints(shape({{"start", attr_i(-10)}, {"end", attr_i(10)}}), {3}, {2, 3, 4});
  check_ints(shape({{"start", attr_i(2)}, {"end", attr_i(1)}}), {0}, {});
  check_ints(fold_shape(node("Shape", 1), Dims{}, kWhere), {0}, {});
  check_ints(fold("Shape", {F({2, 1}, {1, 2})}), {2}, {2, 1});
}

TEST_CASE("Gather: axis, negative indices, int and float data") {
  // The specification's axis-0 example.
  check_floats(fold("Gather", {F({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f}), I({2, 2}, {0, 1, 1, 2})}),
               {2, 2, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f});
  // Its axis-1 example, with -1 for index 2.
  check_floats(
      fold("Gather", {F({3, 3}, {1.0f, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f}), I({1, 2}, {0, -1})},
           {{"axis", attr_i(1)}}),
      {3, 1, 2}, {1.0f, 1.9f, 2.3f, 3.9f, 4.5f, 5.9f});
  check_ints(fold("Gather", {I({3}, {7, 8, 9}), I({}, {-3})}), {}, {7});
  check_ints(fold("Gather", {I({2, 2}, {1, 2, 3, 4}), I({1}, {1})}, {{"axis", attr_i(-2)}}), {1, 2}, {3, 4});
  CHECK(refusal([] {
          fold("Gather", {I({3}, {7, 8, 9}), I({1}, {3})});
        }).find("index 3 is out of range") != std::string::npos);
  CHECK(refusal([] {
          fold("Gather", {I({3}, {7, 8, 9}), I({1}, {-4})});
        }).find("index -4") != std::string::npos);
  CHECK(refusal([] {
          fold("Gather", {I({3}, {7, 8, 9}), F({1}, {0})});
        }).find("indices") != std::string::npos);
  CHECK(refusal([] {
          fold("Gather", {I({3}, {7, 8, 9}), I({1}, {0})}, {{"axis", attr_i(1)}});
        }).find("axis 1 is out of range for rank 1") != std::string::npos);
}

TEST_CASE("Unsqueeze and Squeeze take their axes as an input") {
  const OnnxConstant x = F({3, 4, 5}, Floats(60, 1.0f));
  CHECK(fold("Unsqueeze", {x, I({2}, {0, 4})}).dims == Dims{1, 3, 4, 5, 1});
  CHECK(fold("Unsqueeze", {x, I({2}, {4, 0})}).dims == Dims{1, 3, 4, 5, 1});
  CHECK(fold("Unsqueeze", {x, I({1}, {-1})}).dims == Dims{3, 4, 5, 1});
  check_ints(fold("Unsqueeze", {I({}, {7}), I({1}, {0})}), {1}, {7});
  CHECK(refusal([&] { fold("Unsqueeze", {x, I({2}, {1, 1})}); }).find("given twice") != std::string::npos);
  CHECK(refusal([&] {
          fold("Unsqueeze", {x, I({1}, {4})});
        }).find("axis 4 is out of range for rank 4") != std::string::npos);
  CHECK(refusal([&] { fold("Unsqueeze", {x}); }).find("takes 2 inputs, the node has 1") != std::string::npos);
  const OnnxConstant y = I({1, 3, 1, 2}, {1, 2, 3, 4, 5, 6});
  check_ints(fold("Squeeze", {y}), {3, 2}, {1, 2, 3, 4, 5, 6});
  check_ints(fold("Squeeze", {y, I({1}, {-2})}), {1, 3, 2}, {1, 2, 3, 4, 5, 6});
  check_ints(fold("Squeeze", {y, std::nullopt}), {3, 2}, {1, 2, 3, 4, 5, 6});
  CHECK(refusal([&] {
          fold("Squeeze", {y, I({1}, {1})});
        }).find("cannot squeeze axis 1 of extent 3") != std::string::npos);
}

TEST_CASE("Concat along an axis, negative counted from the end") {
  check_floats(fold("Concat", {F({2, 1}, {1, 2}), F({2, 2}, {3, 4, 5, 6})}, {{"axis", attr_i(-1)}}), {2, 3},
               {1, 3, 4, 2, 5, 6});
  check_ints(fold("Concat", {I({1}, {1}), I({0}, {}), I({2}, {2, 3})}, {{"axis", attr_i(0)}}), {3},
             {1, 2, 3});
  CHECK(refusal([] {
          fold("Concat", {F({2, 1}, {1, 2}), F({1, 2}, {3, 4})}, {{"axis", attr_i(0)}});
        }).find("input 1's shape") != std::string::npos);
  CHECK(refusal([] {
          fold("Concat", {F({1}, {1}), F({1}, {2})}, {{"axis", attr_i(1)}});
        }).find("axis 1 is out of range for rank 1") != std::string::npos);
  CHECK(refusal([] {
          fold("Concat", {F({1}, {1}), I({1}, {2})}, {{"axis", attr_i(0)}});
        }).find("must agree") != std::string::npos);
}

TEST_CASE("Reshape: 0 copies, -1 infers, allowzero keeps a literal 0") {
  const OnnxConstant x = I({2, 3, 4}, Dims(24, 5));
  CHECK(fold("Reshape", {x, I({2}, {0, -1})}).dims == Dims{2, 12});
  CHECK(fold("Reshape", {x, I({1}, {-1})}).dims == Dims{24});
  CHECK(fold("Reshape", {x, I({4}, {0, 0, 2, -1})}).dims == Dims{2, 3, 2, 2});
  check_ints(fold("Reshape", {I({1, 1}, {9}), I({0}, {})}), {}, {9});
  const OnnxConstant empty = F({0, 3}, {});
  CHECK(fold("Reshape", {empty, I({2}, {3, 0})}, {{"allowzero", attr_i(1)}}).dims == Dims{3, 0});
  CHECK(fold("Reshape", {empty, I({2}, {0, 3})}).dims == Dims{0, 3});
  CHECK(refusal([&] {
          fold("Reshape", {empty, I({2}, {3, 0})});
        }).find("cannot reshape 0 elements to 9") != std::string::npos);
  CHECK(refusal([&] {
          fold("Reshape", {x, I({2}, {-1, -1})});
        }).find("more than one -1") != std::string::npos);
  CHECK(refusal([&] { fold("Reshape", {x, I({2}, {5, -1})}); }).find("do not divide") != std::string::npos);
  CHECK(refusal([&] {
          fold("Reshape", {x, I({2}, {0, -1})}, {{"allowzero", attr_i(1)}});
        }).find("both 0 and -1") != std::string::npos);
  CHECK(refusal([&] {
          fold("Reshape", {x, I({4}, {1, 1, 1, 0})});
        }).find("rank-3 input") != std::string::npos);
  CHECK(refusal([&] { fold("Reshape", {x, I({2}, {-2, -12})}); }).find("is negative") != std::string::npos);
}

TEST_CASE("Flatten, Identity") {
  const OnnxConstant x = F({2, 3, 4}, Floats(24, 0.5f));
  CHECK(fold("Flatten", {x}).dims == Dims{2, 12});
  CHECK(fold("Flatten", {x}, {{"axis", attr_i(0)}}).dims == Dims{1, 24});
  CHECK(fold("Flatten", {x}, {{"axis", attr_i(-1)}}).dims == Dims{6, 4});
  CHECK(fold("Flatten", {x}, {{"axis", attr_i(3)}}).dims == Dims{24, 1});
  CHECK(refusal([&] {
          fold("Flatten", {x}, {{"axis", attr_i(4)}});
        }).find("axis 4 is out of range") != std::string::npos);
  check_ints(fold("Identity", {I({2}, {3, 4})}), {2}, {3, 4});
}

TEST_CASE("ConstantOfShape: float 0 by default, or the value attribute") {
  check_floats(fold("ConstantOfShape", {I({2}, {2, 3})}), {2, 3}, Floats(6, 0.0f));
  check_ints(fold("ConstantOfShape", {I({1}, {3})}, {{"value", attr_tensor(I({1}, {7}))}}), {3}, {7, 7, 7});
  check_floats(fold("ConstantOfShape", {I({0}, {})}, {{"value", attr_tensor(F({1}, {1.5f}))}}), {}, {1.5f});
  check_ints(fold("ConstantOfShape", {I({2}, {0, 4})}, {{"value", attr_tensor(I({1}, {1}))}}), {0, 4}, {});
  CHECK(refusal([] {
          fold("ConstantOfShape", {I({2}, {1000, 1001})}, {}, 1000000);
        }).find("more than 1000000 elements") != std::string::npos);
  CHECK(refusal([] {
          fold("ConstantOfShape", {I({2}, {kMax, kMax})});
        }).find("more than") != std::string::npos);
  CHECK(refusal([] { fold("ConstantOfShape", {I({1}, {-1})}); }).find("negative dimension -1") !=
        std::string::npos);
  CHECK(refusal([] {
          fold("ConstantOfShape", {I({1}, {2})}, {{"value", attr_tensor(I({2}, {1, 2}))}});
        }).find("one element") != std::string::npos);
}

TEST_CASE("Range: int64 exact, float32 start + i*delta") {
  check_ints(fold("Range", {I({}, {3}), I({}, {9}), I({}, {3})}), {2}, {3, 6});
  check_ints(fold("Range", {I({}, {10}), I({}, {4}), I({}, {-2})}), {3}, {10, 8, 6});
  check_ints(fold("Range", {I({}, {0}), I({}, {0}), I({}, {1})}), {0}, {});
  check_ints(fold("Range", {I({}, {5}), I({}, {0}), I({}, {1})}), {0}, {});
  check_ints(fold("Range", {I({}, {kMin}), I({}, {kMax}), I({}, {kMax})}), {3}, {kMin, -1, kMax - 1});
  check_floats(fold("Range", {F({}, {1}), F({}, {5}), F({}, {2})}), {2}, {1, 3});
  // 0.5 + i*0.1f: n = ceil((3 - 0.5) / 0.1f) = ceil(24.9999996...) = 25. Each element is computed here
  // in double, where i*0.1f and the sum of two floats are exact, then rounded once to float — the
  // same as two rounded float32 operations.
  const float delta = 0.1f;
  const OnnxConstant r = fold("Range", {F({}, {0.5f}), F({}, {3.0f}), F({}, {delta})});
  Floats expected;
  for (int i = 0; i < 25; ++i) {
    const float step = static_cast<float>(static_cast<double>(i) * static_cast<double>(delta));
    expected.push_back(static_cast<float>(0.5 + static_cast<double>(step)));
  }
  check_floats(r, {25}, expected);
  CHECK(r.floats[3] == 0.80000001192092896f);
  CHECK(refusal([] {
          fold("Range", {I({}, {0}), I({}, {5}), I({}, {0})});
        }).find("delta is 0") != std::string::npos);
  CHECK(refusal([] {
          fold("Range", {F({}, {0}), F({}, {1}), F({}, {0})});
        }).find("undefined") != std::string::npos);
  CHECK(refusal([] {
          fold("Range", {I({}, {0}), I({}, {kMax}), I({}, {1})});
        }).find("more than") != std::string::npos);
  CHECK(refusal([] {
          fold("Range", {F({}, {0}), F({}, {1e30f}), F({}, {1})});
        }).find("more than") != std::string::npos);
  CHECK(refusal([] {
          fold("Range", {I({1}, {0}), I({}, {5}), I({}, {1})});
        }).find("scalars") != std::string::npos);
}

TEST_CASE("Slice: negative and clamped starts and ends, negative steps") {
  const OnnxConstant x = I({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  // The specification's two examples.
  check_ints(fold("Slice", {x, I({2}, {1, 0}), I({2}, {2, 3}), I({2}, {0, 1}), I({2}, {1, 2})}), {1, 2},
             {5, 7});
  check_ints(fold("Slice", {x, I({2}, {0, 1}), I({2}, {-1, 1000})}), {1, 3}, {2, 3, 4});
  // Reversed along axis 1: start clamped to extent - 1, end INT64_MIN clamped to -1.
  check_ints(fold("Slice", {x, I({1}, {kMax}), I({1}, {kMin}), I({1}, {-1}), I({1}, {-1})}), {2, 4},
             {4, 3, 2, 1, 8, 7, 6, 5});
  check_ints(fold("Slice", {x, I({1}, {10}), I({1}, {0}), I({1}, {1}), I({1}, {-2})}), {2, 2}, {4, 2, 8, 6});
  check_ints(fold("Slice", {x, I({1}, {-1}), I({1}, {-3}), I({1}, {1}), I({1}, {-1})}), {2, 2}, {4, 3, 8, 7});
  check_ints(fold("Slice", {x, I({1}, {-1}), I({1}, {kMax}), I({1}, {-2}), std::nullopt}), {1, 4},
             {5, 6, 7, 8});
  check_ints(fold("Slice", {x, I({1}, {5}), I({1}, {10}), I({1}, {1})}), {2, 0}, {});  // start past the end
  check_ints(fold("Slice", {x, I({1}, {2}), I({1}, {1}), I({1}, {1})}), {2, 0}, {});   // end before start
  check_floats(fold("Slice", {F({5}, {0, 1, 2, 3, 4}), I({1}, {1}), I({1}, {5}), I({1}, {0}), I({1}, {3})}),
               {2}, {1, 4});
  CHECK(refusal([&] {
          fold("Slice", {x, I({1}, {0}), I({1}, {1}), I({1}, {0}), I({1}, {0})});
        }).find("step") != std::string::npos);
  CHECK(refusal([&] {
          fold("Slice", {x, I({1}, {0}), I({1}, {1}), I({1}, {2})});
        }).find("axis 2 is out of range") != std::string::npos);
  CHECK(refusal([&] {
          fold("Slice", {x, I({1}, {0}), I({2}, {1, 1})});
        }).find("same length") != std::string::npos);
}

TEST_CASE("the shape subgraph torch exports for x.view(B, T, 2, C / 2) folds to the target shape") {
  // x: [B=2, T=3, C=4]. torch 1.13 emits Shape → Gather(scalar index) → Unsqueeze(axes {0}) per dimension,
  // Constants for the literal ones, Concat(axis 0), Reshape.
  const OnnxConstant x = F({2, 3, 4}, Floats(24, 1.0f));
  const OnnxConstant shape = fold("Shape", {x});
  const OnnxConstant b = fold("Gather", {shape, I({}, {0})}, {{"axis", attr_i(0)}});
  const OnnxConstant t = fold("Gather", {shape, I({}, {1})}, {{"axis", attr_i(0)}});
  check_ints(b, {}, {2});
  const OnnxConstant b1 = fold("Unsqueeze", {b, I({1}, {0})}), t1 = fold("Unsqueeze", {t, I({1}, {0})});
  const OnnxConstant two = fold("Constant", {}, {{"value", attr_tensor(I({1}, {2}))}});
  const OnnxConstant c = fold("Gather", {shape, I({}, {2})});
  const OnnxConstant half = fold("Div", {c, fold("Constant", {}, {{"value", attr_tensor(I({}, {2}))}})});
  const OnnxConstant target =
      fold("Concat", {b1, t1, two, fold("Unsqueeze", {half, I({1}, {0})})}, {{"axis", attr_i(0)}});
  check_ints(target, {4}, {2, 3, 2, 2});
  CHECK(fold("Reshape", {x, target}).dims == Dims{2, 3, 2, 2});
}

TEST_CASE("refusals: input counts, missing inputs, result size") {
  CHECK(refusal([] { fold("Add", {F({1}, {1})}); }).find("takes 2 inputs, the node has 1") !=
        std::string::npos);
  CHECK(refusal([] {
          fold("Add", {F({1}, {1}), std::nullopt});
        }).find("input 1 is required") != std::string::npos);
  CHECK(refusal([] {
          fold("Expand", {F({1}, {1}), I({2}, {10, 11})}, {}, 100);
        }).find("more than 100 elements") != std::string::npos);
  CHECK(refusal([] {
          fold("Reshape", {F({1}, {1}), I({2, 1}, {1, 1})});
        }).find("must be 1-D") != std::string::npos);
  OnnxNode two_outputs = node("Identity", 1);
  two_outputs.outputs.push_back("z");
  const OnnxConstant one = F({1}, {1});
  const OnnxConstant* in[] = {&one};
  CHECK(refusal([&] { fold_constant(two_outputs, in, 17, kWhere, 100); }).find("has 2 outputs") !=
        std::string::npos);
}

// ---- ONNX's own node tests -----------------------------------------------------------------------

// Runs the node test `name` through fold_constant and compares every output bitwise (these ops are
// exact, so bitwise is the tolerance); returns the data sets checked.
int run_node_test(const std::string& name) {
  const auto dir = testing::kOnnxNodeTests / name;
  // Opsets below 13 only for the tests stamped with their op's version, unchanged through opset 17
  // (ConstantOfShape 9, Range 11, Not 1).
  OnnxLimits limits;
  limits.min_opset = 1;
  const OnnxModel model = testing::read_node_test_model(dir, limits);
  if (model.opset() < 13) {
    const std::string& op = model.nodes().at(0).op_type;
    REQUIRE((op == "ConstantOfShape" || op == "Range" || op == "Not"));
  }
  REQUIRE(model.nodes().size() == 1);
  const OnnxNode& n = model.nodes()[0];
  int sets = 0;
  for (const auto& set : testing::list_node_test(dir)) {
    std::map<std::string, OnnxConstant> values = model.initializers();
    for (size_t k = 0; k < set.inputs.size(); ++k) {
      auto t = testing::read_tensor_pb(set.inputs[k]);
      REQUIRE(t);
      values[model.inputs().at(k).name] = t->value;
    }
    std::vector<const OnnxConstant*> in;
    for (const auto& i : n.inputs) in.push_back(i.empty() ? nullptr : &values.at(i));
    const auto out = fold_constant(n, in, model.opset(), model.where(n), 1 << 20);
    REQUIRE(out.size() == set.outputs.size());
    for (size_t k = 0; k < out.size(); ++k) {
      auto want = testing::read_tensor_pb(set.outputs[k]);
      REQUIRE(want);
      CAPTURE(set.outputs[k].string());
      CHECK(out[k].type == want->value.type);
      CHECK(out[k].dims == want->value.dims);
      CHECK(out[k].ints == want->value.ints);
      REQUIRE(out[k].floats.size() == want->value.floats.size());
      for (size_t i = 0; i < out[k].floats.size(); ++i) {
        const float a = out[k].floats[i], b = want->value.floats[i];
        CHECK((std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b))));
      }
    }
    ++sets;
  }
  return sets;
}

TEST_CASE("ONNX's node tests (libonnx-testdata) of the folded ops") {
  if (!std::filesystem::is_directory(testing::kOnnxNodeTests)) {
    MESSAGE("libonnx-testdata is not installed: skipped");  // scripts/bootstrap.sh installs it
    return;
  }
  const char* tests[] = {
      "test_add",
      "test_add_bcast",
      "test_sub_bcast",
      "test_mul_bcast",
      "test_div",
      "test_div_bcast",
      "test_div_example",
      "test_equal_bcast",
      "test_less_bcast",
      "test_greater_bcast",
      "test_where_example",
      "test_where_long_example",
      "test_expand_dim_changed",
      "test_expand_dim_unchanged",
      "test_transpose_default",
      "test_transpose_all_permutations_4",
      "test_neg",
      "test_not_3d",
      "test_sqrt",
      "test_sqrt_example",
      "test_min_two_inputs",
      "test_max_example",
      "test_max_int64",
      "test_constant",
      "test_constantofshape_float_ones",
      "test_constantofshape_int_zeros",
      "test_constantofshape_int_shape_zero",
      "test_shape",
      "test_shape_clip_start",
      "test_shape_clip_end",
      "test_shape_start_1_end_negative_1",
      "test_shape_start_negative_1",
      "test_gather_0",
      "test_gather_1",
      "test_gather_2d_indices",
      "test_gather_negative_indices",
      "test_unsqueeze_negative_axes",
      "test_unsqueeze_three_axes",
      "test_unsqueeze_unsorted_axes",
      "test_squeeze",
      "test_squeeze_negative_axes",
      "test_concat_3d_axis_negative_2",
      "test_concat_2d_axis_1",
      "test_reshape_allowzero_reordered",
      "test_reshape_negative_extended_dims",
      "test_reshape_zero_and_negative_dim",
      "test_reshape_reordered_all_dims",
      "test_flatten_negative_axis1",
      "test_flatten_axis0",
      "test_identity",
      "test_range_float_type_positive_delta",
      "test_range_int32_type_negative_delta",
      "test_slice",
      "test_slice_default_axes",
      "test_slice_default_steps",
      "test_slice_end_out_of_bounds",
      "test_slice_neg",
      "test_slice_neg_steps",
      "test_slice_negative_axes",
      "test_slice_start_out_of_bounds",
  };
  for (const std::string name : tests) {
    CAPTURE(name);
    CHECK(run_node_test(name) >= 1);
  }
}

}  // namespace

namespace {

/// The run-time op's output on `in` (RepOps reference kernel), to compare a fold against bit for bit.
Floats run_op(OpKind kind, Attrs attrs, std::vector<Tensor> in) {
  std::vector<Shape> shapes;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : in) {
    shapes.push_back(t.shape());
    ptrs.push_back(&t);
  }
  Tensor y(infer_shapes(kind, attrs, shapes).at(0));
  Tensor* out[] = {&y};
  run_reference(kind, attrs, ptrs, out);
  return Floats(y.values().begin(), y.values().end());
}

}  // namespace

TEST_CASE("float functions fold to the run-time unary op's bits; hand values") {
  // Rotary tables' values and where the functions branch: ±0, ±inf, NaN, a subnormal, large arguments.
  const Floats x{0.0f, -0.0f, 0.5f, -1.25f, 3.0f, 100.0f, 1e-40f, INFINITY, -INFINITY, NAN, 12345.678f};
  const Dims d{static_cast<int64_t>(x.size())};
  const std::pair<const char*, int64_t> fns[] = {{"Reciprocal", 1}, {"Sqrt", 2}, {"Exp", 3},
                                                 {"Log", 4},        {"Tanh", 5}, {"Erf", 6},
                                                 {"Sigmoid", 7},    {"Sin", 8},  {"Cos", 9}};
  for (const auto& [op, code] : fns) {
    CAPTURE(op);
    check_floats(fold(op, {F(d, x)}), d, run_op(OpKind::Unary, {{code}, {0.0f}}, {Tensor(Shape{d[0]}, x)}));
  }
  check_floats(fold("Sin", {F({2}, {0, -0.0f})}), {2}, {0, -0.0f});
  check_floats(fold("Cos", {F({1}, {0})}), {1}, {1});
  check_floats(fold("Exp", {F({1}, {0})}), {1}, {1});
  check_floats(fold("Reciprocal", {F({2}, {4, -0.0f})}), {2}, {0.25f, -INFINITY});
  check_floats(fold("Sqrt", {F({2}, {9, -0.0f})}), {2}, {3, -0.0f});
  const std::string msg = refusal([] { fold("Sin", {I({1}, {1})}); });
  CHECK(msg.find("must be float") != std::string::npos);
}

TEST_CASE("Pow folds broadcast base and exponent with the run-time pow's pow32") {
  // Rotary's inverse frequencies: base^(−2i/d), a scalar base and a vector of exponents.
  const Floats p{0.0f, -0.25f, -0.5f, -0.75f};
  const OnnxConstant inv = fold("Pow", {F({}, {10000.0f}), F({4}, p)});
  REQUIRE(inv.dims == Dims{4});
  for (size_t i = 0; i < p.size(); ++i) {
    const Floats want = run_op(OpKind::Unary, {{10}, {p[i]}}, {Tensor(Shape{}, Floats{10000.0f})});
    CHECK(std::memcmp(&inv.floats[i], want.data(), sizeof(float)) == 0);
  }
  CHECK(inv.floats[0] == 1.0f);
  check_floats(fold("Pow", {F({2, 1}, {2, -3}), I({2}, {3, 2})}), {2, 2}, {8, 4, -27, 9});
  const std::string msg = refusal([] { fold("Pow", {I({1}, {2}), I({1}, {2})}); });
  CHECK(msg.find("an int64 base is not supported") != std::string::npos);
}

TEST_CASE("MatMul of 2-D constants folds to the run-time matmul's bits (one fma chain per element)") {
  check_floats(fold("MatMul", {F({2, 2}, {1, 2, 3, 4}), F({2, 3}, {5, 6, 7, 8, 9, 10})}), {2, 3},
               {21, 24, 27, 47, 54, 61});
  // Positions × inverse frequencies of a rotary table, against matmul's reference kernel bit for bit.
  Floats a(7 * 13), b(13 * 5);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<float>(i) * 0.37f) * 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(static_cast<float>(i) * 0.11f) / 7.0f;
  check_floats(fold("MatMul", {F({7, 13}, a), F({13, 5}, b)}), {7, 5},
               run_op(OpKind::Matmul, {{0, 0}, {}}, {Tensor(Shape{7, 13}, a), Tensor(Shape{13, 5}, b)}));
  CHECK(refusal([] {
          fold("MatMul", {F({2, 2, 2}, Floats(8, 1.0f)), F({2, 2}, {1, 2, 3, 4})});
        }).find("2-D [M, K]·[K, N] only") != std::string::npos);
  CHECK(refusal([] {
          fold("MatMul", {F({2, 3}, Floats(6, 1.0f)), F({2, 2}, {1, 2, 3, 4})});
        }).find("2-D [M, K]·[K, N] only") != std::string::npos);
}
}  // namespace tribunal
