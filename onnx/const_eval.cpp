// Folding of constant ONNX nodes (onnx/const_eval.h): each op evaluated on the host exactly as the ONNX
// operator specification (Operators.md, opsets 13–17) defines it, in integer arithmetic, element copies or
// one IEEE-754 float32 operation per element. Wherever the specification leaves a result undefined
// (integer overflow, float-to-integer conversion of NaN or an out-of-range value, division by zero) the
// fold refuses the model rather than pick a platform's answer.
#include "onnx/const_eval.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <string_view>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/unary.h"

namespace tribunal {
namespace {

using Type = OnnxConstant::Type;
using Dims = std::vector<int64_t>;

// TensorProto.DataType codes that Cast's `to` may name (onnx.proto).
constexpr int64_t kFloat = 1, kInt32 = 6, kInt64 = 7, kBool = 9;

const char* type_name(Type t) {
  return t == Type::Float32 ? "float" : "int64";
}

template <class T>
constexpr Type type_of() {
  return std::is_same_v<T, float> ? Type::Float32 : Type::Int64;
}

template <class T>
std::vector<T>& values(OnnxConstant& c) {
  if constexpr (std::is_same_v<T, float>)
    return c.floats;
  else
    return c.ints;
}
template <class T>
const std::vector<T>& values(const OnnxConstant& c) {
  if constexpr (std::is_same_v<T, float>)
    return c.floats;
  else
    return c.ints;
}

// Calls f(T{}) with T = float or int64_t, the C++ type of `t`'s elements.
template <class F>
decltype(auto) by_type(Type t, F&& f) {
  if (t == Type::Float32) return f(float{});
  return f(int64_t{});
}

Dims row_strides(std::span<const int64_t> dims) {
  Dims s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

// The strides, in an output of shape `out` (rank ≥ in's), that read a row-major tensor of shape `in`
// broadcast to it: aligned at the last axis, stride 0 along a dimension of extent 1 or a missing one.
Dims broadcast_strides(std::span<const int64_t> in, std::span<const int64_t> out) {
  Dims s(out.size(), 0);
  const Dims rs = row_strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) s[lead + k] = in[k] == 1 ? 0 : rs[k];
  return s;
}

// Walks an output of shape `dims` in row-major order, yielding for each element the source offset
// offset + Σ index[k]·strides[k]; a stride of 0 repeats the source along that axis. Transpose, Slice and
// every broadcast read their source through one (no index table: an output may hold max_elements).
class Walk {
 public:
  Walk(std::span<const int64_t> dims, Dims strides, int64_t offset = 0)
      : dims_(dims.begin(), dims.end()), strides_(std::move(strides)), index_(dims.size(), 0), pos_(offset) {}
  int64_t next() {
    const int64_t cur = pos_;
    for (size_t k = dims_.size(); k-- > 0;) {
      pos_ += strides_[k];
      if (++index_[k] < dims_[k]) break;
      pos_ -= strides_[k] * dims_[k];
      index_[k] = 0;
    }
    return cur;
  }

 private:
  Dims dims_, strides_, index_;
  int64_t pos_;
};

// One node being folded: its inputs, attributes, and the checks every op shares.
struct Fold {
  const OnnxNode& node;
  std::span<const OnnxConstant* const> inputs;
  // Each op folded here has one definition across opsets 13–17; where an attribute came later (Reshape's
  // allowzero, 14; Shape's start and end, 15) ONNX's checker has already refused it at an earlier opset.
  int64_t opset;
  const std::string& where;
  uint64_t max_elements;

  [[noreturn]] void fail(const std::string& what) const { throw OnnxError(where + what); }

