#include "engine/model.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/error.h"
#include "onnx/lower.h"
#include "ops/philox.h"

namespace tribunal {
namespace {

// prefix + decimal index, e.g. "h3" (appended in place: GCC 12 warns falsely on "lit" + string).
std::string indexed(const char* prefix, int64_t index) {
  std::string s(prefix);
  s += std::to_string(index);
  return s;
}

std::vector<ParamSpec> mlp_params(const ModelSpec& model) {
  std::vector<ParamSpec> params;
  const auto& w = model.widths;
  for (size_t l = 0; l + 1 < w.size(); ++l) {
    const std::string prefix = indexed("l", l);
    params.push_back({prefix + ".weight", Shape{w[l], w[l + 1]}, w[l]});
    params.push_back({prefix + ".bias", Shape{w[l + 1]}, w[l]});
  }
  return params;
}

std::vector<ParamSpec> gpt_params(const ModelSpec& m) {
  const int64_t V = m.vocab, T = m.context, D = m.d_model;
  std::vector<ParamSpec> params;
  const auto linear = [&](const std::string& name, int64_t in, int64_t out) {
    params.push_back({name + ".weight", Shape{in, out}, in});
    params.push_back({name + ".bias", Shape{out}, in});
  };
  const auto layer_norm = [&](const std::string& name) {
    params.push_back({name + ".weight", Shape{D}, 0, InitRule::Ones});
    params.push_back({name + ".bias", Shape{D}, 0, InitRule::Zeros});
  };
  params.push_back({"tok_emb", Shape{V, D}, 0, InitRule::Embedding});
  params.push_back({"pos_emb", Shape{T, D}, 0, InitRule::Embedding});
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string h = indexed("h", l);
    layer_norm(h + ".ln1");
    linear(h + ".attn.q", D, D);
    linear(h + ".attn.k", D, D);
    linear(h + ".attn.v", D, D);
    linear(h + ".attn.proj", D, D);
    layer_norm(h + ".ln2");
    linear(h + ".mlp.fc", D, 4 * D);
    linear(h + ".mlp.proj", 4 * D, D);
  }
  layer_norm("ln_f");
  linear("head", D, V);
  return params;
}

// The image size after the conv blocks (each halves it).
std::pair<int64_t, int64_t> cnn_final_size(const ModelSpec& m) {
  int64_t h = m.image_height, w = m.image_width;
  for (size_t i = 0; i < m.channels.size(); ++i) h /= 2, w /= 2;
  return {h, w};
}

std::vector<ParamSpec> cnn_params(const ModelSpec& m) {
  std::vector<ParamSpec> params;
  int64_t in = m.image_channels;
  const int64_t k = m.kernel;
  for (size_t i = 0; i < m.channels.size(); ++i) {
    const std::string conv = indexed("conv", i);
    const int64_t out = m.channels[i];
    params.push_back({conv + ".weight", Shape{out, in, k, k}, in * k * k});
    params.push_back({conv + ".bias", Shape{out}, in * k * k});
    in = out;
  }
  const auto [h, w] = cnn_final_size(m);
  const int64_t flat = in * h * w;
  params.push_back({"fc.weight", Shape{flat, m.classes}, flat});
  params.push_back({"fc.bias", Shape{m.classes}, flat});
  return params;
}

ValueId mlp_forward(GraphBuilder& b, const ModelSpec& model, std::span<const ValueId> params, ValueId x) {
  ValueId h = x;
  const size_t layers = model.widths.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const std::string prefix = indexed("l", l);
    h = b.add_node(OpKind::Linear, {}, {h, params[2 * l], params[2 * l + 1]}, prefix + ".out").front();
    if (l + 1 < layers) h = b.add_node(OpKind::Relu, {}, {h}, prefix + ".relu").front();
  }
  return h;
}

ValueId cnn_forward(GraphBuilder& b, const ModelSpec& m, std::span<const ValueId> params, ValueId x) {
  const int64_t batch = b.graph().values.at(x).shape[0];
  ValueId h = b.add_node(OpKind::Reshape, {{batch, m.image_channels, m.image_height, m.image_width}, {}}, {x},
                         "input.image")
                  .front();
  const int64_t pad = m.kernel / 2;
  for (size_t i = 0; i < m.channels.size(); ++i) {
    const std::string conv = indexed("conv", i);
    h = b.add_node(OpKind::Conv2d, {{1, pad}, {}}, {h, params[2 * i], params[2 * i + 1]}, conv + ".out")
            .front();
    h = b.add_node(OpKind::Relu, {}, {h}, conv + ".relu").front();
    h = b.add_node(OpKind::MaxPool2d, {}, {h}, conv + ".pool").front();
  }
  const Shape pooled = b.graph().values.at(h).shape;
  h = b.add_node(OpKind::Reshape, {{batch, pooled.numel() / batch}, {}}, {h}, "flatten").front();
  const size_t fc = 2 * m.channels.size();
  return b.add_node(OpKind::Linear, {}, {h, params[fc], params[fc + 1]}, "logits").front();
}

