// lower_onnx of a Llama-style block as torch 1.13 exports it (opset 17): RMSNorm written as
// x·(1/sqrt(mean(x², −1) + ε))·w (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul), a key projection with
// rotary embeddings whose cos/sin tables are computed in forward from constants (Pow, MatMul, Concat,
// Cos, Sin: folded at import), rotate_half (Slice, Neg, Concat), and grouped-query attention's repeated
// key head (Unsqueeze, Expand, Reshape). The ModelProto is built here; the lowered graph is run on the
// reference kernels and checked against the block computed in double (docs/onnx.md).
#include <doctest/doctest.h>

// GCC 12 reports a false -Wrestrict inside std::string for protobuf's inlined set_x(const char*) (GCC
// bug 105329); the strings here are literals.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "onnx/lower.h"
#include "ops/math.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "tests/onnx/onnx_test_data.h"

namespace tribunal {
namespace {

constexpr int64_t B = 2, T = 4, D = 8, E = 4, G = 3;  // batch, positions, model width, head size, groups

void value_info(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void fill(onnx::TensorProto* t, std::vector<int64_t> dims, const std::vector<float>& v) {
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
}

struct Builder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  int count = 0;

  Builder() {
    m.set_ir_version(8);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(17);
    g = m.mutable_graph();
    g->set_name("llama_block");
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, const std::string& out) {
    auto* n = g->add_node();
    n->set_name("/" + op + "_" + std::to_string(count++));
    n->set_op_type(op);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  std::string floats(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
    auto* a = node("Constant", {}, name)->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    fill(a->mutable_t(), std::move(dims), v);
    return name;
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = node("Constant", {}, name)->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    onnx::TensorProto* t = a->mutable_t();
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }
  void weight(const std::string& name, std::vector<int64_t> dims, const std::vector<float>& v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    fill(t, std::move(dims), v);
  }
};

std::vector<float> randoms(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

TEST_CASE("lower_onnx: a Llama block (RMSNorm, rotary tables folded, GQA expand) runs and matches double") {
  std::mt19937 rng(5);
  const std::vector<float> x = randoms(B * T * D, rng), w = randoms(D, rng), wk = randoms(D * E, rng);
  Builder b;
  value_info(b.g->add_input(), "x", {B, T, D});
  value_info(b.g->add_output(), "k", {B, G * T, E});
  b.weight("norm.weight", {D}, w);
  b.weight("wk", {D, E}, wk);
  // RMSNorm: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight, rsqrt as 1/sqrt.
  b.node("Pow", {"x", b.floats("two", {}, {2.0f})}, "sq");
  auto* mean = b.node("ReduceMean", {"sq"}, "ms");
  auto* axes = mean->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(-1);
  b.node("Add", {"ms", b.floats("eps", {}, {1e-6f})}, "ms_eps");
  b.node("Sqrt", {"ms_eps"}, "rms");
  b.node("Reciprocal", {"rms"}, "inv_rms");
  b.node("Mul", {"x", "inv_rms"}, "xn");
  b.node("Mul", {"xn", "norm.weight"}, "h");
  // Rotary tables from constants: inv_freq = 10000^(−2i/E), freqs = positions · inv_freq, emb = [freqs,
  // freqs], cos and sin of it — all folded.
  b.node("Pow", {b.floats("base", {}, {10000.0f}), b.floats("exps", {1, E / 2}, {0.0f, -0.5f})}, "inv_freq");
  b.node("MatMul", {b.floats("pos", {T, 1}, {0, 1, 2, 3}), "inv_freq"}, "freqs");
  auto* cat = b.node("Concat", {"freqs", "freqs"}, "emb");
  auto* cat_axis = cat->add_attribute();
  cat_axis->set_name("axis");
  cat_axis->set_type(onnx::AttributeProto::INT);
  cat_axis->set_i(-1);
  b.node("Cos", {"emb"}, "cos");
  b.node("Sin", {"emb"}, "sin");
  // k = h·Wk, then k·cos + rotate_half(k)·sin, rotate_half(k) = [−k₂, k₁].
  b.node("MatMul", {"h", "wk"}, "k0");
  const std::string ax = b.ints("last", {-1});
  b.node("Slice", {"k0", b.ints("s0", {0}), b.ints("e0", {E / 2}), ax}, "k1");
  b.node("Slice", {"k0", b.ints("s1", {E / 2}), b.ints("e1", {E}), ax}, "k2");
  b.node("Neg", {"k2"}, "nk2");
  auto* rot = b.node("Concat", {"nk2", "k1"}, "rot");
  *rot->add_attribute() = *cat_axis;
  b.node("Mul", {"k0", "cos"}, "kc");
  b.node("Mul", {"rot", "sin"}, "ks");
  b.node("Add", {"kc", "ks"}, "kr");
  // GQA: k[:, None].expand(B, G, T, E).reshape(B, G·T, E).
  b.node("Unsqueeze", {"kr", b.ints("one", {1})}, "k4");
  b.node("Expand", {"k4", b.ints("rep", {B, G, T, E})}, "kg");
  b.node("Reshape", {"kg", b.ints("shape", {B, G * T, E})}, "k");

  const std::string bytes = b.m.SerializeAsString();
  const auto model = import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), "llama.onnx");
  REQUIRE(model->params() == std::vector<std::string>{"norm.weight", "wk"});
  LowerOptions options;
  options.inputs.push_back({"x", Shape{B, T, D}});
  const LoweredGraph g = lower_onnx(*model, options);

  // The mean is one reduce_mean over the last axis, the repeat one expand; the tables are constants.
  int means = 0, expands = 0, trig = 0, matmuls = 0;
  for (const LoweredNode& n : g.nodes) {
    means += n.op == OpKind::ReduceMean ? 1 : 0;
    matmuls += n.op == OpKind::Matmul ? 1 : 0;
    if (n.op == OpKind::ReduceMean) CHECK(n.attrs.ints == std::vector<int64_t>{2});
    if (n.op == OpKind::Expand) {
      ++expands;
      CHECK(n.attrs.ints == std::vector<int64_t>{B, G, T, E});
    }
    if (n.op == OpKind::Unary && (n.attrs.ints[0] == 8 || n.attrs.ints[0] == 9)) ++trig;
  }
  CHECK(means == 1);
  CHECK(expands == 1);
  CHECK(trig == 0);     // sin and cos folded
  CHECK(matmuls <= 1);  // only the key projection (or none, when it lowers through linear)

  // Run on the reference kernels.
  const std::vector<Tensor> params = onnx_param_tensors(*model);
  const Tensor xin(Shape{B, T, D}, std::span<const float>(x));
  REQUIRE(g.outputs.size() == 1);
  const Tensor y = testing::execute(g, {xin}, params).at(0);
  REQUIRE(y.shape() == Shape{B, G * T, E});

  // The block in double.
  std::vector<double> k(B * T * E);
  for (int64_t bt = 0; bt < B * T; ++bt) {
    double ms = 0;
    for (int64_t d = 0; d < D; ++d) ms += double(x[bt * D + d]) * x[bt * D + d];
    const double inv = 1.0 / std::sqrt(ms / D + double(1e-6f));
    for (int64_t e = 0; e < E; ++e) {
      double s = 0;
      for (int64_t d = 0; d < D; ++d) s += double(x[bt * D + d]) * inv * w[d] * wk[d * E + e];
      k[bt * E + e] = s;
    }
  }
  double worst = 0;
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t gg = 0; gg < G; ++gg)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < E; ++e) {
          const double* kt = &k[(bb * T + t) * E];
          const double freq = t * std::pow(10000.0, -2.0 * double(e % (E / 2)) / E);
          const double rot = e < E / 2 ? -kt[e + E / 2] : kt[e - E / 2];
          const double want = kt[e] * std::cos(freq) + rot * std::sin(freq);
          const float got = y[((bb * G + gg) * T + t) * E + e];
          worst = std::max(worst, std::fabs(got - want));
          // Every group holds the same bits: expand copies.
          if (gg > 0) {
            const float first = y[((bb * G) * T + t) * E + e];
            CHECK(std::memcmp(&got, &first, sizeof got) == 0);
          }
        }
  CHECK(worst < 1e-5);
}

