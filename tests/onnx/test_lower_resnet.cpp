// lower_onnx of a ResNet as torch 1.13 exports it in training mode (tests/fixtures/onnx/resnet.onnx,
// tools/onnx_export.py Resnet): BatchNormalization's running mean and variance are buffers — state a
// training step reads and replaces, which the optimizer does not train (docs/onnx.md "Parameters and
// buffers") — and each training-mode node normalizes by the batch in a training step and by its
// running statistics in evaluation. A running statistic read by anything but its BatchNormalization is
// refused, naming it.
#include <doctest/doctest.h>

// GCC 12 reports a false -Wrestrict inside std::string for protobuf's inlined set_x(const char*) (GCC
// bug 105329); the strings here are literals.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "onnx/lower.h"
#include "ops/registry.h"
#include "tests/onnx/onnx_test_data.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

std::string fixture_bytes() {
  const auto path = testing::source_dir() / "tests/fixtures/onnx/resnet.onnx";
  std::ifstream in(path, std::ios::binary);
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  REQUIRE(!bytes.empty());
  return bytes;
}

std::shared_ptr<const OnnxModel> import_bytes(const std::string& bytes) {
  return import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), "resnet.onnx");
}

int count(const LoweredGraph& g, OpKind op) {
  return static_cast<int>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [&](const LoweredNode& n) { return n.op == op; }));
}

LoweredGraph lower(const OnnxModel& model, bool training, int64_t batch) {
  LowerOptions o;
  o.inputs.push_back({"x", Shape{batch, 784}});
  o.training = training;
  return lower_onnx(model, o);
}

}  // namespace

TEST_CASE("lower_onnx: a ResNet's BatchNorm running statistics are buffers, its scales and shifts weights") {
  const auto model = import_bytes(fixture_bytes());
  // 6 convolutions (no bias), 6 BatchNorms' weight and bias, the classifier's weight and bias.
  CHECK(model->params().size() == 6 + 12 + 2);
  CHECK(std::find(model->params().begin(), model->params().end(), "bn1.weight") != model->params().end());
  CHECK(std::find(model->params().begin(), model->params().end(), "bn1.running_mean") ==
        model->params().end());
  int64_t n = 0;
  for (const Tensor& t : onnx_param_tensors(*model)) n += t.numel();
  CHECK(n == 5122);  // tools/onnx_export.py prints the module's parameter count
  // Every BatchNorm's mean then variance, in file order, with the values the export left: torch's 0
  // and 1, moved once by the training-mode forward torch.onnx.export traces (an all-zero input: mean
  // 0·0.1, variance 1·0.9 + 0·0.1).
  const std::vector<std::string> buffers = {"bn1.running_mean",
                                            "bn1.running_var",
                                            "layer1.bn1.running_mean",
                                            "layer1.bn1.running_var",
                                            "layer1.bn2.running_mean",
                                            "layer1.bn2.running_var",
                                            "layer2.bn1.running_mean",
                                            "layer2.bn1.running_var",
                                            "layer2.bn2.running_mean",
                                            "layer2.bn2.running_var",
                                            "layer2.downsample.1.running_mean",
                                            "layer2.downsample.1.running_var"};
  CHECK(model->buffers() == buffers);
  const std::vector<Tensor> initial = onnx_buffer_tensors(*model);
  REQUIRE(initial.size() == buffers.size());
  CHECK(initial[0].shape() == Shape{8});
  CHECK(initial[0][3] == 0.0f);
  CHECK(initial[1][3] == 0.9f);
  CHECK(initial[11].shape() == Shape{16});
}

