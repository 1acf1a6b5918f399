#include "engine/cost.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/autodiff.h"
#include "engine/error.h"
#include "engine/loss.h"
#include "engine/model.h"
#include "engine/state.h"

namespace tribunal {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > kMax / a) return kMax;
  return a * b;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return b > kMax - a ? kMax : a + b;
}

uint64_t elements(const Shape& s) {
  return static_cast<uint64_t>(s.numel());
}

// One node as its cost sees it: its op and its values' shapes.
struct NodeShapes {
  OpKind op = OpKind::Count;
  uint64_t chain = 0;    // a contraction's fma chain per output element (OpInfo::fma_chain); else 0
  bool gathers = false;  // input 0 is a data-set table, read (and opened) only at the gathered rows
  std::vector<Shape> in, out;
};

// The length of each output element's fma chain of a contraction (its descriptor's fma_chain, on
// attributes and shapes already valid for the op); 0 for every other op.
uint64_t chain_length(OpKind op, const Attrs& attrs, std::span<const Shape> in) {
  const FmaChainFn chain = op_info(op).fma_chain;
  return chain == nullptr ? 0 : chain(attrs, in);
}

NodeShapes shapes_of(const StepGraph& g, const Node& n) {
  NodeShapes s;
  s.op = n.op;
  for (ValueId v : n.inputs) {
    s.in.push_back(g.values.at(v).shape);
    s.gathers = s.gathers || g.values.at(v).source == ValueSource::Data;
  }
  s.chain = chain_length(n.op, n.attrs, s.in);
  for (ValueId v : n.outputs) s.out.push_back(g.values.at(v).shape);
  return s;
}

uint64_t output_elements(const NodeShapes& n) {
  uint64_t out = 0;
  for (const Shape& s : n.out) out = saturating_add(out, elements(s));
  return out;
}

// What a node reads of input i: a data-set table only at the gathered rows (the referee rebuilds it
// from the proven samples, as many elements as the gather's output), anything else whole.
uint64_t read_elements(const NodeShapes& n, size_t i) {
  return n.gathers ? output_elements(n) : elements(n.in.at(i));
}

uint64_t work_of(const NodeShapes& n) {
  const uint64_t out = output_elements(n);
  if (n.chain != 0) return saturating_mul(out, n.chain);
  uint64_t work = out;
  for (size_t i = 0; i < n.in.size(); ++i) work = saturating_add(work, read_elements(n, i));
  return work;
}

uint64_t input_bytes_of(const NodeShapes& n) {
  uint64_t bytes = 0;
  for (size_t i = 0; i < n.in.size(); ++i)
    bytes = saturating_add(bytes, saturating_mul(read_elements(n, i), 4));
  return bytes;
}

uint64_t log_bytes_of(const NodeShapes& n) {
  const uint64_t out = output_elements(n);
  return out / 5 + (out % 5 != 0 ? 1 : 0);
}

uint64_t reexecution_work_of(const NodeShapes& n, bool rounding_log) {
  const uint64_t w = work_of(n);
  if (!rounding_log) return w;
  return saturating_mul(w, kRoundingLogCpu);
}

uint64_t memory_of(const NodeShapes& n, bool rounding_log) {
  const uint64_t bytes = saturating_add(input_bytes_of(n), saturating_mul(output_elements(n), 4));
  return rounding_log ? saturating_mul(bytes, kRoundingLogMemory) : bytes;
}