TEST_CASE(
    "lower_onnx: ReduceMean's keepdims = 0 reshapes; several axes, none, noop_with_empty_axes are refused") {
  const auto lowered = [](std::vector<int64_t> axes, int64_t keepdims, int64_t noop) {
    Builder b;
    value_info(b.g->add_input(), "x", {2, 3, 5});
    auto* out = b.g->add_output();  // dims left symbolic: the refused forms have none to state
    out->set_name("y");
    auto* t = out->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int d = 0; d < (keepdims ? 3 : 2); ++d)
      t->mutable_shape()->add_dim()->set_dim_param("d" + std::to_string(d));
    auto* n = b.node("ReduceMean", {"x"}, "y");
    if (!axes.empty()) {
      auto* a = n->add_attribute();
      a->set_name("axes");
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : axes) a->add_ints(v);
    }
    auto* k = n->add_attribute();
    k->set_name("keepdims");
    k->set_type(onnx::AttributeProto::INT);
    k->set_i(keepdims);
    if (noop) {
      auto* a = n->add_attribute();
      a->set_name("noop_with_empty_axes");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(noop);
    }
    const std::string bytes = b.m.SerializeAsString();
    const OnnxModel model = OnnxModel::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), "m.onnx");
    LowerOptions options;
    options.inputs.push_back({"x", Shape{2, 3, 5}});
    return lower_onnx(model, options);
  };
  const auto refusal = [&](std::vector<int64_t> axes, int64_t noop) {
    try {
      lowered(std::move(axes), 1, noop);
    } catch (const OnnxError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const LoweredGraph g = lowered({-2}, 0, 0);
  REQUIRE(g.nodes.size() == 2);
  CHECK(g.nodes[0].op == OpKind::ReduceMean);
  CHECK(g.nodes[0].attrs.ints == std::vector<int64_t>{1});
  CHECK(g.nodes[0].outputs.at(0) == Shape{2, 1, 5});
  CHECK(g.nodes[1].op == OpKind::Reshape);
  CHECK(g.output_shapes.at(0) == Shape{2, 5});
  CHECK(lowered({2}, 1, 0).output_shapes.at(0) == Shape{2, 3, 1});
  CHECK(refusal({1, 2}, 0).find("(ReduceMean, opset 17): axes [1, 2] (one axis only; several of rank 3) is "
                                "not supported") != std::string::npos);
  CHECK(refusal({}, 0).find("none means every axis") != std::string::npos);
  // At opset 17 ONNX's checker refuses these before the importer sees them (the importer refuses
  // noop_with_empty_axes = 1 and a bad axis itself, for opset 18 files and the fuzzer).
  CHECK(refusal({1}, 1).find("Unrecognized attribute: noop_with_empty_axes") != std::string::npos);
  CHECK(refusal({3}, 0).find("axis must be in [-rank, rank-1]") != std::string::npos);
}

// Hugging Face's repeat_kv builds a rank-5 value, x[:, :, None, :, :].expand(B, H, r, T, E), before
// reshaping it to [B, H·r, T, E]: the importer carries the rank-5 values flat and runs the expand on
// its merged axes ([B·H, 1, T·E] → [B·H, r, T·E]); any other op reading a rank-5 value is refused.
TEST_CASE("lower_onnx: a rank-5 repeat of key/value heads (unsqueeze, expand, reshape) runs at rank ≤ 4") {
  constexpr int64_t H = 2, R = 3;
  const auto build = [&](bool relu) {
    Builder b;
    value_info(b.g->add_input(), "k", {B, H, T, E});
    value_info(b.g->add_output(), "y",
               relu ? std::vector<int64_t>{B, H, 1, T, E} : std::vector<int64_t>{B, H * R, T, E});
    b.node("Unsqueeze", {"k", b.ints("axis2", {2})}, "k5");
    if (relu) {
      b.node("Relu", {"k5"}, "y");
    } else {
      b.node("Expand", {"k5", b.ints("rep", {B, H, R, T, E})}, "kr");
      b.node("Reshape", {"kr", b.ints("merged", {B, H * R, T, E})}, "y");
    }
    const std::string bytes = b.m.SerializeAsString();
    return import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), "repeat.onnx");
  };
  const auto model = build(false);
  LowerOptions o;
  o.inputs.push_back({"k", Shape{B, H, T, E}});
  const LoweredGraph g = lower_onnx(*model, o);
  for (const LoweredNode& n : g.nodes) CHECK(n.outputs.at(0).rank() <= 4);
  bool expanded = false;
  for (const LoweredNode& n : g.nodes)
    if (n.op == OpKind::Expand) {
      expanded = true;
      CHECK(n.outputs.at(0) == Shape{B * H, R, T * E});
    }
  CHECK(expanded);
  // Run it: y[b, h·R + r, t, e] = k[b, h, t, e], bit for bit.
  Tensor k(Shape{B, H, T, E});
  for (int64_t i = 0; i < k.numel(); ++i) k[i] = static_cast<float>(i) + 0.25f;
  REQUIRE(g.constants.empty());
  const Tensor y = testing::execute(g, {k}, {}).at(0);
  REQUIRE(y.shape() == Shape{B, H * R, T, E});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H * R; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < E; ++e)
          CHECK(y[((b * H * R + h) * T + t) * E + e] == k[((b * H + h / R) * T + t) * E + e]);
  // A Relu of the rank-5 value: refused, naming the node and the rank.
  try {
    (void)build(true);
    FAIL("imported a Relu of a rank-5 value");
  } catch (const OnnxError& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.find("(Relu, opset 17): reads 'k5' of rank 5; RepOps tensors have rank ≤ 4") !=
          std::string::npos);
  }
}

}  // namespace tribunal
