// ONNX's own backend node tests (libonnx-testdata, tests/onnx/onnx_test_data.h) as an oracle for the
// importer (onnx/lower.h): every test whose graph the importer lowers is run on the CPU reference kernels
// (ops/registry.h run_reference) and compared with ONNX's expected outputs at the tolerance of ONNX
// 1.12's backend test runner (onnx/backend/test/loader: rtol 1e-3, atol 1e-7, compared by
// numpy.testing.assert_allclose: |actual − expected| ≤ atol + rtol·|expected|, NaN equal to NaN).
// A test the importer refuses is skipped with its message as the reason, except that a test of a
// supported op (onnx_supported_ops) may only be refused for a limit the importer documents.
//
// TRIBUNAL_NODE_TEST_LIST=<path> makes the case "node test list" write the markdown table of
// docs/onnx-node-tests.md to <path>.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include "onnx/const_eval.h"
#include "onnx/lower.h"
#include "ops/registry.h"
#include "tests/onnx/onnx_test_data.h"

namespace tribunal {
namespace {

// ONNX 1.12 onnx/backend/test/loader/__init__.py: the defaults of every node test (node tests carry
// no data.json of their own).
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;

/// How one node test went.
struct NodeTestResult {
  std::string name;
  std::string op;              ///< the op types of its graph, "+"-joined in first-use order
  bool all_supported = false;  ///< every op type is in onnx_supported_ops()
  bool ran = false;
  std::string how;  ///< ran: "lowered" (float inputs at run time), "folded" (all inputs constant)
  int data_sets = 0;
  std::vector<std::string> failures;  ///< ran: outputs outside the tolerance
  std::string reason;                 ///< skipped: why
  bool documented = true;             ///< skipped: the reason is a limit the importer documents
};

bool contains(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}

/// Whether an importer refusal is one of the limits docs/onnx.md states (an op, attribute, shape,
/// element type or opset it does not take), as opposed to an error the importer should not raise on a
/// valid ONNX test.
bool documented_refusal(const std::string& message) {
  for (const char* limit : {
           " is not supported",                     // an op, attribute or shape (unsupported())
           "is supported only on constant inputs",  // a folding-only op fed at run time
           "is an int64 constant, not a float tensor",
           "the importer feeds float tensors",  // and int64 token ids only
           "the importer reads run-time int64 values only as Gather indices",
           "the importer does not convert integer tensors",
           "RepOps tensors have rank",
           "which no supported node produced",  // an optional output the importer does not compute
           "the importer reads float, int64",   // an element type OnnxConstant cannot hold
           "is not a tensor",                   // sequence and optional values
           "an element type the importer does not read",
           "the importer needs it constant",  // a Dropout's ratio, a Reshape's shape
           "the importer supports opsets",
       })
    if (contains(message, limit)) return true;
  return false;
}

/// The category of a skip, for the summary.
std::string category(const std::string& reason) {
  if (contains(reason, "op type ") && contains(reason, " is not supported (supported:"))
    return "op not supported";
  if (contains(reason, "predates")) return "opset older than the op's opset-17 definition";
  if (contains(reason, "is supported only on constant inputs")) return "folding-only op fed at run time";
  if (contains(reason, " is not supported")) return "attribute or shape not supported";
  if (contains(reason, "element type") || contains(reason, "float tensors only") ||
      contains(reason, "int64 constant") || contains(reason, "is not a tensor") ||
      contains(reason, "the importer reads float"))
    return "element type not supported";
  if (contains(reason, "RepOps tensors have rank")) return "rank above RepOps' 4";
  if (contains(reason, "attributes of this kind") || contains(reason, "is a graph: subgraphs"))
    return "graph (subgraph) or list attribute";
  if (contains(reason, "the importer needs it constant")) return "an input the importer needs constant";
  if (contains(reason, "training mode")) return "Dropout in training mode (RepOps' own mask)";
  if (contains(reason, "which no supported node produced")) return "optional output not computed";
  if (contains(reason, "the importer supports opsets")) return "opset outside 13–17";
  return "other";
}

Tensor to_tensor(const OnnxConstant& c) {
  return Tensor(Shape(std::span<const int64_t>(c.dims)), std::span<const float>(c.floats));
}

/// numpy.testing.assert_allclose(actual, expected, rtol, atol) on float32 values computed in double,
/// as numpy does; "" when they agree, else what differs.
std::string compare(const OnnxConstant& actual, const OnnxConstant& expected) {
  if (actual.type != expected.type) return "element type differs";
  if (actual.dims != expected.dims) return "shape differs";
  if (actual.type == OnnxConstant::Type::Int64)
    return actual.ints == expected.ints ? "" : "int64 values differ";
  for (size_t i = 0; i < expected.floats.size(); ++i) {
    const double a = actual.floats[i], e = expected.floats[i];
    if (std::isnan(a) && std::isnan(e)) continue;
    if (std::isinf(a) || std::isinf(e)) {
      if (a != e) return fmt::format("element {}: {} against {}", i, a, e);
      continue;
    }
    if (!(std::fabs(a - e) <= kAtol + kRtol * std::fabs(e)))
      return fmt::format("element {}: {} against {} (rtol {}, atol {})", i, a, e, kRtol, kAtol);
  }
  return "";
}

OnnxConstant from_tensor(const Tensor& t) {
  OnnxConstant c;
  c.dims.assign(t.shape().dims().begin(), t.shape().dims().end());
  c.floats.assign(t.values().begin(), t.values().end());
  return c;
}

/// Folds a graph of foldable nodes on constant inputs exactly as lower_onnx's folding does (the
/// same fold_constant / fold_shape calls): the path of a graph whose outputs are int64 or of rank
/// above 4, which lower_onnx does not hand out as graph outputs.
std::vector<OnnxConstant> fold_graph(const OnnxModel& model, std::map<std::string, OnnxConstant> values) {
  for (const OnnxNode& node : model.nodes()) {
    std::vector<OnnxConstant> out;
    if (node.op_type == "Shape") {
      out.push_back(fold_shape(node, values.at(node.inputs.at(0)).dims, model.where(node)));
    } else {
      std::vector<const OnnxConstant*> in;
      for (const std::string& name : node.inputs) in.push_back(name.empty() ? nullptr : &values.at(name));
      out = fold_constant(node, in, model.opset(), model.where(node), uint64_t{1} << 29);
    }
    for (size_t s = 0; s < out.size() && s < node.outputs.size(); ++s)
      if (!node.outputs[s].empty()) values[node.outputs[s]] = std::move(out[s]);
  }
  std::vector<OnnxConstant> outs;
  for (const auto& o : model.outputs()) outs.push_back(values.at(o.name));
  return outs;
}

/// The graph input a refusal "its <role> '<name>' is computed at run time; the importer needs it
/// constant" names (a Pow's exponent, a Reshape's shape), or "".
std::string needed_constant(const std::string& what) {
  const std::string tail = "' is computed at run time; the importer needs it constant";
  const size_t end = what.find(tail);
  if (end == std::string::npos) return "";
  const size_t start = what.rfind('\'', end - 1);
  return start == std::string::npos ? "" : what.substr(start + 1, end - start - 1);
}

/// Lowers (or, for `fold_all`, folds) one data set and compares its outputs; "" when they agree.
/// Graph inputs in `constants` are fed as constants: the importer takes an input it needs constant (a
/// Pow's exponent) that way, as a model states it. Throws OnnxError when the importer refuses it.
std::string run_data_set(const OnnxModel& model, const testing::OnnxNodeTestData& set, bool fold_all,
                         const std::set<std::string>& constants = {}) {
  LowerOptions options;
  // A training-mode BatchNormalization normalizes by the batch only in a training step's lowering.
  options.training = std::any_of(model.nodes().begin(), model.nodes().end(), [](const OnnxNode& n) {
    auto t = n.attributes.find("training_mode");
    return n.op_type == "BatchNormalization" && t != n.attributes.end() && t->second.i != 0;
  });
  std::vector<Tensor> inputs;
  std::map<std::string, OnnxConstant> all_constant;
  for (size_t k = 0; k < set.inputs.size(); ++k) {
    auto t = testing::read_tensor_pb(set.inputs[k]);
    if (!t)
      throw OnnxError(
          fmt::format("{}: an input of an element type the importer does not read (float, int64, int32, "
                      "int8, uint8, bool)",
                      set.inputs[k].string()));
    const std::string name = !t->name.empty() ? t->name : model.inputs().at(k).name;
    all_constant[name] = t->value;
    if (t->value.dims.size() > static_cast<size_t>(kMaxRank))
      throw OnnxError(fmt::format("input '{}' has rank {}; RepOps tensors have rank ≤ {}", name,
                                  t->value.dims.size(), kMaxRank));
    if (fold_all || t->value.type == OnnxConstant::Type::Int64 || constants.count(name)) {
      options.constant_inputs[name] = t->value;
    } else {
      options.inputs.push_back({name, Shape(std::span<const int64_t>(t->value.dims))});
      inputs.push_back(to_tensor(t->value));
    }
  }
  std::vector<OnnxConstant> expected;
  for (const auto& file : set.outputs) {
    auto t = testing::read_tensor_pb(file);
    if (!t)
      throw OnnxError(
          fmt::format("{}: an output of an element type the importer does not read (float, int64, int32, "
                      "int8, uint8, bool)",
                      file.string()));
    expected.push_back(t->value);
  }
  std::vector<OnnxConstant> actual;
  try {
    LoweredGraph g;
    try {
      g = lower_onnx(model, options);
    } catch (const OnnxError& e) {
      const std::string input = needed_constant(e.what());
      if (!input.empty() && all_constant.count(input) && !constants.count(input)) {
        std::set<std::string> more = constants;
        more.insert(input);
        return run_data_set(model, set, fold_all, more);
      }
      // LayerNormalization's tests also ask for its optional Mean and InvStdDev outputs, which the
      // importer does not compute (torch's export never reads them): the first output is compared alone.
      if (!contains(e.what(), "which no supported node produced") || model.nodes().size() != 1 ||
          model.nodes()[0].op_type != "LayerNormalization" || fold_all)
        throw;
      options.outputs = {model.outputs().at(0).name};
      g = lower_onnx(model, options);
      expected.resize(1);
    }
    std::vector<Tensor> params;
    for (uint32_t i = 0; i < model.params().size(); ++i)
      params.push_back(to_tensor(model.initializers().at(model.params()[i])));
    for (const Tensor& t : testing::execute(g, inputs, params)) actual.push_back(from_tensor(t));
  } catch (const OnnxError& e) {
    // Every input constant and an output lower_onnx does not hand out (int64, or of rank above RepOps'
    // 4): the folding lower_onnx does, its outputs read directly.
    if (!fold_all || !(contains(e.what(), "is an int64 constant, not a float tensor") ||
                       contains(e.what(), "RepOps tensors have rank")))
      throw;
    for (const auto& [name, c] : model.initializers()) all_constant.emplace(name, c);
    actual = fold_graph(model, all_constant);
  }
  if (actual.size() != expected.size())
    return fmt::format("{} outputs, the test has {}", actual.size(), expected.size());
  for (size_t k = 0; k < actual.size(); ++k) {
    const std::string diff = compare(actual[k], expected[k]);
    if (!diff.empty()) return fmt::format("{}: {}", set.outputs[k].filename().string(), diff);
  }
  return "";
}

bool foldable_graph(const OnnxModel& model) {
  return std::all_of(model.nodes().begin(), model.nodes().end(),
                     [](const OnnxNode& n) { return n.op_type == "Shape" || is_foldable(n.op_type); });
}

/// A Dropout whose training_mode input is a true constant (fed by the test): its mask comes from
/// numpy's generator in ONNX's data and from RepOps' counter-based one here, so the outputs differ.
bool training_dropout(const OnnxModel& model, const testing::OnnxNodeTestData& set) {
  for (const OnnxNode& n : model.nodes()) {
    if (n.op_type != "Dropout" || n.inputs.size() < 3 || n.inputs[2].empty()) continue;
    for (size_t k = 0; k < set.inputs.size(); ++k) {
      auto t = testing::read_tensor_pb(set.inputs[k]);
      const std::string name = t && !t->name.empty() ? t->name : model.inputs().at(k).name;
      if (name == n.inputs[2] && t && !t->value.ints.empty() && t->value.ints[0] != 0) return true;
    }
  }
  return false;
}

NodeTestResult run_node_test(const std::filesystem::path& dir, const std::set<std::string>& supported) {
  NodeTestResult r;
  r.name = dir.filename().string();
  // The op types straight from the file, so that a test the importer refuses to parse is named too.
  std::vector<std::string> ops;
  {
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromIstream(&in));
    for (const auto& n : proto.graph().node())
      if (std::find(ops.begin(), ops.end(), n.op_type()) == ops.end()) ops.push_back(n.op_type());
  }
  r.op = fmt::format("{}", fmt::join(ops, "+"));
  r.all_supported =
      std::all_of(ops.begin(), ops.end(), [&](const std::string& op) { return supported.count(op) > 0; });
  OnnxLimits limits;
  limits.min_opset = 1;  // a test is stamped with the opset its op was last defined in (below)
  std::optional<OnnxModel> model;
  try {
    model = testing::read_node_test_model(dir, limits);
  } catch (const OnnxError& e) {
    r.reason = e.what();
    r.documented = documented_refusal(r.reason);
    return r;
  }
  // The importer implements each op as defined at opsets 13–17; a test stamped with an older opset runs
  // only when the op's definition did not change since (e.g. Conv: opset 11 through 17).
  for (const std::string& op : ops) {
    const auto* schema = onnx::OpSchemaRegistry::Schema(op, 17, "");
    if (model->opset() < 13 && schema && schema->since_version() > model->opset()) {
      r.reason = fmt::format("opset {} predates {}'s opset-17 definition (opset {})", model->opset(), op,
                             schema->since_version());
      return r;
    }
  }
  // Every float initializer is a parameter (fed its value); lower_onnx reads those it needs.
  std::vector<std::string> params;
  for (const std::string& name : model->initializer_order())
    if (model->initializers().at(name).type == OnnxConstant::Type::Float32) params.push_back(name);
  model->set_params(params);