// Accumulates the terms node by node in graph order: `times` equal nodes count `times` times and
// are named by the first (the heaviest is the first of the nodes with the most work).
class Tally {
 public:
  Tally(DisputeCost& cost, bool rounding_log) : c_(cost), rounding_log_(rounding_log) {}
  void add(const NodeShapes& n, const std::string& name, uint64_t times = 1) {
    if (times == 0) return;
    c_.nodes = saturating_add(c_.nodes, times);
    if (const uint64_t w = reexecution_work_of(n, rounding_log_); w > c_.max_node_work) {
      c_.max_node_work = w;
      c_.heaviest_node = fmt::format("{} '{}'", op_name(n.op), name);
    }
    uint64_t opened = input_bytes_of(n);
    if (rounding_log_)
      opened = saturating_add(opened, saturating_mul(2, log_bytes_of(n)));  // both parties' logs
    c_.max_opened_bytes = std::max(c_.max_opened_bytes, opened);
    c_.max_node_memory = std::max(c_.max_node_memory, memory_of(n, rounding_log_));
  }

 private:
  DisputeCost& c_;
  bool rounding_log_;
};

// A step graph sketched node by node from shapes alone: each node's output shapes come from the op
// registry's shape rule (as GraphBuilder's do), nothing is allocated per element or per batch row.
// It mirrors engine/step.cpp, engine/model.cpp and the VJP rules that engine/autodiff.cpp emits
// (ops/kernels/*.cpp), node for node; tests/referee/test_dispute_cost.cpp holds it equal to them.
class Sketch {
 public:
  Sketch(Tally& tally, std::string prefix, uint64_t times)
      : tally_(tally), prefix_(std::move(prefix)), times_(times) {}

  /// Adds a node; returns its output shapes.
  std::vector<Shape> node(OpKind op, const Attrs& attrs, std::vector<Shape> in, const std::string& name) {
    NodeShapes n;
    n.op = op;
    n.out = infer_shapes(op, attrs, in);
    n.chain = chain_length(op, attrs, in);
    n.in = std::move(in);
    tally_.add(n, prefix_ + name, times_);
    return n.out;
  }
  Shape one(OpKind op, const Attrs& attrs, std::vector<Shape> in, const std::string& name) {
    return node(op, attrs, std::move(in), name).front();
  }
  /// A gather of `rows` rows of a data-set table (its indices are not materialized).
  Shape gather(const Shape& table, int64_t rows, const std::string& name) {
    std::vector<int64_t> dims(table.dims().begin(), table.dims().end());
    dims.front() = rows;
    NodeShapes n{OpKind::Gather, 0, true, {table}, {Shape(std::span<const int64_t>(dims))}};
    tally_.add(n, prefix_ + name, times_);
    return n.out.front();
  }
  /// A node of a graph already built (an imported model's, sketch_onnx).
  void existing(const StepGraph& g, const Node& n) {
    tally_.add(shapes_of(g, n), prefix_ + g.values.at(n.outputs.at(0)).name, times_);
  }
  /// The same sketch with another multiplicity and name prefix.
  Sketch times(uint64_t t, const std::string& prefix = "") const {
    return Sketch(tally_, prefix_ + prefix, times_ * t);
  }

  /// Backward of linear(x, w, b) → y: dx (when x has a gradient), dw, db; returns dx's shape.
  void linear_backward(const Shape& x, const Shape& w, const Shape& y, bool dx, const std::string& x_name,
                       const std::string& w_name, const std::string& b_name) {
    if (dx) one(OpKind::Matmul, {{0, 1}, {}}, {y, w}, "grad/" + x_name);
    one(OpKind::Matmul, {{1, 0}, {}}, {x, y}, "grad/" + w_name);
    one(OpKind::SumRows, {}, {y}, "grad/" + b_name);
  }
  /// The Add that sums a second gradient of a value used twice.
  void accumulate(const Shape& v, const std::string& name) { one(OpKind::Add, {}, {v, v}, "grad/" + name); }

 private:
  Tally& tally_;
  std::string prefix_;
  uint64_t times_;
};

// fmt rather than `prefix + std::to_string(index)`, which g++ 12 at -O3 warns about falsely (-Wrestrict).
std::string indexed(const char* prefix, int64_t index) {
  return fmt::format("{}{}", prefix, index);
}

