// ONNX Conv lowered to conv2d (onnx/lower.cpp map_conv): the short form {stride, pad} where it fits (the
// bytes of jobs lowered before the general form existed), the general form for groups, dilations,
// per-axis strides, asymmetric pads and auto_pad, the lowered graph run against a naive double
// convolution, and a padding the op cannot take refused naming the node. Small ModelProtos built here.
#include <doctest/doctest.h>

// GCC 12 reports a false -Wrestrict inside std::string for protobuf's inlined set_x(const char*) (GCC
// bug 105329); the strings here are literals.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <onnx/onnx_pb.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "onnx/lower.h"
#include "ops/registry.h"
#include "tests/onnx/onnx_test_data.h"

namespace tribunal {
namespace {

struct ConvAttrs {
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  std::string auto_pad;  ///< "" = absent
};

void ints_attr(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

/// X[x] → Conv(X, W[w] (random), B[w[0]] (random)) named "conv" → Y (sizes left to inference).
onnx::ModelProto conv_model(std::vector<int64_t> x, std::vector<int64_t> w, const ConvAttrs& at) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* in = g->add_input();
  in->set_name("X");
  auto* it = in->mutable_type()->mutable_tensor_type();
  it->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : x) it->mutable_shape()->add_dim()->set_dim_value(d);
  auto* out = g->add_output();
  out->set_name("Y");
  auto* ot = out->mutable_type()->mutable_tensor_type();
  ot->set_elem_type(onnx::TensorProto::FLOAT);
  for (const char* d : {"n", "o", "h", "w"}) ot->mutable_shape()->add_dim()->set_dim_param(d);
  const auto init = [&](const char* name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      count *= d;
    }
    for (int64_t i = 0; i < count; ++i) t->add_float_data(u(rng));
  };
  init("W", w);
  init("B", {w[0]});
  auto* n = g->add_node();
  n->set_name("conv");
  n->set_op_type("Conv");
  n->add_input("X");
  n->add_input("W");
  n->add_input("B");
  n->add_output("Y");
  ints_attr(n, "strides", at.strides);
  ints_attr(n, "pads", at.pads);
  ints_attr(n, "dilations", at.dilations);
  if (at.group != 1) {
    auto* a = n->add_attribute();
    a->set_name("group");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(at.group);
  }
  if (!at.auto_pad.empty()) {
    auto* a = n->add_attribute();
    a->set_name("auto_pad");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(at.auto_pad);
  }
  return m;
}

std::shared_ptr<const OnnxModel> import(const onnx::ModelProto& m) {
  const std::string bytes = m.SerializeAsString();
  return import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), "conv.onnx");
}

/// Lowers the model for input shape x, checks the one conv2d node's ints, runs it and compares every
/// output with ONNX Conv's definition computed in double here: y[n,o,r,s] = B[o] + Σ over the channels c
/// of o's group and the taps (i, j) of W[o,c,i,j]·X[n, group·C/G + c, r·sh + i·dh − pt, s·sw + j·dw − pl]
/// (zero outside X), with pads and dilations as ONNX gives them (`pads` = [pt, pl, pb, pr]).
void check_conv(const onnx::ModelProto& proto, const Shape& x, const std::vector<int64_t>& want_ints,
                const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                const std::vector<int64_t>& dilations, int64_t group, const Shape& want_y) {
  const auto model = import(proto);
  LowerOptions o;
  o.inputs.push_back({"X", x});
  const LoweredGraph g = lower_onnx(*model, o);
  REQUIRE(g.nodes.size() == 1);
  CHECK(g.nodes[0].op == OpKind::Conv2d);
  CHECK(g.nodes[0].attrs.ints == want_ints);
  REQUIRE(g.output_shapes.at(0) == want_y);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Tensor xt(x);
  for (float& v : xt.values()) v = u(rng);
  const std::vector<Tensor> params = onnx_param_tensors(*model);
  const Tensor& w = params.at(0);
  const Tensor& b = params.at(1);
  const Tensor y = testing::execute(g, {xt}, params).at(0);
  const Shape& ws = w.shape();
  const int64_t cg = ws[1], og = ws[0] / group;
  for (int64_t n = 0; n < want_y[0]; ++n)
    for (int64_t oc = 0; oc < want_y[1]; ++oc)
      for (int64_t r = 0; r < want_y[2]; ++r)
        for (int64_t s = 0; s < want_y[3]; ++s) {
          double acc = b[oc], mag = std::fabs(acc);
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < ws[2]; ++i)
              for (int64_t j = 0; j < ws[3]; ++j) {
                const int64_t hh = r * strides[0] + i * dilations[0] - pads[0];
                const int64_t ww = s * strides[1] + j * dilations[1] - pads[1];
                if (hh < 0 || hh >= x[2] || ww < 0 || ww >= x[3]) continue;
                const double t = static_cast<double>(w[((oc * cg + c) * ws[2] + i) * ws[3] + j]) *
                                 xt[((n * x[1] + oc / og * cg + c) * x[2] + hh) * x[3] + ww];
                acc += t;
                mag += std::fabs(t);
              }
          const double got = y[((n * want_y[1] + oc) * want_y[2] + r) * want_y[3] + s];
          // A chain of at most C/G·KH·KW + 1 roundings, each within 2⁻²⁴ of the magnitudes summed.
          CHECK(std::fabs(got - acc) <= static_cast<double>(cg * ws[2] * ws[3] + 2) * 0x1p-24 * mag);
        }
}

}  // namespace

