// lower_onnx of a GPT-2 export (tests/fixtures/onnx/gpt2.onnx, tools/onnx_export.py: nanoGPT's module
// exported by torch 1.13 at opset 17 in training mode): the token ids fed at run time, the causal-mask
// buffers folded rather than trained, the tied LM head read as a transposed product, and each of the
// graph's ops lowered onto the RepOps op docs/onnx.md names for it.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "onnx/lower.h"
#include "ops/registry.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

std::shared_ptr<const OnnxModel> import_fixture(const char* name) {
  const auto path = testing::source_dir() / "tests/fixtures/onnx" / name;
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  REQUIRE(!bytes.empty());
  return import_onnx(std::as_bytes(std::span(bytes.data(), bytes.size())), name);
}

std::map<std::string, int> op_counts(const LoweredGraph& g) {
  std::map<std::string, int> n;
  for (const LoweredNode& node : g.nodes) {
    // fmt rather than string concatenation, which g++ 12 at -O3 warns about falsely (-Wrestrict).
    if (node.op == OpKind::Unary)
      ++n[fmt::format("unary/{}", node.attrs.ints.at(0))];
    else if (node.op == OpKind::Matmul)
      ++n[fmt::format("matmul/{}{}", node.attrs.ints.at(0), node.attrs.ints.at(1))];
    else
      ++n[op_name(node.op)];
  }
  return n;
}

}  // namespace

TEST_CASE("lower_onnx: a GPT-2 export's parameters are its weights, not its causal-mask buffers") {
  const auto model = import_fixture("gpt2.onnx");
  const std::vector<std::string>& p = model->params();
  // 2 embeddings, 12 tensors per block (2 layer norms, c_attn, c_proj, 2 MLP linears, weight and bias
  // each) × 2, ln_f: the module's named_parameters(), the LM head tied to wte (one tensor).
  CHECK(p.size() == 2 + 12 * 2 + 2);
  CHECK(p.front() == "wte.weight");
  CHECK(std::find(p.begin(), p.end(), "h.0.attn.bias") == p.end());  // register_buffer: folded
  CHECK(std::find(p.begin(), p.end(), "h.1.attn.bias") == p.end());
  CHECK(std::find(p.begin(), p.end(), "h.1.attn.c_attn.weight") != p.end());
  int64_t n = 0;
  for (const Tensor& t : onnx_param_tensors(*model)) n += t.numel();
  CHECK(n == 34688);  // tools/onnx_export.py prints the module's parameter count
}

TEST_CASE("lower_onnx: a GPT-2 export's ops and shapes on a batch of token ids") {
  const auto model = import_fixture("gpt2.onnx");
  LowerOptions o;
  o.inputs.push_back({"ids", Shape{4, 32}});
  o.training = true;
  o.seed = 7;
  const LoweredGraph g = lower_onnx(*model, o);
  REQUIRE(g.output_shapes.size() == 1);
  CHECK(g.output_shapes[0] == Shape{4, 32, 256});
  const auto n = op_counts(g);
  CHECK(n.at("gather_rows") == 2);  // wte at the ids, wpe at Range(0, 32) (a constant)
  CHECK(n.at("layer_norm") == 5);   // 2 per block, ln_f
  CHECK(n.at("softmax") == 2);      // over the last axis of [4, 2, 32, 32]
  CHECK(n.at("where") == 2);        // the causal mask, folded from the buffer
  CHECK(n.at("slice") == 6);        // Split of q, k, v per block
  CHECK(n.at("transpose") == 8);    // q, k, v, and the merge of the heads per block
  CHECK(n.at("dropout") == 7);      // embedding, attention, residual, MLP
  CHECK(n.at("unary/6") == 1);      // nn.GELU(): Erf
  CHECK(n.at("unary/5") == 1);      // GPT-2's tanh form: Tanh …
  CHECK(n.at("unary/10") == 1);     // … and Pow(x, 3)
  // Every nn.Linear on [B, T, D] (x·Wᵀ) and the tied head read the weight transposed: no transpose of a
  // weight is materialised. The two attention products per block are batched.
  CHECK(n.at("matmul/01") == 9);
  CHECK(n.at("matmul/00") == 4);
  CHECK(n.count("gather") == 0);
  for (const LoweredNode& node : g.nodes)
    if (node.op == OpKind::Transpose) CHECK(node.outputs.at(0).rank() == 4);
  // The ids are read only by the embedding.
  int reads = 0;
  for (const LoweredNode& node : g.nodes)
    for (const LoweredRef& r : node.inputs) reads += r.kind == LoweredRef::Kind::Input;
  CHECK(reads == 1);
  // Not training: the Dropout nodes are identities.
  o.training = false;
  CHECK(op_counts(lower_onnx(*model, o)).count("dropout") == 0);
}