  const auto sets = testing::list_node_test(dir);
  for (bool fold_all : {false, true}) {
    if (fold_all && !foldable_graph(*model)) break;
    r.failures.clear();
    r.data_sets = 0;
    try {
      for (const auto& set : sets) {
        if (training_dropout(*model, set))
          throw OnnxError(
              "Dropout in training mode: ONNX's mask is numpy's draw, RepOps' is its own "
              "counter-based generator (docs/numerics.md)");
        const std::string diff = run_data_set(*model, set, fold_all);
        if (!diff.empty()) r.failures.push_back(fmt::format("{}: {}", set.dir.filename().string(), diff));
        ++r.data_sets;
      }
      r.ran = true;
      r.how = fold_all ? "folded (inputs constant)" : "lowered";
      r.reason.clear();
      return r;
    } catch (const OnnxError& e) {
      // The run-time-input refusal is the reason reported; the all-constant retry's only when it is
      // not a documented limit too.
      const std::string what = e.what();
      const bool documented = documented_refusal(what) || contains(what, "training mode");
      if (r.reason.empty()) {
        r.reason = what;
      } else if (!documented) {
        r.reason += fmt::format("; with every input constant: {}", what);
      }
      r.documented = r.documented && documented;
    } catch (const std::exception& e) {  // an OpError past lowering, a missing value: never expected
      r.reason += fmt::format("{}error: {}", r.reason.empty() ? "" : "; ", e.what());
      r.documented = false;
    }
  }
  return r;
}

std::vector<NodeTestResult> run_all() {
  const auto supported_list = onnx_supported_ops();
  const std::set<std::string> supported(supported_list.begin(), supported_list.end());
  std::vector<std::filesystem::path> dirs;
  for (const auto& e : std::filesystem::directory_iterator(testing::kOnnxNodeTests))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  std::vector<NodeTestResult> results;
  for (const auto& dir : dirs) results.push_back(run_node_test(dir, supported));
  return results;
}

/// The reason without the test data's path (the table is read in any checkout).
std::string short_reason(const std::string& reason) {
  std::string s = reason;
  const std::string prefix = testing::kOnnxNodeTests.string() + "/";
  for (size_t at; (at = s.find(prefix)) != std::string::npos;) s.erase(at, prefix.size());
  // "<test>/model.onnx: " and the list of supported ops add nothing to a row of the table.
  if (const size_t at = s.find("/model.onnx: "); at != std::string::npos && s.find(' ') > at)
    s.erase(0, at + std::string("/model.onnx: ").size());
  if (const size_t at = s.find(" (supported: "); at != std::string::npos && s.back() == ')') s.erase(at);
  std::replace(s.begin(), s.end(), '|', '/');
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

TEST_CASE("the oracle's comparison is assert_allclose at rtol 1e-3, atol 1e-7") {
  const auto f = [](std::vector<float> v) {
    OnnxConstant c;
    c.dims = {static_cast<int64_t>(v.size())};
    c.floats = std::move(v);
    return c;
  };
  CHECK(compare(f({1.0f, 0.0f, NAN}), f({1.0f, 0.0f, NAN})).empty());
  CHECK(compare(f({1000.9f}), f({1000.0f})).empty());  // |Δ| 0.9 ≤ 1e-7 + 1e-3·1000
  CHECK(contains(compare(f({1001.2f}), f({1000.0f})), "element 0"));
  CHECK(compare(f({5e-8f}), f({0.0f})).empty());  // atol alone near zero
  CHECK(!compare(f({2e-7f}), f({0.0f})).empty());
  CHECK(!compare(f({NAN}), f({1.0f})).empty());
  CHECK(!compare(f({INFINITY}), f({-INFINITY})).empty());
  CHECK(compare(f({1.0f, 2.0f}), f({1.0f})) == "shape differs");
  OnnxConstant i;
  i.type = OnnxConstant::Type::Int64;
  i.dims = {1};
  i.ints = {3};
  OnnxConstant j = i;
  j.ints = {4};
  CHECK(compare(i, i).empty());
  CHECK(compare(i, j) == "int64 values differ");
}

/// ONNX 1.12 has no MaxPool node test with a 2×2 window, stride 2 on an even H and W: the form that
/// lowers to max_pool2d's ints {} (the built-in CNN's; any other window lowers to the general form,
/// which the uncropped tests run). test_maxpool_2d_precomputed_strides has that window on a 5×5 input,
/// whose floor-mode output never reads row or column 4: cropped to 4×4 (model and data alike) it runs
/// the ints {} kernels, with ONNX's expected output unchanged. Returns "" when it passes.
std::string run_cropped_maxpool_test() {
  const auto dir = testing::kOnnxNodeTests / "test_maxpool_2d_precomputed_strides";
  onnx::ModelProto proto;
  {
    std::ifstream in(dir / "model.onnx", std::ios::binary);
    REQUIRE(proto.ParseFromIstream(&in));
  }
  auto* dims =
      proto.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  REQUIRE(dims->dim_size() == 4);
  REQUIRE(dims->dim(2).dim_value() == 5);
  REQUIRE(dims->dim(3).dim_value() == 5);
  dims->mutable_dim(2)->set_dim_value(4);
  dims->mutable_dim(3)->set_dim_value(4);
  const std::string bytes = proto.SerializeAsString();
  OnnxLimits limits;
  limits.min_opset = 12;  // MaxPool's opset-17 definition dates from opset 12
  const OnnxModel model =
      OnnxModel::parse(std::as_bytes(std::span(bytes.data(), bytes.size())), "cropped maxpool", limits);
  const auto sets = testing::list_node_test(dir);
  const auto x = testing::read_tensor_pb(sets.at(0).inputs.at(0));
  const auto y = testing::read_tensor_pb(sets.at(0).outputs.at(0));
  REQUIRE((x && y));
  REQUIRE(x->value.dims == std::vector<int64_t>{1, 1, 5, 5});
  OnnxConstant cropped;
  cropped.dims = {1, 1, 4, 4};
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) cropped.floats.push_back(x->value.floats[static_cast<size_t>(i * 5 + j)]);
  LowerOptions options;
  options.inputs.push_back({model.inputs().at(0).name, Shape{1, 1, 4, 4}});
  const LoweredGraph g = lower_onnx(model, options);
  const auto out = testing::execute(g, {to_tensor(cropped)}, {});
  REQUIRE(out.size() == 1);
  return compare(from_tensor(out[0]), y->value);
}

TEST_CASE("ONNX's node tests of every supported op pass at the backend runner's tolerance") {
  if (!std::filesystem::is_directory(testing::kOnnxNodeTests)) {
    MESSAGE("libonnx-testdata is not installed: skipped");  // CI installs it (scripts/bootstrap.sh)
    return;
  }
  const auto results = run_all();
  int ran = 0, passed = 0, skipped = 0;
  std::map<std::string, int> by_reason;
  std::set<std::string> covered;
  for (const NodeTestResult& r : results) {
    CAPTURE(r.name);
    if (r.ran) {
      ++ran;
      CHECK(r.data_sets >= 1);
      CHECK_MESSAGE(r.failures.empty(), fmt::format("{}", fmt::join(r.failures, "; ")));
      if (r.failures.empty()) {
        ++passed;
        for (const std::string& op : [&] {
               std::vector<std::string> v;
               std::stringstream ss(r.op);
               for (std::string op; std::getline(ss, op, '+');) v.push_back(op);
               return v;
             }())
          covered.insert(op);
      }
    } else {
      ++skipped;
      ++by_reason[category(r.reason)];
      // A supported op may be refused only for a limit the importer documents.
      if (r.all_supported) CHECK_MESSAGE(r.documented, r.reason);
    }
  }
  const std::string maxpool = run_cropped_maxpool_test();
  CHECK_MESSAGE(maxpool.empty(), maxpool);
  if (maxpool.empty()) {
    ++ran, ++passed;
    covered.insert("MaxPool");
  }
  // Every supported op is exercised by some node test that ran (Cast through the expanded window
  // functions' graphs, whose Cast tests proper all involve float16, bfloat16, double or string).
  for (const std::string& op : onnx_supported_ops()) {
    CAPTURE(op);
    CHECK_MESSAGE(covered.count(op) > 0, "no node test of this supported op runs");
  }
  std::string summary = fmt::format(
      "ONNX node tests: ran {}, passed {}, skipped {} (ran includes test_maxpool_2d_precomputed_strides "
      "cropped to 4×4)",
      ran, passed, skipped);
  for (const auto& [reason, n] : by_reason) summary += fmt::format("\n  skipped {}: {}", n, reason);
  MESSAGE(summary);
  CHECK(ran > 0);
}

TEST_CASE("node test list (TRIBUNAL_NODE_TEST_LIST=path writes docs/onnx-node-tests.md's table)") {
  const char* path = std::getenv("TRIBUNAL_NODE_TEST_LIST");
  if (!path || !std::filesystem::is_directory(testing::kOnnxNodeTests)) return;
  const auto results = run_all();
  std::ofstream out(path);
  REQUIRE(out);
  int ran = 0;
  for (const auto& r : results) ran += r.ran && r.failures.empty();
  out << "| test | op | outcome | reason |\n|---|---|---|---|\n";
  for (const auto& r : results) {
    std::string outcome = r.ran ? (r.failures.empty() ? "ran, passed" : "ran, FAILED") : "skipped";
    if (r.ran)
      outcome += fmt::format(" ({}, {} data set{})", r.how, r.data_sets, r.data_sets == 1 ? "" : "s");
    out << fmt::format(
        "| {} | {} | {} | {} |\n", r.name, r.op, outcome,
        r.ran ? (r.failures.empty() ? "" : short_reason(r.failures.front())) : short_reason(r.reason));
  }
  CHECK(ran > 0);
}

}  // namespace
}  // namespace tribunal