  void arity(size_t min, size_t max) const {
    if (inputs.size() < min || inputs.size() > max) {
      fail(min == max ? fmt::format("takes {} inputs, the node has {}", min, inputs.size())
                      : fmt::format("takes {} to {} inputs, the node has {}", min, max, inputs.size()));
    }
  }
  const OnnxConstant* opt(size_t i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  const OnnxConstant& in(size_t i) const {
    if (!opt(i)) fail(fmt::format("input {} is required", i));
    return *inputs[i];
  }
  const OnnxConstant& in(size_t i, Type t, const char* what) const {
    const OnnxConstant& c = in(i);
    if (c.type != t)
      fail(fmt::format("{} (input {}) must be {}, it is {}", what, i, type_name(t), type_name(c.type)));
    return c;
  }
  // A 1-D int64 input (axes, starts, a shape): its values.
  const Dims& int_list(size_t i, const char* what) const {
    const OnnxConstant& c = in(i, Type::Int64, what);
    if (c.dims.size() != 1)
      fail(fmt::format("{} (input {}) must be 1-D, it has rank {}", what, i, c.dims.size()));
    return c.ints;
  }
  void same_type(const OnnxConstant& a, const OnnxConstant& b) const {
    if (a.type != b.type)
      fail(fmt::format("inputs of types {} and {} (they must agree)", type_name(a.type), type_name(b.type)));
  }

  const OnnxAttribute* attr(const char* name) const {
    const auto it = node.attributes.find(name);
    return it == node.attributes.end() ? nullptr : &it->second;
  }
  int64_t int_attr(const char* name, std::optional<int64_t> dflt) const {
    const OnnxAttribute* a = attr(name);
    if (!a) {
      if (!dflt) fail(fmt::format("attribute '{}' is required", name));
      return *dflt;
    }
    if (a->kind != OnnxAttribute::Kind::Int) fail(fmt::format("attribute '{}' must be an int", name));
    return a->i;
  }

  // `a` counted from the end when negative, checked against [-rank, rank-1].
  int64_t axis(int64_t a, int64_t rank, const char* what) const {
    if (a < -rank || a >= rank) fail(fmt::format("{} {} is out of range for rank {}", what, a, rank));
    return a < 0 ? a + rank : a;
  }
  // Normalized, distinct axes.
  Dims axes(const Dims& list, int64_t rank, const char* what) const {
    Dims out;
    for (int64_t a : list) {
      const int64_t n = axis(a, rank, what);
      if (std::find(out.begin(), out.end(), n) != out.end())
        fail(fmt::format("{} {} is given twice", what, a));
      out.push_back(n);
    }
    return out;
  }

  // A tensor of `type` and shape `dims`, zero-filled, refused when a dimension is negative or it has
  // more than max_elements elements.
  OnnxConstant make(Type type, Dims dims) const {
    uint64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0) fail(fmt::format("the result would have a negative dimension {}", d));
      if (d > 0 && n > max_elements / static_cast<uint64_t>(d))
        fail(fmt::format("the result would have more than {} elements", max_elements));
      n *= static_cast<uint64_t>(d);
    }
    if (n > max_elements) fail(fmt::format("the result would have more than {} elements", max_elements));
    OnnxConstant c;
    c.type = type;
    c.dims = std::move(dims);
    if (type == Type::Float32)
      c.floats.resize(n);
    else
      c.ints.resize(n);
    return c;
  }