// One parameter tensor (or `count` tensors of one shape, e.g. a weight of every GPT layer), in the
// state's canonical order.
struct ParamGroup {
  std::string name;  // of the first
  Shape shape;
  uint64_t count = 1;
};

std::vector<ParamGroup> param_groups(const ModelSpec& m) {
  std::vector<ParamGroup> p;
  switch (m.kind) {
    case ModelKind::Mlp:
      for (size_t l = 0; l + 1 < m.widths.size(); ++l) {
        p.push_back({indexed("l", static_cast<int64_t>(l)) + ".weight", Shape{m.widths[l], m.widths[l + 1]}});
        p.push_back({indexed("l", static_cast<int64_t>(l)) + ".bias", Shape{m.widths[l + 1]}});
      }
      break;
    case ModelKind::Cnn: {
      int64_t in = m.image_channels, h = m.image_height, w = m.image_width;
      for (size_t i = 0; i < m.channels.size(); ++i, h /= 2, w /= 2) {
        p.push_back({indexed("conv", static_cast<int64_t>(i)) + ".weight",
                     Shape{m.channels[i], in, m.kernel, m.kernel}});
        p.push_back({indexed("conv", static_cast<int64_t>(i)) + ".bias", Shape{m.channels[i]}});
        in = m.channels[i];
      }
      p.push_back({"fc.weight", Shape{in * h * w, m.classes}});
      p.push_back({"fc.bias", Shape{m.classes}});
      break;
    }
    case ModelKind::Onnx:
      for (const ParamSpec& s : model_params(m)) p.push_back({s.name, s.shape});
      break;
    case ModelKind::Gpt: {
      const int64_t D = m.d_model;
      const auto L = static_cast<uint64_t>(m.layers);
      p.push_back({"tok_emb", Shape{m.vocab, D}});
      p.push_back({"pos_emb", Shape{m.context, D}});
      // Per layer: ln1 (γ, β), q, k, v, proj (weight, bias each), ln2, fc, mlp.proj.
      const auto layer = [&](const std::string& n, Shape s) { p.push_back({"h0." + n, std::move(s), L}); };
      layer("ln1.weight", Shape{D});
      layer("ln1.bias", Shape{D});
      for (const char* lin : {"attn.q", "attn.k", "attn.v", "attn.proj"}) {
        layer(std::string(lin) + ".weight", Shape{D, D});
        layer(std::string(lin) + ".bias", Shape{D});
      }
      layer("ln2.weight", Shape{D});
      layer("ln2.bias", Shape{D});
      layer("mlp.fc.weight", Shape{D, 4 * D});
      layer("mlp.fc.bias", Shape{4 * D});
      layer("mlp.proj.weight", Shape{4 * D, D});
      layer("mlp.proj.bias", Shape{D});
      p.push_back({"ln_f.weight", Shape{D}});
      p.push_back({"ln_f.bias", Shape{D}});
      p.push_back({"head.weight", Shape{D, m.vocab}});
      p.push_back({"head.bias", Shape{m.vocab}});
      break;
    }
  }
  return p;
}

// The GPT's layer groups come in model order but several per layer: the state interleaves them
// layer by layer. Only counts and maxima matter here, and every layer's tensors have the same
// shapes, so the groups stand for their tensors in any order but for naming the first.