TEST_CASE("lower_onnx: Conv with one stride and equal pads keeps conv2d's short form {stride, pad}") {
  check_conv(conv_model({2, 3, 7, 7}, {4, 3, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {}, 1, ""}), Shape{2, 3, 7, 7},
             {2, 1}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, Shape{2, 4, 4, 4});
}

TEST_CASE(
    "lower_onnx: Conv with groups, dilations, per-axis strides and asymmetric pads → the general form") {
  // ResNeXt-like: 2 groups of 2 channels, dilation (2, 1), strides (1, 2), pads [top 2, left 0, bottom 1,
  // right 1]: OH = (7 + 3 − 5)/1 + 1 = 6, OW = (6 + 1 − 2)/2 + 1 = 3.
  check_conv(conv_model({2, 4, 7, 6}, {6, 2, 3, 2}, {{1, 2}, {2, 0, 1, 1}, {2, 1}, 2, ""}), Shape{2, 4, 7, 6},
             {1, 2, 2, 0, 1, 1, 2, 1, 2}, {1, 2}, {2, 0, 1, 1}, {2, 1}, 2, Shape{2, 6, 6, 3});
  // Depthwise (group = C) with a channel multiplier of 2.
  check_conv(conv_model({1, 3, 5, 5}, {6, 1, 3, 3}, {{}, {1, 1, 1, 1}, {}, 3, ""}), Shape{1, 3, 5, 5},
             {1, 1, 1, 1, 1, 1, 1, 1, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 3, Shape{1, 6, 5, 5});
}

TEST_CASE("lower_onnx: Conv's auto_pad SAME_UPPER, SAME_LOWER and VALID become explicit pads") {
  // 5×5, kernel 2, stride 1: output 5, one pad row and column in all, at the end (UPPER) or start (LOWER).
  check_conv(conv_model({1, 2, 5, 5}, {3, 2, 2, 2}, {{}, {}, {}, 1, "SAME_UPPER"}), Shape{1, 2, 5, 5},
             {1, 1, 0, 0, 1, 1, 1, 1, 1}, {1, 1}, {0, 0, 1, 1}, {1, 1}, 1, Shape{1, 3, 5, 5});
  check_conv(conv_model({1, 2, 5, 5}, {3, 2, 2, 2}, {{}, {}, {}, 1, "SAME_LOWER"}), Shape{1, 2, 5, 5},
             {1, 1, 1, 1, 0, 0, 1, 1, 1}, {1, 1}, {1, 1, 0, 0}, {1, 1}, 1, Shape{1, 3, 5, 5});
  // Dilation 2 makes the 3×3 kernel's extent 5: SAME pads 2 on every side (the short form does not fit:
  // dilation ≠ 1).
  check_conv(conv_model({1, 2, 6, 6}, {3, 2, 3, 3}, {{}, {}, {2, 2}, 1, "SAME_UPPER"}), Shape{1, 2, 6, 6},
             {1, 1, 2, 2, 2, 2, 2, 2, 1}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1, Shape{1, 3, 6, 6});
  check_conv(conv_model({1, 2, 5, 5}, {3, 2, 3, 3}, {{2, 2}, {}, {}, 1, "VALID"}), Shape{1, 2, 5, 5}, {2, 0},
             {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, Shape{1, 3, 2, 2});
}

TEST_CASE("lower_onnx: a Conv pad as large as its dilated kernel side is refused naming the node") {
  // import_onnx lowers the graph once (to find its parameters), so the refusal comes from there.
  std::string message;
  try {
    import(conv_model({1, 2, 5, 5}, {3, 2, 3, 3}, {{}, {3, 0, 0, 0}, {}, 1, ""}));
  } catch (const OnnxError& e) {
    message = e.what();
  }
  CHECK(message.find("node 'conv' (Conv") != std::string::npos);
  CHECK(message.find("pads [3, 0, 0, 0] with a kernel extent 3×3") != std::string::npos);
}

}  // namespace tribunal