  // The elements of `src` read through `walk`, as a tensor of shape `dims`.
  OnnxConstant take(const OnnxConstant& src, Dims dims, Walk walk) const {
    OnnxConstant out = make(src.type, std::move(dims));
    by_type(src.type, [&]<class T>(T) {
      const auto& from = values<T>(src);
      for (auto& v : values<T>(out)) v = from[static_cast<size_t>(walk.next())];
    });
    return out;
  }
  // `src` with its elements unchanged under another shape.
  OnnxConstant reshaped(const OnnxConstant& src, Dims dims) const {
    OnnxConstant out = make(src.type, std::move(dims));
    if (out.elements() != src.elements())
      fail(fmt::format("cannot reshape {} elements to {} elements", src.elements(), out.elements()));
    out.floats = src.floats;
    out.ints = src.ints;
    return out;
  }
};

// ---- Elementwise, with multidirectional broadcasting ---------------------------------------------

// op(a[i], b[i]) over the broadcast shape: T the inputs' element type, R the result's.
template <class R, class T, class Op>
OnnxConstant binary(const Fold& f, const OnnxConstant& a, const OnnxConstant& b, Op op) {
  Dims dims = broadcast_dims(a.dims, b.dims, f.where);
  OnnxConstant out = f.make(type_of<R>(), dims);
  Walk wa(dims, broadcast_strides(a.dims, dims)), wb(dims, broadcast_strides(b.dims, dims));
  const auto &va = values<T>(a), &vb = values<T>(b);
  for (auto& v : values<R>(out))
    v = op(va[static_cast<size_t>(wa.next())], vb[static_cast<size_t>(wb.next())]);
  return out;
}

// Add, Sub, Mul, Div. float32: the one IEEE operation. int64: exact, refused where the result overflows
// (ONNX leaves it undefined) or divides by zero; Div truncates toward zero (C++ and ONNX alike).
OnnxConstant arithmetic(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant &a = f.in(0), &b = f.in(1);
  f.same_type(a, b);
  const char op = f.node.op_type[0];
  if (a.type == Type::Float32) {
    return binary<float, float>(f, a, b, [op](float x, float y) {
      return op == 'A' ? x + y : op == 'S' ? x - y : op == 'M' ? x * y : x / y;
    });
  }
  return binary<int64_t, int64_t>(f, a, b, [&](int64_t x, int64_t y) {
    int64_t r = 0;
    bool overflow = false;
    if (op == 'A') overflow = __builtin_add_overflow(x, y, &r);
    if (op == 'S') overflow = __builtin_sub_overflow(x, y, &r);
    if (op == 'M') overflow = __builtin_mul_overflow(x, y, &r);
    if (op == 'D') {
      if (y == 0) f.fail(fmt::format("int64 division of {} by zero", x));
      overflow = x == std::numeric_limits<int64_t>::min() && y == -1;
      if (!overflow) r = x / y;
    }
    if (overflow) f.fail(fmt::format("int64 {} of {} and {} overflows", f.node.op_type, x, y));
    return r;
  });
}

// Equal, Less, Greater: int64 0/1 standing for ONNX's bool (IEEE comparisons: NaN compares false).
OnnxConstant comparison(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant &a = f.in(0), &b = f.in(1);
  f.same_type(a, b);
  const char op = f.node.op_type[0];
  return by_type(a.type, [&]<class T>(T) {
    return binary<int64_t, T>(f, a, b, [op](T x, T y) -> int64_t {
      return op == 'E' ? x == y : op == 'L' ? x < y : x > y;
    });
  });
}

// Min, Max of one or more inputs, folded left to right. float32: NaN propagates (NumPy's minimum and
// maximum, the specification's reference); of two equal values (+0 and −0) the first is kept.
OnnxConstant min_max(const Fold& f) {
  f.arity(1, std::numeric_limits<size_t>::max());
  const bool is_max = f.node.op_type == "Max";
  OnnxConstant acc = f.reshaped(f.in(0), f.in(0).dims);
  for (size_t i = 1; i < f.inputs.size(); ++i) {
    const OnnxConstant& b = f.in(i);
    f.same_type(acc, b);
    acc = by_type(acc.type, [&]<class T>(T) {
      return binary<T, T>(f, acc, b, [is_max](T x, T y) -> T {
        if constexpr (std::is_same_v<T, float>) {
          if (std::isnan(x)) return x;
          if (std::isnan(y)) return y;
        }
        return (is_max ? y > x : y < x) ? y : x;
      });
    });
  }
  return acc;
}

OnnxConstant where_op(const Fold& f) {
  f.arity(3, 3);
  const OnnxConstant& c = f.in(0, Type::Int64, "the condition");
  const OnnxConstant &x = f.in(1), &y = f.in(2);
  f.same_type(x, y);
  Dims dims = broadcast_dims(broadcast_dims(c.dims, x.dims, f.where), y.dims, f.where);
  OnnxConstant out = f.make(x.type, dims);
  Walk wc(dims, broadcast_strides(c.dims, dims)), wx(dims, broadcast_strides(x.dims, dims)),
      wy(dims, broadcast_strides(y.dims, dims));
  by_type(x.type, [&]<class T>(T) {
    for (auto& v : values<T>(out)) {
      const bool pick_x = c.ints[static_cast<size_t>(wc.next())] != 0;
      const T vx = values<T>(x)[static_cast<size_t>(wx.next())],
              vy = values<T>(y)[static_cast<size_t>(wy.next())];
      v = pick_x ? vx : vy;
    }
  });
  return out;
}

// The RepOps unary code (ops/unary.h) of each float function fold_constant evaluates: a folded
// constant is bitwise what the run-time unary op computes from the same input (docs/onnx.md "Folding").
const std::map<std::string_view, int64_t>& unary_codes() {
  static const std::map<std::string_view, int64_t> codes = {{"Reciprocal", 1}, {"Sqrt", 2}, {"Exp", 3},
                                                            {"Log", 4},        {"Tanh", 5}, {"Erf", 6},
                                                            {"Sigmoid", 7},    {"Sin", 8},  {"Cos", 9}};
  return codes;
}

// Reciprocal, Sqrt, Exp, Log, Tanh, Erf, Sigmoid, Sin, Cos of a float32 constant: unary32, the run-time
// op's own function (sqrt32 is the correctly rounded IEEE square root; the others are the project's
// functions, never libm's).
OnnxConstant float_function(const Fold& f) {
  f.arity(1, 1);
  const OnnxConstant& a = f.in(0, Type::Float32, "the input");
  OnnxConstant out = f.reshaped(a, a.dims);
  const int64_t fn = unary_codes().at(f.node.op_type);
  for (float& v : out.floats) v = unary32(fn, v, 0.0f);
  return out;
}

// Pow of float32 constants (NumPy-broadcast base and exponent): pow32 per element, the run-time unary
// pow's function. An int64 exponent is converted to float first (exact below 2²⁴; rounded to nearest
// beyond), as the lowering converts a constant exponent.
OnnxConstant pow_op(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant &a = f.in(0), &b = f.in(1);
  if (a.type != Type::Float32) f.fail("an int64 base is not supported (Pow folds float32 bases only)");
  OnnxConstant e = b;
  if (b.type == Type::Int64) {
    e.type = Type::Float32;
    e.floats.assign(b.ints.begin(), b.ints.end());
    e.ints.clear();
  }
  return binary<float, float>(f, a, e, [](float x, float p) { return unary32(10, x, p); });
}

// MatMul of two 2-D float32 constants ([M, K]·[K, N]; rotary tables are position × inverse
// frequency): each element one fma chain from +0 over k = 0..K−1, matmul_reference's order
// (ops/kernels/matmul.cpp), so the fold equals the run-time matmul bit for bit.
OnnxConstant matmul(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant& a = f.in(0, Type::Float32, "A");
  const OnnxConstant& b = f.in(1, Type::Float32, "B");
  if (a.dims.size() != 2 || b.dims.size() != 2 || a.dims[1] != b.dims[0])
    f.fail(fmt::format("MatMul of constants of shapes {} and {} (2-D [M, K]·[K, N] only)", a.dims, b.dims));
  const int64_t m = a.dims[0], k = a.dims[1], n = b.dims[1];
  OnnxConstant out = f.make(Type::Float32, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p)
        acc =
            std::fma(a.floats[static_cast<size_t>(i * k + p)], b.floats[static_cast<size_t>(p * n + j)], acc);
      out.floats[static_cast<size_t>(i * n + j)] = acc;
    }
  return out;
}