// Forward and backward of one shard's loss (rows batch rows): gathers → model → loss → backward.
void sketch_mlp(Sketch& s, const ModelSpec& m, const Shape& table_x, const Shape& table_y, int64_t rows) {
  const size_t layers = m.widths.size() - 1;
  std::vector<Shape> x{s.gather(table_x, rows, "batch.inputs")}, y;  // x[l]: layer l's input
  const Shape labels = s.gather(table_y, rows, "batch.labels");
  for (size_t l = 0; l < layers; ++l) {
    const std::string p = indexed("l", static_cast<int64_t>(l));
    y.push_back(s.one(OpKind::Linear, {}, {x[l], Shape{m.widths[l], m.widths[l + 1]}, Shape{m.widths[l + 1]}},
                      p + ".out"));
    if (l + 1 < layers) x.push_back(s.one(OpKind::Relu, {}, {y[l]}, p + ".relu"));
  }
  const std::string logits = indexed("l", static_cast<int64_t>(layers - 1)) + ".out";
  s.one(OpKind::SoftmaxCrossEntropy, {}, {y.back(), labels}, "loss");
  s.one(OpKind::SoftmaxCrossEntropyBackward, {}, {y.back(), labels, Shape{}}, "grad/" + logits);
  for (size_t l = layers; l-- > 0;) {
    const std::string p = indexed("l", static_cast<int64_t>(l));
    const std::string x_name = l > 0 ? indexed("l", static_cast<int64_t>(l - 1)) + ".relu" : "batch.inputs";
    s.linear_backward(x[l], Shape{m.widths[l], m.widths[l + 1]}, y[l], l > 0, x_name, p + ".weight",
                      p + ".bias");
    if (l > 0)
      s.one(OpKind::ReluBackward, {}, {y[l - 1], y[l - 1]},
            "grad/" + indexed("l", static_cast<int64_t>(l - 1)) + ".out");
  }
}

// An imported model has no formula: one shard's forward, loss and backward are built from the
// lowered graph (bounded by OnnxLimits: the file's nodes, each lowered to a few RepOps nodes) and
// tallied S times, as the closed forms above are; the trees, clipping and optimizer follow as for
// every model. An mse job's mlp is sketched the same way (its loss head is not the closed form's).
void sketch_onnx(Sketch& s, const JobSpec& job, const Shape& table_x, const Shape& table_y, int64_t rows) {
  const ModelSpec& m = job.model;
  s.gather(table_x, rows, "batch.inputs");
  s.gather(table_y, rows, "batch.labels");
  StepGraph g;
  GraphBuilder b(g);
  std::vector<ValueId> params, buffers;
  for (const ParamSpec& p : model_params(m)) params.push_back(b.add_state(p.name, p.shape));
  for (const BufferSpec& k : model_buffers(m)) buffers.push_back(b.add_state(k.name, k.shape));
  // The batch as the step graph's gathers output it: node values the forward reads whole (a data
  // value would count as a gather of the data table, reading only as many elements as a node outputs).
  const ValueId x = b.add_state("batch.inputs", Shape{rows, table_x[1]});
  const ValueId labels =
      b.add_state("batch.labels", table_y.rank() == 2 ? Shape{rows, table_y[1]} : Shape{rows});
  ForwardOptions options;
  options.training = true;
  const ValueId logits = build_forward(b, m, params, buffers, x, options).logits;
  const ValueId loss = append_job_loss(b, job, logits, labels, "batch.labels.flat");
  append_backward(b, loss, params);
  for (const Node& n : g.nodes) s.existing(g, n);
}