TEST_CASE(
    "lower_onnx: a training step normalizes by the batch and updates every buffer; evaluation reads them") {
  const auto model = import_bytes(fixture_bytes());
  const LoweredGraph train = lower(*model, true, 4);
  CHECK(count(train, OpKind::BatchNorm) == 6);
  CHECK(count(train, OpKind::BatchNormInference) == 0);
  CHECK(count(train, OpKind::BatchNormRunning) == 12);
  REQUIRE(train.buffer_updates.size() == 12);
  for (size_t k = 0; k < 12; ++k) {
    CAPTURE(k);
    const LoweredRef& r = train.buffer_updates[k];
    REQUIRE(r.kind == LoweredRef::Kind::Node);
    const LoweredNode& n = train.nodes.at(r.index);
    CHECK(n.op == OpKind::BatchNormRunning);
    REQUIRE(n.inputs.size() == 2);
    CHECK(n.inputs[0].kind == LoweredRef::Kind::Buffer);
    CHECK(n.inputs[0].index == k);
    // The mean, then the variance; the file is PyTorch's, so the variance is the unbiased one that
    // torch.nn.BatchNorm2d keeps (statistic 2), and torch's momentum 0.1 is ONNX's 0.9.
    CHECK(n.attrs.ints == std::vector<int64_t>{k % 2 == 0 ? 0 : 2});
    REQUIRE(n.attrs.floats.size() == 1);
    CHECK(std::fabs(n.attrs.floats[0] - 0.9f) < 1e-6f);
  }
  const LoweredGraph eval = lower(*model, false, 4);
  CHECK(count(eval, OpKind::BatchNorm) == 0);
  CHECK(count(eval, OpKind::BatchNormRunning) == 0);
  CHECK(count(eval, OpKind::BatchNormInference) == 6);
  CHECK(eval.buffer_updates.empty());

  // Run on the reference kernels: the first BatchNorm's running mean moves from 0 towards the batch
  // mean of its input by (1 − momentum), its variance from 1; the evaluation graph's logits with the
  // initial buffers are finite and differ from the training step's (batch statistics).
  std::vector<Tensor> params = onnx_param_tensors(*model);
  const std::vector<Tensor> buffers = onnx_buffer_tensors(*model);
  Tensor x(Shape{4, 784});
  for (int64_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>((i * 37) % 101) / 101.0f;
  const std::vector<Tensor> out = testing::execute(train, {x}, params, buffers);
  REQUIRE(out.size() == 1 + 12);
  bool moved = false;
  for (int64_t c = 0; c < 8; ++c) moved = moved || out[1][c] != 0.0f;
  CHECK(moved);
  for (int64_t c = 0; c < 8; ++c) CHECK(out[2][c] > 0.81f - 1e-6f);  // 0.9·0.9 + 0.1·(a variance ≥ 0)
  const std::vector<Tensor> eval_out = testing::execute(eval, {x}, params, buffers);
  REQUIRE(eval_out.size() == 1);
  CHECK(eval_out[0].shape() == Shape{4, 10});
  CHECK(std::isfinite(eval_out[0][0]));
  CHECK(eval_out[0][0] != out[0][0]);
}

TEST_CASE("import_onnx refuses a running statistic that another node reads, naming it") {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(fixture_bytes()));
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type("Identity");
  n->set_name("peek");
  n->add_input("bn1.running_var");
  n->add_output("peeked");
  auto* o = m.mutable_graph()->add_output();
  o->set_name("peeked");
  auto* t = o->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_value(8);
  std::string what;
  try {
    import_bytes(m.SerializeAsString());
  } catch (const OnnxError& e) {
    what = e.what();
  }
  CHECK(
      what ==
      "resnet.onnx: initializer 'bn1.running_var' is a training-mode BatchNormalization's running statistic "
      "and is read 2 times; a running statistic must be read by its BatchNormalization alone (the step "
      "replaces it)");
}

TEST_CASE("lower_onnx refuses an inference-mode BatchNormalization in a training step, naming it") {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(fixture_bytes()));
  for (auto& node : *m.mutable_graph()->mutable_node())
    if (node.name() == "/bn1/BatchNormalization") {
      node.clear_output();
      node.add_output("/bn1/BatchNormalization_output_0");  // inference mode has one output
      for (auto& a : *node.mutable_attribute())
        if (a.name() == "training_mode") a.set_i(0);
    }
  const auto model = import_bytes(m.SerializeAsString());
  CHECK(model->buffers().size() == 10);  // bn1's statistics are constants of an inference-mode node
  CHECK_NOTHROW(lower(*model, false, 4));
  std::string what;
  try {
    lower(*model, true, 4);
  } catch (const OnnxError& e) {
    what = e.what();
  }
  CHECK(what ==
        "resnet.onnx: node '/bn1/BatchNormalization' (BatchNormalization, opset 17): training_mode = 0 in a "
        "training step (a BatchNorm frozen in eval(): its gradients are not implemented; export with "
        "training=torch.onnx.TrainingMode.TRAINING) is not supported");
}