// Neg, Not.
OnnxConstant unary(const Fold& f) {
  f.arity(1, 1);
  const std::string& op = f.node.op_type;
  const OnnxConstant& a = op == "Not" ? f.in(0, Type::Int64, "the input (bool)") : f.in(0);
  OnnxConstant out = f.reshaped(a, a.dims);
  if (op == "Not") {
    for (int64_t& v : out.ints) v = v == 0;
  } else if (a.type == Type::Float32) {
    for (float& v : out.floats) v = -v;
  } else {
    for (int64_t& v : out.ints) {
      if (v == std::numeric_limits<int64_t>::min()) f.fail(fmt::format("int64 negation of {} overflows", v));
      v = -v;
    }
  }
  return out;
}

// Cast to FLOAT, INT64, INT32 or BOOL (the last two held as int64). float → integer truncates toward
// zero and refuses NaN, ±inf and values outside the target's range (undefined in ONNX); int → float
// rounds to nearest, ties to even; → BOOL is x ≠ 0 (NaN is true, as NumPy's astype(bool)).
OnnxConstant cast(const Fold& f) {
  f.arity(1, 1);
  const OnnxConstant& a = f.in(0);
  const int64_t to = f.int_attr("to", std::nullopt);
  if (to != kFloat && to != kInt64 && to != kInt32 && to != kBool)
    f.fail(fmt::format("Cast to type {} is not supported (float, int64, int32, bool)", to));
  OnnxConstant out = f.make(to == kFloat ? Type::Float32 : Type::Int64, a.dims);
  const int64_t lo = to == kInt32 ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int64_t>::min();
  const int64_t hi = to == kInt32 ? std::numeric_limits<int32_t>::max() : std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < out.floats.size() + out.ints.size(); ++i) {
    if (to == kFloat) {
      out.floats[i] = a.type == Type::Float32 ? a.floats[i] : static_cast<float>(a.ints[i]);
    } else if (to == kBool) {
      out.ints[i] = a.type == Type::Float32 ? a.floats[i] != 0.0f : a.ints[i] != 0;
    } else if (a.type == Type::Int64) {
      if (a.ints[i] < lo || a.ints[i] > hi)
        f.fail(fmt::format("Cast of {} to int32 is out of range", a.ints[i]));
      out.ints[i] = a.ints[i];
    } else {
      const double t = std::trunc(static_cast<double>(a.floats[i]));
      // 2^63 is the first float above int64's range; int32's bounds are exact in double.
      const bool in_range = to == kInt64 ? t >= -0x1p63 && t < 0x1p63 : t >= double(lo) && t <= double(hi);
      if (!in_range)
        f.fail(fmt::format("Cast of {} to {} is undefined (NaN, infinite or out of range)", a.floats[i],
                           to == kInt64 ? "int64" : "int32"));
      out.ints[i] = static_cast<int64_t>(t);
    }
  }
  return out;
}