void sketch_cnn(Sketch& s, const ModelSpec& m, const Shape& table_x, const Shape& table_y, int64_t rows) {
  const Shape x = s.gather(table_x, rows, "batch.inputs");
  const Shape labels = s.gather(table_y, rows, "batch.labels");
  std::vector<Shape> in{s.one(OpKind::Reshape, {{rows, m.image_channels, m.image_height, m.image_width}, {}},
                              {x}, "input.image")};  // in[i]: block i's input
  std::vector<Shape> weight, conv, pooled;
  const int64_t pad = m.kernel / 2;
  for (size_t i = 0; i < m.channels.size(); ++i) {
    const std::string c = indexed("conv", static_cast<int64_t>(i));
    weight.push_back(Shape{m.channels[i], in[i][1], m.kernel, m.kernel});
    conv.push_back(
        s.one(OpKind::Conv2d, {{1, pad}, {}}, {in[i], weight[i], Shape{m.channels[i]}}, c + ".out"));
    const Shape relu = s.one(OpKind::Relu, {}, {conv[i]}, c + ".relu");
    in.push_back(s.one(OpKind::MaxPool2d, {}, {relu}, c + ".pool"));
  }
  const Shape& last = in.back();
  const Shape flat = s.one(OpKind::Reshape, {{rows, last.numel() / rows}, {}}, {last}, "flatten");
  const Shape w{flat[1], m.classes};
  const Shape logits = s.one(OpKind::Linear, {}, {flat, w, Shape{m.classes}}, "logits");
  s.one(OpKind::SoftmaxCrossEntropy, {}, {logits, labels}, "loss");
  s.one(OpKind::SoftmaxCrossEntropyBackward, {}, {logits, labels, Shape{}}, "grad/logits");
  s.linear_backward(flat, w, logits, true, "flatten", "fc.weight", "fc.bias");
  const std::span<const int64_t> last_dims = last.dims();
  s.one(OpKind::Reshape, {{last_dims.begin(), last_dims.end()}, {}}, {flat},
        "grad/" + indexed("conv", static_cast<int64_t>(m.channels.size() - 1)) + ".pool");
  for (size_t i = m.channels.size(); i-- > 0;) {
    const std::string c = indexed("conv", static_cast<int64_t>(i));
    s.one(OpKind::MaxPool2dBackward, {}, {conv[i], in[i + 1]}, "grad/" + c + ".relu");
    s.one(OpKind::ReluBackward, {}, {conv[i], conv[i]}, "grad/" + c + ".out");
    const std::string x_name = i > 0 ? indexed("conv", static_cast<int64_t>(i - 1)) + ".pool" : "input.image";
    if (i > 0)
      s.one(OpKind::Conv2dBackwardInput, {{1, pad, in[i][2], in[i][3]}, {}}, {weight[i], conv[i]},
            "grad/" + x_name);
    s.one(OpKind::Conv2dBackwardWeight, {{1, pad, m.kernel, m.kernel}, {}}, {in[i], conv[i]},
          "grad/" + c + ".weight");
    s.one(OpKind::Conv2dBackwardBias, {}, {conv[i]}, "grad/" + c + ".bias");
  }
}