ValueId gpt_forward(GraphBuilder& b, const ModelSpec& m, std::span<const ValueId> params, ValueId x,
                    const ForwardOptions& options) {
  const int64_t batch = b.graph().values.at(x).shape[0], T = m.context, H = m.heads;
  const Attrs heads{{batch, T, H}, {}};
  const Attrs ln{{}, {kLayerNormEps}};
  const bool dropout = options.training && m.dropout > 0.0f;
  int64_t site = 0;
  // Dropout(v) in training with p > 0; v itself otherwise (no node).
  const auto drop = [&](ValueId v, const std::string& name) {
    if (!dropout) return v;
    const Attrs attrs{
        {static_cast<int64_t>(options.seed), options.step, site++ * options.shards + options.shard},
        {m.dropout}};
    return b.add_node(OpKind::Dropout, attrs, {v}, name).front();
  };
  const auto linear = [&](ValueId in, size_t p, const std::string& name) {
    return b.add_node(OpKind::Linear, {}, {in, params[p], params[p + 1]}, name).front();
  };
  const auto layer_norm = [&](ValueId in, size_t p, const std::string& name) {
    return b.add_node(OpKind::LayerNorm, ln, {in, params[p], params[p + 1]}, name).front();
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(m.d_model / H));  // sqrt is correctly rounded

  ValueId h = b.add_node(OpKind::Embedding, {}, {params[0], params[1], x}, "embed").front();
  h = drop(h, "embed.dropout");
  size_t p = 2;  // the next parameter (model_params order)
  for (int64_t l = 0; l < m.layers; ++l) {
    const std::string name = indexed("h", l);
    const ValueId a = layer_norm(h, p, name + ".ln1");
    const ValueId q = linear(a, p + 2, name + ".attn.q");
    const ValueId k = linear(a, p + 4, name + ".attn.k");
    const ValueId v = linear(a, p + 6, name + ".attn.v");
    const ValueId qh = b.add_node(OpKind::SplitHeads, heads, {q}, name + ".attn.q.heads").front();
    const ValueId kh = b.add_node(OpKind::SplitHeads, heads, {k}, name + ".attn.k.heads").front();
    const ValueId vh = b.add_node(OpKind::SplitHeads, heads, {v}, name + ".attn.v.heads").front();
    const ValueId s = b.add_node(OpKind::Matmul, {{0, 1}, {}}, {qh, kh}, name + ".attn.scores").front();
    const ValueId pr = b.add_node(OpKind::Softmax, {{1}, {scale}}, {s}, name + ".attn.softmax").front();
    const ValueId o = b.add_node(OpKind::Matmul, {{0, 0}, {}}, {pr, vh}, name + ".attn.context").front();
    const ValueId merged = b.add_node(OpKind::MergeHeads, heads, {o}, name + ".attn.merge").front();
    const ValueId attn = drop(linear(merged, p + 8, name + ".attn.proj"), name + ".attn.dropout");
    h = b.add_node(OpKind::Add, {}, {h, attn}, name + ".attn.residual").front();
    const ValueId a2 = layer_norm(h, p + 10, name + ".ln2");
    const ValueId fc = linear(a2, p + 12, name + ".mlp.fc");
    const ValueId g = b.add_node(OpKind::Gelu, {}, {fc}, name + ".mlp.gelu").front();
    const ValueId mlp = drop(linear(g, p + 14, name + ".mlp.proj"), name + ".mlp.dropout");
    h = b.add_node(OpKind::Add, {}, {h, mlp}, name + ".out").front();
    p += 16;
  }
  h = layer_norm(h, p, "ln_f");
  return linear(h, p + 2, "logits");
}

const OnnxModel& imported(const ModelSpec& m) {
  if (!m.onnx)
    throw EngineError(
        fmt::format("the onnx model '{}' has not been imported on this node (locate_model_files)", m.file));
  return *m.onnx;
}

// The imported model's parameters: its float initializers read at run time, in file order, with the
// file's names and layouts (state 0 holds their values: initial_state).
std::vector<ParamSpec> onnx_params(const ModelSpec& m) {
  const OnnxModel& model = imported(m);
  std::vector<ParamSpec> out;
  for (const std::string& name : model.params()) {
    const auto& dims = model.initializers().at(name).dims;
    out.push_back({name, Shape(std::span<const int64_t>(dims)), 0, InitRule::Zeros});
  }
  return out;
}