// ---- Constants -----------------------------------------------------------------------------------

OnnxConstant constant(const Fold& f) {
  f.arity(0, 0);
  if (f.node.attributes.size() != 1)
    f.fail(fmt::format("has {} attributes, Constant takes exactly one value", f.node.attributes.size()));
  const std::string& name = f.node.attributes.begin()->first;  // not a structured binding: lambdas capture it
  const OnnxAttribute& a = f.node.attributes.begin()->second;
  auto kind_must = [&](OnnxAttribute::Kind k) {
    if (a.kind != k) f.fail(fmt::format("attribute '{}' has the wrong kind", name));
  };
  if (name == "value") {
    kind_must(OnnxAttribute::Kind::Tensor);
    return f.reshaped(*a.tensor, a.tensor->dims);
  }
  if (name == "value_float" || name == "value_floats") {
    const bool scalar = name == "value_float";
    kind_must(scalar ? OnnxAttribute::Kind::Float : OnnxAttribute::Kind::Floats);
    OnnxConstant c = f.make(Type::Float32, scalar ? Dims{} : Dims{static_cast<int64_t>(a.floats.size())});
    c.floats = scalar ? std::vector<float>{a.f} : a.floats;
    return c;
  }
  if (name == "value_int" || name == "value_ints") {
    const bool scalar = name == "value_int";
    kind_must(scalar ? OnnxAttribute::Kind::Int : OnnxAttribute::Kind::Ints);
    OnnxConstant c = f.make(Type::Int64, scalar ? Dims{} : Dims{static_cast<int64_t>(a.ints.size())});
    c.ints = scalar ? Dims{a.i} : a.ints;
    return c;
  }
  f.fail(fmt::format("attribute '{}' is not supported (value, value_float(s), value_int(s))", name));
}

OnnxConstant constant_of_shape(const Fold& f) {
  f.arity(1, 1);
  const Dims& shape = f.int_list(0, "the shape");
  OnnxConstant out = f.make(Type::Float32, shape);  // ONNX's default: float 0
  if (const OnnxAttribute* a = f.attr("value")) {
    if (a->kind != OnnxAttribute::Kind::Tensor || a->tensor->elements() != 1)
      f.fail("attribute 'value' must be a tensor of one element");
    out = f.make(a->tensor->type, shape);
    by_type(out.type, [&]<class T>(T) {
      std::fill(values<T>(out).begin(), values<T>(out).end(), values<T>(*a->tensor)[0]);
    });
  }
  return out;
}

// Range: n = max(⌈(limit − start) / delta⌉, 0) elements. int64: exact (128-bit). float32: n computed in
// double from the float inputs, element i = fl32(start + fl32(fl32(i) · delta)) — the specification's
// `start + (i * delta)` in the input type, two rounded float32 operations, as ONNX Runtime does.
OnnxConstant range(const Fold& f) {
  f.arity(3, 3);
  const OnnxConstant &s = f.in(0), &l = f.in(1), &d = f.in(2);
  f.same_type(s, l);
  f.same_type(s, d);
  for (const OnnxConstant* c : {&s, &l, &d})
    if (!c->dims.empty())
      f.fail(fmt::format("start, limit and delta must be scalars, one has rank {}", c->dims.size()));
  if (s.type == Type::Int64) {
    const __int128 start = s.ints[0], limit = l.ints[0], delta = d.ints[0];
    if (delta == 0) f.fail("delta is 0");
    const __int128 span = delta > 0 ? limit - start : start - limit, step = delta > 0 ? delta : -delta;
    const __int128 n = span <= 0 ? 0 : (span + step - 1) / step;
    if (n > static_cast<__int128>(f.max_elements))
      f.fail(fmt::format("the result would have more than {} elements", f.max_elements));
    OnnxConstant out = f.make(Type::Int64, {static_cast<int64_t>(n)});
    for (size_t i = 0; i < out.ints.size(); ++i)
      out.ints[i] = static_cast<int64_t>(start + static_cast<__int128>(i) * delta);
    return out;
  }
  const float start = s.floats[0], limit = l.floats[0], delta = d.floats[0];
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta) || delta == 0.0f)
    f.fail(fmt::format("Range({}, {}, {}) is undefined (non-finite or zero delta)", start, limit, delta));
  const double n = std::max(std::ceil((double(limit) - double(start)) / double(delta)), 0.0);
  if (n > double(f.max_elements))
    f.fail(fmt::format("the result would have more than {} elements", f.max_elements));
  OnnxConstant out = f.make(Type::Float32, {static_cast<int64_t>(n)});
  for (size_t i = 0; i < out.floats.size(); ++i) {
    const float step = static_cast<float>(i) * delta;
    out.floats[i] = start + step;
  }
  return out;
}