void sketch_gpt(Sketch& s, const ModelSpec& m, const Shape& table_x, const Shape& table_y, int64_t rows) {
  const int64_t T = m.context, D = m.d_model, H = m.heads, V = m.vocab, M = rows * T;
  const Attrs heads{{rows, T, H}, {}}, ln{{}, {kLayerNormEps}};
  const bool dropout = m.dropout > 0.0f;  // step graphs train
  const Attrs drop{{0, 0, 0}, {m.dropout}};
  const Shape ids = s.gather(table_x, rows, "batch.inputs");
  const Shape label_rows = s.gather(table_y, rows, "batch.labels");
  const Shape h = s.one(OpKind::Embedding, {}, {Shape{V, D}, Shape{T, D}, ids}, "embed");  // [M, D]
  if (dropout) s.one(OpKind::Dropout, drop, {h}, "embed.dropout");
  const Shape dd{D, D}, d{D}, scores{rows * H, T, T}, per_head{rows * H, T, D / H};
  const float scale = 1.0f / std::sqrt(static_cast<float>(D / H));
  {  // every layer's forward nodes: the same shapes, named by the first layer
    Sketch l = s.times(static_cast<uint64_t>(m.layers));
    l.one(OpKind::LayerNorm, ln, {h, d, d}, "h0.ln1");
    for (const char* n : {"h0.attn.q", "h0.attn.k", "h0.attn.v"}) l.one(OpKind::Linear, {}, {h, dd, d}, n);
    for (const char* n : {"h0.attn.q.heads", "h0.attn.k.heads", "h0.attn.v.heads"})
      l.one(OpKind::SplitHeads, heads, {h}, n);
    l.one(OpKind::Matmul, {{0, 1}, {}}, {per_head, per_head}, "h0.attn.scores");
    l.one(OpKind::Softmax, {{1}, {scale}}, {scores}, "h0.attn.softmax");
    l.one(OpKind::Matmul, {{0, 0}, {}}, {scores, per_head}, "h0.attn.context");
    l.one(OpKind::MergeHeads, heads, {per_head}, "h0.attn.merge");
    l.one(OpKind::Linear, {}, {h, dd, d}, "h0.attn.proj");
    if (dropout) l.one(OpKind::Dropout, drop, {h}, "h0.attn.dropout");
    l.one(OpKind::Add, {}, {h, h}, "h0.attn.residual");
    l.one(OpKind::LayerNorm, ln, {h, d, d}, "h0.ln2");
    const Shape fc = l.one(OpKind::Linear, {}, {h, Shape{D, 4 * D}, Shape{4 * D}}, "h0.mlp.fc");
    l.one(OpKind::Gelu, {}, {fc}, "h0.mlp.gelu");
    l.one(OpKind::Linear, {}, {fc, Shape{4 * D, D}, d}, "h0.mlp.proj");
    if (dropout) l.one(OpKind::Dropout, drop, {h}, "h0.mlp.dropout");
    l.one(OpKind::Add, {}, {h, h}, "h0.out");
  }
  s.one(OpKind::LayerNorm, ln, {h, d, d}, "ln_f");
  const Shape logits = s.one(OpKind::Linear, {}, {h, Shape{D, V}, Shape{V}}, "logits");
  const Shape labels = s.one(OpKind::Reshape, {{M}, {}}, {label_rows}, "batch.labels.flat");
  s.one(OpKind::SoftmaxCrossEntropy, {}, {logits, labels}, "loss");
  s.one(OpKind::SoftmaxCrossEntropyBackward, {}, {logits, labels, Shape{}}, "grad/logits");
  s.linear_backward(h, Shape{D, V}, logits, true, "ln_f", "head.weight", "head.bias");
  s.node(OpKind::LayerNormBackward, ln, {h, d, h}, "grad/" + indexed("h", m.layers - 1) + ".out");
  {  // every layer's backward nodes, in reverse node order; the graph's first of them is the last layer's
    Sketch l = s.times(static_cast<uint64_t>(m.layers));
    const std::string p = indexed("h", m.layers - 1);
    const Shape fc{M, 4 * D};
    // h.out = residual + mlp: both gradients pass through (no node).
    if (dropout) l.one(OpKind::DropoutBackward, drop, {h}, "grad/" + p + ".mlp.proj");
    l.linear_backward(fc, Shape{4 * D, D}, h, true, p + ".mlp.gelu", p + ".mlp.proj.weight",
                      p + ".mlp.proj.bias");
    l.one(OpKind::GeluBackward, {}, {fc, fc}, "grad/" + p + ".mlp.fc");
    l.linear_backward(h, Shape{D, 4 * D}, fc, true, p + ".ln2", p + ".mlp.fc.weight", p + ".mlp.fc.bias");
    l.node(OpKind::LayerNormBackward, ln, {h, d, h}, "grad/" + p + ".attn.residual");
    l.accumulate(h, p + ".attn.residual");  // the residual stream feeds ln2 and h.out
    // attn.residual = h_in + attention: both gradients pass through.
    if (dropout) l.one(OpKind::DropoutBackward, drop, {h}, "grad/" + p + ".attn.proj");
    l.linear_backward(h, dd, h, true, p + ".attn.merge", p + ".attn.proj.weight", p + ".attn.proj.bias");
    l.one(OpKind::SplitHeads, heads, {h}, "grad/" + p + ".attn.context");
    l.one(OpKind::Matmul, {{0, 1}, {}}, {per_head, per_head},
          "grad/" + p + ".attn.softmax");  // d probs = dc·vᵀ
    l.one(OpKind::Matmul, {{1, 0}, {}}, {scores, per_head},
          "grad/" + p + ".attn.v.heads");  // d v = probsᵀ·dc
    l.one(OpKind::SoftmaxBackward, {{1}, {scale}}, {scores, scores}, "grad/" + p + ".attn.scores");
    l.one(OpKind::Matmul, {{0, 0}, {}}, {scores, per_head}, "grad/" + p + ".attn.q.heads");  // d q = ds·k
    l.one(OpKind::Matmul, {{1, 0}, {}}, {scores, per_head}, "grad/" + p + ".attn.k.heads");  // d k = dsᵀ·q
    for (const char* n : {".attn.v", ".attn.k", ".attn.q"})
      l.one(OpKind::MergeHeads, heads, {per_head}, "grad/" + p + n);
    l.linear_backward(h, dd, h, true, p + ".ln1", p + ".attn.v.weight", p + ".attn.v.bias");
    l.linear_backward(h, dd, h, true, p + ".ln1", p + ".attn.k.weight", p + ".attn.k.bias");
    l.accumulate(h, p + ".ln1");  // ln1's output feeds q, k and v
    l.linear_backward(h, dd, h, true, p + ".ln1", p + ".attn.q.weight", p + ".attn.q.bias");
    l.accumulate(h, p + ".ln1");
    // ln1's input: the previous layer's output (or the embedding), which also feeds attn.residual.
    const std::string in = m.layers > 1 ? indexed("h", m.layers - 2) + ".out"
                           : dropout    ? "embed.dropout"
                                        : "embed";
    l.node(OpKind::LayerNormBackward, ln, {h, d, h}, "grad/" + in);
    l.accumulate(h, in);
  }
  if (dropout) s.one(OpKind::DropoutBackward, drop, {h}, "grad/embed");
  s.one(OpKind::EmbeddingBackward, {{V}, {}}, {ids, h}, "grad/tok_emb");
  // Emitted under the name of the last gradient the autodiff named, the embedding's.
  const Shape by_batch = s.one(OpKind::Reshape, {{rows, T * D}, {}}, {h}, "grad/embed");
  const Shape summed = s.one(OpKind::SumRows, {}, {by_batch}, "grad/embed");
  s.one(OpKind::Reshape, {{T, D}, {}}, {summed}, "grad/pos_emb");
}

}  // namespace