// The imported graph lowered for this batch (onnx/lower.h), appended node by node.
Forward onnx_forward(GraphBuilder& b, const ModelSpec& m, std::span<const ValueId> params,
                     std::span<const ValueId> buffers, ValueId x, const ForwardOptions& options) {
  const OnnxModel& model = imported(m);
  LowerOptions lo;
  lo.inputs.push_back({m.input, b.graph().values.at(x).shape});
  if (!m.output.empty()) lo.outputs.push_back(m.output);
  lo.training = options.training;
  lo.seed = options.seed;
  lo.step = options.step;
  lo.shard = options.shard;
  lo.shards = options.shards;
  LoweredGraph g;
  try {
    g = lower_onnx(model, lo);
  } catch (const OnnxError& e) {
    throw EngineError(e.what());
  }
  if (g.outputs.size() != 1)
    throw EngineError(
        fmt::format("{}: the model has {} graph outputs; the job must name the one holding the logits "
                    "(model.output)",
                    model.source(), g.outputs.size()));
  std::vector<ValueId> constants;
  for (size_t i = 0; i < g.constants.size(); ++i)
    constants.push_back(b.add_constant(fmt::format("onnx.constant{}", i), std::move(g.constants[i])));
  std::vector<std::vector<ValueId>> outputs;
  const auto resolve = [&](const LoweredRef& r) -> ValueId {
    switch (r.kind) {
      case LoweredRef::Kind::Input:
        return x;
      case LoweredRef::Kind::Param:
        return params[r.index];
      case LoweredRef::Kind::Buffer:
        return buffers[r.index];
      case LoweredRef::Kind::Constant:
        return constants.at(r.index);
      case LoweredRef::Kind::Node:
        return outputs.at(r.index).at(r.slot);
    }
    return x;
  };
  for (const LoweredNode& n : g.nodes) {
    std::vector<ValueId> in;
    for (const LoweredRef& r : n.inputs) in.push_back(resolve(r));
    outputs.push_back(b.add_node(n.op, n.attrs, std::move(in), n.name));
  }
  Forward out{resolve(g.outputs.front()), {}};
  for (const LoweredRef& r : g.buffer_updates) out.buffer_updates.push_back(resolve(r));
  return out;
}

}  // namespace

std::vector<BufferSpec> model_buffers(const ModelSpec& model) {
  if (model.kind != ModelKind::Onnx) return {};
  const OnnxModel& m = imported(model);
  std::vector<BufferSpec> out;
  for (const std::string& name : m.buffers())
    out.push_back({name, Shape(std::span<const int64_t>(m.initializers().at(name).dims))});
  return out;
}

std::vector<ParamSpec> model_params(const ModelSpec& model) {
  switch (model.kind) {
    case ModelKind::Gpt:
      return gpt_params(model);
    case ModelKind::Cnn:
      return cnn_params(model);
    case ModelKind::Onnx:
      return onnx_params(model);
    case ModelKind::Mlp:
      break;
  }
  return mlp_params(model);
}

void init_param(uint64_t seed, uint32_t param_index, const ParamSpec& spec, Tensor& out) {
  if (spec.init == InitRule::Ones || spec.init == InitRule::Zeros) {
    const float v = spec.init == InitRule::Ones ? 1.0f : 0.0f;
    for (float& x : out.values()) x = v;
    return;
  }
  const float bound = spec.init == InitRule::Embedding ? 0.034641016f  // 0.02·√3: standard deviation 0.02
                                                       : 1.0f / std::sqrt(static_cast<float>(spec.fan_in));
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float u =
        uniform_from_bits(philox_random(seed, RandomPurpose::Init, param_index, static_cast<uint64_t>(i))[0]);
    out[i] = (u * 2.0f - 1.0f) * bound;  // 2u − 1 is exact for u = k·2⁻²⁴
  }
}

ValueId append_cross_entropy(GraphBuilder& b, ValueId logits, ValueId labels,
                             const std::string& flat_labels_name) {
  const Shape y = b.graph().values.at(labels).shape, z = b.graph().values.at(logits).shape;
  if (y.rank() == 2)  // label sequences [B, L] → one class id per logits row [B·L]
    labels = b.add_node(OpKind::Reshape, {{y[0] * y[1]}, {}}, {labels}, flat_labels_name).front();
  if (z.rank() == 3)  // an imported model's per-position logits [B, L, V]
    logits = b.add_node(OpKind::Reshape, {{z[0] * z[1], z[2]}, {}}, {logits}, "logits.flat").front();
  return b.add_node(OpKind::SoftmaxCrossEntropy, {}, {logits, labels}, "loss").front();
}

Forward build_forward(GraphBuilder& b, const ModelSpec& model, std::span<const ValueId> params,
                      std::span<const ValueId> buffers, ValueId x, const ForwardOptions& options) {
  switch (model.kind) {
    case ModelKind::Gpt:
      return {gpt_forward(b, model, params, x, options), {}};
    case ModelKind::Cnn:
      return {cnn_forward(b, model, params, x), {}};
    case ModelKind::Onnx:
      return onnx_forward(b, model, params, buffers, x, options);
    case ModelKind::Mlp:
      break;
  }
  return {mlp_forward(b, model, params, x), {}};
}

}  // namespace tribunal