// ---- Shapes and copies ---------------------------------------------------------------------------

OnnxConstant shape(const Fold& f) {
  f.arity(1, 1);
  return fold_shape(f.node, f.in(0).dims, f.where);
}

OnnxConstant identity(const Fold& f) {
  f.arity(1, 1);
  return f.reshaped(f.in(0), f.in(0).dims);
}

// Reshape: 0 copies the input's dimension at that index (unless allowzero), −1 (at most one) is inferred.
OnnxConstant reshape(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant& data = f.in(0);
  Dims dims = f.int_list(1, "the shape");
  const bool allowzero = f.int_attr("allowzero", 0) != 0;
  int64_t infer = -1, known = 1;
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] == 0 && !allowzero) {
      if (k >= data.dims.size())
        f.fail(fmt::format("shape[{}] = 0 copies a dimension the rank-{} input does not have", k,
                           data.dims.size()));
      dims[k] = data.dims[k];
    }
    if (dims[k] == -1) {
      if (infer >= 0) f.fail("the shape has more than one -1");
      if (allowzero && std::find(dims.begin(), dims.end(), 0) != dims.end())
        f.fail("with allowzero = 1 the shape cannot hold both 0 and -1");
      infer = static_cast<int64_t>(k);
    } else if (dims[k] < 0) {
      f.fail(fmt::format("shape[{}] = {} is negative", k, dims[k]));
    } else if (__builtin_mul_overflow(known, dims[k], &known)) {
      f.fail("the shape's element count overflows");
    }
  }
  if (infer >= 0) {
    if (known == 0 || data.elements() % known != 0)
      f.fail(fmt::format("cannot infer the -1 of shape: {} elements do not divide into {}", data.elements(),
                         known));
    dims[static_cast<size_t>(infer)] = data.elements() / known;
  }
  return f.reshaped(data, std::move(dims));
}

OnnxConstant flatten(const Fold& f) {
  f.arity(1, 1);
  const OnnxConstant& data = f.in(0);
  const auto rank = static_cast<int64_t>(data.dims.size());
  int64_t axis = f.int_attr("axis", 1);
  if (axis < -rank || axis > rank) f.fail(fmt::format("axis {} is out of range for rank {}", axis, rank));
  if (axis < 0) axis += rank;
  const auto mid = data.dims.begin() + axis;
  const int64_t outer = std::accumulate(data.dims.begin(), mid, int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(mid, data.dims.end(), int64_t{1}, std::multiplies<>());
  return f.reshaped(data, {outer, inner});
}

OnnxConstant squeeze(const Fold& f) {
  f.arity(1, 2);
  const OnnxConstant& data = f.in(0);
  const auto rank = static_cast<int64_t>(data.dims.size());
  Dims dims;
  if (!f.opt(1)) {
    for (int64_t d : data.dims)
      if (d != 1) dims.push_back(d);
  } else {
    const Dims axes = f.axes(f.int_list(1, "axes"), rank, "axis");
    for (int64_t k = 0; k < rank; ++k) {
      const bool drop = std::find(axes.begin(), axes.end(), k) != axes.end();
      if (drop && data.dims[k] != 1)
        f.fail(fmt::format("cannot squeeze axis {} of extent {}", k, data.dims[k]));
      if (!drop) dims.push_back(data.dims[k]);
    }
  }
  return f.reshaped(data, std::move(dims));
}

OnnxConstant unsqueeze(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant& data = f.in(0);
  const Dims& list = f.int_list(1, "axes");
  const auto rank = static_cast<int64_t>(data.dims.size() + list.size());
  const Dims axes = f.axes(list, rank, "axis");
  Dims dims;
  auto src = data.dims.begin();
  for (int64_t k = 0; k < rank; ++k)
    dims.push_back(std::find(axes.begin(), axes.end(), k) != axes.end() ? 1 : *src++);
  return f.reshaped(data, std::move(dims));
}

OnnxConstant concat(const Fold& f) {
  f.arity(1, std::numeric_limits<size_t>::max());
  const OnnxConstant& first = f.in(0);
  const auto rank = static_cast<int64_t>(first.dims.size());
  if (rank == 0) f.fail("cannot concatenate scalars");
  const auto axis = static_cast<size_t>(f.axis(f.int_attr("axis", std::nullopt), rank, "axis"));
  Dims dims = first.dims;
  dims[axis] = 0;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const OnnxConstant& c = f.in(i);
    f.same_type(first, c);
    bool agree = c.dims.size() == first.dims.size();
    for (size_t k = 0; agree && k < c.dims.size(); ++k) agree = k == axis || c.dims[k] == first.dims[k];
    if (!agree) f.fail(fmt::format("input {}'s shape does not match input 0's but along axis {}", i, axis));
    if (__builtin_add_overflow(dims[axis], c.dims[axis], &dims[axis]))
      f.fail("the result's extent overflows");
  }
  OnnxConstant out = f.make(first.type, dims);
  const int64_t outer = std::accumulate(dims.begin(), dims.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner = std::accumulate(dims.begin() + axis + 1, dims.end(), int64_t{1}, std::multiplies<>());
  by_type(out.type, [&]<class T>(T) {
    auto dst = values<T>(out).begin();
    for (int64_t o = 0; o < outer; ++o) {
      for (const OnnxConstant* c : f.inputs) {
        const int64_t block = c->dims[axis] * inner;
        dst = std::copy_n(values<T>(*c).begin() + o * block, block, dst);
      }
    }
  });
  return out;
}

// Gather: out[i…, j…, k…] = data[i…, indices[j…], k…] along `axis`; negative indices count from the end.
OnnxConstant gather(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant& data = f.in(0);
  const OnnxConstant& indices = f.in(1, Type::Int64, "the indices");
  const auto rank = static_cast<int64_t>(data.dims.size());
  if (rank == 0) f.fail("cannot gather from a scalar");
  const auto axis = static_cast<size_t>(f.axis(f.int_attr("axis", 0), rank, "axis"));
  const int64_t extent = data.dims[axis];
  Dims dims(data.dims.begin(), data.dims.begin() + axis);
  dims.insert(dims.end(), indices.dims.begin(), indices.dims.end());
  dims.insert(dims.end(), data.dims.begin() + axis + 1, data.dims.end());
  OnnxConstant out = f.make(data.type, dims);
  const int64_t outer =
      std::accumulate(data.dims.begin(), data.dims.begin() + axis, int64_t{1}, std::multiplies<>());
  const int64_t inner =
      std::accumulate(data.dims.begin() + axis + 1, data.dims.end(), int64_t{1}, std::multiplies<>());
  by_type(data.type, [&]<class T>(T) {
    auto dst = values<T>(out).begin();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t idx : indices.ints) {
        if (idx < -extent || idx >= extent)
          f.fail(fmt::format("index {} is out of range for axis {} of extent {}", idx, axis, extent));
        const int64_t k = idx < 0 ? idx + extent : idx;
        dst = std::copy_n(values<T>(data).begin() + (o * extent + k) * inner, inner, dst);
      }
    }
  });
  return out;
}