uint64_t node_work(const StepGraph& g, const Node& n) {
  return work_of(shapes_of(g, n));
}

uint64_t node_input_bytes(const StepGraph& g, const Node& n) {
  return input_bytes_of(shapes_of(g, n));
}

uint64_t node_log_bytes(const StepGraph& g, const Node& n) {
  return log_bytes_of(shapes_of(g, n));
}

uint64_t node_reexecution_work(const StepGraph& g, const Node& n, NumericsMode mode) {
  return reexecution_work_of(shapes_of(g, n), mode == NumericsMode::RoundingLog);
}

uint64_t node_memory(const StepGraph& g, const Node& n, NumericsMode mode) {
  return memory_of(shapes_of(g, n), mode == NumericsMode::RoundingLog);
}

DisputeCost dispute_cost(const JobSpec& job, const DataShape& data) {
  const int64_t need = label_width(job);
  if (data.label_width != need)
    throw EngineError(fmt::format("{}: the data shape's label_width {} does not fit the model (it needs {})",
                                  job.source, data.label_width, need));
  if (job.shards < 1 || job.batch_size % job.shards != 0)
    throw EngineError(fmt::format("{}: train.shards {} does not divide the batch of {} rows", job.source,
                                  job.shards, job.batch_size));
  DisputeCost c;
  c.shards = job.shards;
  c.batch = job.batch_size;
  c.context = job.model.loss == LossKind::Mse ? 0 : need;  // an mse job's label rows are its targets
  const std::vector<ParamGroup> params = param_groups(job.model);
  uint64_t parameters = 0, tensors = 0;
  for (const ParamGroup& p : params) {
    parameters = saturating_add(parameters, saturating_mul(p.count, elements(p.shape)));
    tensors += p.count;
  }
  c.parameters = static_cast<int64_t>(std::min<uint64_t>(parameters, std::numeric_limits<int64_t>::max()));

  Tally tally(c, job.numerics.mode == NumericsMode::RoundingLog);
  const auto S = static_cast<uint64_t>(job.shards);
  const int64_t rows = job.batch_size / job.shards;
  const Shape table_x{data.samples, data.features};
  const Shape table_y = data.label_width > 0 ? Shape{data.samples, data.label_width} : Shape{data.samples};
  Sketch shard(tally, S > 1 ? "shard0/" : "", S);  // every shard's nodes: the same shapes
  switch (job.model.kind) {
    case ModelKind::Mlp:
      if (job.model.loss == LossKind::Mse)
        sketch_onnx(shard, job, table_x, table_y, rows);
      else
        sketch_mlp(shard, job.model, table_x, table_y, rows);
      break;
    case ModelKind::Cnn:
      sketch_cnn(shard, job.model, table_x, table_y, rows);
      break;
    case ModelKind::Gpt:
      sketch_gpt(shard, job.model, table_x, table_y, rows);
      break;
    case ModelKind::Onnx:
      sketch_onnx(shard, job, table_x, table_y, rows);
      break;
  }
  Sketch once(tally, "", 1);
  if (S > 1) {  // the fixed trees (engine/tree_sum.h): S − 1 adds per parameter and for the loss
    const auto tree = [&](const Sketch& s, const Shape& shape, const std::string& name) {
      s.times(S - 1).one(OpKind::Add, {}, {shape, shape}, S == 2 ? name : name + "/tree1.0");
    };
    tree(once, Shape{}, "loss.sum");
    once.one(OpKind::Scale, {}, {Shape{}, Shape{}}, "loss");
    for (const ParamGroup& p : params) tree(once.times(p.count), p.shape, "grad/" + p.name);
  }
  const OptimizerSpec& o = job.optimizer;
  if (o.clip_norm > 0.0f) {  // one sum of squares and one scale per parameter, one coefficient
    for (const ParamGroup& p : params)
      once.times(p.count).one(OpKind::SumSquares, {}, {p.shape}, "clip.sumsq/" + p.name);
    once.one(OpKind::ClipCoefficient, {{}, {o.clip_norm}}, std::vector<Shape>(tensors, Shape{}), "clip.coef");
    for (const ParamGroup& p : params)
      once.times(p.count).one(OpKind::Scale, {}, {p.shape, Shape{}}, "clip.grad/" + p.name);
  }
  for (const ParamGroup& p : params) {  // the optimizer: one node per parameter, named by its first output
    if (o.kind == OptimizerKind::AdamW)
      once.times(p.count).node(OpKind::AdamW, {{1}, {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay}},
                               {p.shape, p.shape, p.shape, p.shape}, "next/" + p.name + "#0");
    else
      once.times(p.count).node(OpKind::SgdMomentum, {{}, {o.lr, o.momentum, o.weight_decay}},
                               {p.shape, p.shape, p.shape}, "next/" + p.name + "#0");
  }
  return c;
}

DisputeCost dispute_cost(const JobSpec& job, const StepGraph& g) {
  DisputeCost c;
  c.shards = job.shards;
  c.batch = job.batch_size;
  c.context = job.model.loss == LossKind::Mse ? 0 : label_width(job);
  c.parameters = job_footprint(job).parameters;
  Tally tally(c, job.numerics.mode == NumericsMode::RoundingLog);
  for (const Node& n : g.nodes) tally.add(shapes_of(g, n), g.values.at(n.outputs.at(0)).name);
  return c;
}

}  // namespace tribunal