// Slice: per axis, start and end made non-negative by adding the extent, then clamped to [0, extent]
// (step > 0) or start to [0, extent − 1] and end to [−1, extent − 1] (step < 0).
OnnxConstant slice(const Fold& f) {
  f.arity(3, 5);
  const OnnxConstant& data = f.in(0);
  const auto rank = static_cast<int64_t>(data.dims.size());
  const Dims &starts = f.int_list(1, "starts"), &ends = f.int_list(2, "ends");
  Dims axes_in(starts.size()), steps(starts.size(), 1);
  std::iota(axes_in.begin(), axes_in.end(), 0);
  if (f.opt(3)) axes_in = f.int_list(3, "axes");
  if (f.opt(4)) steps = f.int_list(4, "steps");
  if (ends.size() != starts.size() || axes_in.size() != starts.size() || steps.size() != starts.size())
    f.fail("starts, ends, axes and steps must have the same length");
  const Dims axes = f.axes(axes_in, rank, "axis");
  Dims dims = data.dims, strides = row_strides(data.dims);
  int64_t offset = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    const auto a = static_cast<size_t>(axes[i]);
    const int64_t extent = data.dims[a], step = steps[i];
    if (step == 0) f.fail(fmt::format("step of axis {} is 0", a));
    int64_t start = starts[i] < 0 ? starts[i] + extent : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + extent : ends[i];
    int64_t count = 0;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, extent);
      end = std::clamp<int64_t>(end, 0, extent);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, extent - 1);
      end = std::clamp<int64_t>(end, -1, extent - 1);
      count = start > end ? (start - end - 1) / -step + 1 : 0;
    }
    dims[a] = count;
    if (count > 0) offset += start * strides[a];
    strides[a] *= step;
  }
  return f.take(data, dims, Walk(dims, strides, offset));
}

OnnxConstant transpose(const Fold& f) {
  f.arity(1, 1);
  const OnnxConstant& data = f.in(0);
  const auto rank = static_cast<int64_t>(data.dims.size());
  Dims perm(data.dims.size());
  std::iota(perm.rbegin(), perm.rend(), 0);  // default: the axes reversed
  if (const OnnxAttribute* a = f.attr("perm")) {
    if (a->kind != OnnxAttribute::Kind::Ints || static_cast<int64_t>(a->ints.size()) != rank)
      f.fail(fmt::format("perm must list {} axes", rank));
    perm = f.axes(a->ints, rank, "perm axis");
  }
  const Dims src = row_strides(data.dims);
  Dims dims(perm.size()), strides(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) {
    dims[k] = data.dims[static_cast<size_t>(perm[k])];
    strides[k] = src[static_cast<size_t>(perm[k])];
  }
  return f.take(data, dims, Walk(dims, strides));
}

OnnxConstant expand(const Fold& f) {
  f.arity(2, 2);
  const OnnxConstant& data = f.in(0);
  const Dims dims = broadcast_dims(data.dims, f.int_list(1, "the shape"), f.where);
  return f.take(data, dims, Walk(dims, broadcast_strides(data.dims, dims)));
}

using FoldFn = OnnxConstant (*)(const Fold&);

const std::map<std::string_view, FoldFn>& folds() {
  static const std::map<std::string_view, FoldFn> table = {
      {"Add", arithmetic},
      {"Sub", arithmetic},
      {"Mul", arithmetic},
      {"Div", arithmetic},
      {"Equal", comparison},
      {"Less", comparison},
      {"Greater", comparison},
      {"Min", min_max},
      {"Max", min_max},
      {"Where", where_op},
      {"Neg", unary},
      {"Not", unary},
      {"Sqrt", float_function},
      {"Cast", cast},
      {"Reciprocal", float_function},
      {"Exp", float_function},
      {"Log", float_function},
      {"Tanh", float_function},
      {"Erf", float_function},
      {"Sigmoid", float_function},
      {"Sin", float_function},
      {"Cos", float_function},
      {"Pow", pow_op},
      {"MatMul", matmul},
      {"Constant", constant},
      {"ConstantOfShape", constant_of_shape},
      {"Range", range},
      {"Shape", shape},
      {"Identity", identity},
      {"Reshape", reshape},
      {"Flatten", flatten},
      {"Squeeze", squeeze},
      {"Unsqueeze", unsqueeze},
      {"Concat", concat},
      {"Gather", gather},
      {"Slice", slice},
      {"Transpose", transpose},
      {"Expand", expand},
  };
  return table;
}

}  // namespace

bool is_foldable(const std::string& op_type) {
  return folds().count(op_type) != 0;
}

std::vector<OnnxConstant> fold_constant(const OnnxNode& node, std::span<const OnnxConstant* const> inputs,
                                        int64_t opset, const std::string& where, uint64_t max_elements) {
  const Fold f{node, inputs, opset, where, max_elements};
  const auto it = folds().find(node.op_type);
  if (it == folds().end()) f.fail(fmt::format("op {} cannot be folded", node.op_type));
  if (node.outputs.size() != 1)
    f.fail(fmt::format("has {} outputs, {} has one", node.outputs.size(), node.op_type));
  std::vector<OnnxConstant> out;
  out.push_back(it->second(f));
  return out;
}

OnnxConstant fold_shape(const OnnxNode& node, std::span<const int64_t> dims, const std::string& where) {
  const Fold f{node, {}, 0, where, std::numeric_limits<uint64_t>::max()};
  const auto rank = static_cast<int64_t>(dims.size());
  // Negative start/end count from the end; both are then clamped to [0, rank].
  auto clamp = [rank](int64_t a) { return std::clamp<int64_t>(a < 0 ? a + rank : a, 0, rank); };
  const int64_t start = clamp(f.int_attr("start", 0)), end = clamp(f.int_attr("end", rank));
  OnnxConstant out;
  out.type = Type::Int64;
  if (end > start) out.ints.assign(dims.begin() + start, dims.begin() + end);
  out.dims = {static_cast<int64_t>(out.ints.size())};
  return out;
}

std::vector<int64_t> broadcast_dims(std::span<const int64_t> a, std::span<const int64_t> b,
                                    const std::string& where) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // Aligned at the last axis; a missing leading dimension is 1.
    const int64_t da = k + a.size() >= rank ? a[k + a.size() - rank] : 1;
    const int64_t db = k + b.size() >= rank ? b[k + b.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      throw OnnxError(fmt::format("{}shapes [{}] and [{}] do not broadcast (axis {}: {} against {})", where,
                                  fmt::join(a, ", "), fmt::join(b, ", "), k, da, db));
    out[k] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace tribunal
