#include "engine/step.h"

#include <fmt/format.h>

#include "engine/autodiff.h"
#include "engine/error.h"
#include "engine/loss.h"
#include "engine/model.h"
#include "engine/schedule.h"
#include "engine/tree_sum.h"

namespace tribunal {
namespace {

std::vector<std::string> slot_names(OptimizerKind kind) {
  return kind == OptimizerKind::AdamW ? std::vector<std::string>{"adamw.m/", "adamw.v/"}
                                      : std::vector<std::string>{"sgd.momentum/"};
}

Tensor scalar(float v) {
  Tensor t(Shape{});
  t[0] = v;
  return t;
}

// The labels' layout the model needs: sequences of the context for a GPT, K float targets for an mse
// job, class ids otherwise.
void check_label_width(const JobSpec& job, const DataShape& data) {
  const int64_t need = label_width(job);
  if (job.model.loss == LossKind::Mse && data.label_width != need)
    throw EngineError(
        fmt::format("{}: the mse loss needs {} float targets per sample (data.targets), but the "
                    "data shape has label_width {}",
                    job.source, need, data.label_width));
  if (data.label_width != need)
    throw EngineError(
        fmt::format("{}: the {} model's step graph needs {}, but the data shape has label_width {}",
                    job.source, need ? "next-token" : "classifier",
                    need ? fmt::format("label sequences (label_width {})", need)
                         : std::string("class-id labels (label_width 0)"),
                    data.label_width));
}

// The shards of a sharded step graph (docs/numerics.md "Sharded batch reductions"): shard s takes
// batch rows [s·B/S, (s+1)·B/S) through its own forward, loss (a mean over its rows, weighing 1/S)
// and backward, its values named "shard<s>/…"; then one fixed tree (engine/tree_sum.h) per
// parameter sums the shards' gradients into "grad/<p>", and "loss" = Scale(tree sum of the shard
// losses, 1/S). Sets g.loss, node_shards and partials; returns the combined gradients.
template <class AppendLoss>
std::vector<ValueId> append_shards(GraphBuilder& b, const JobSpec& job, int64_t step,
                                   std::span<const int64_t> batch, std::span<const ValueId> params,
                                   const AppendLoss& append_loss) {
  StepGraph& g = b.graph();
  const int64_t shards = job.shards, rows = static_cast<int64_t>(batch.size()) / shards;
  const float weight = 1.0f / static_cast<float>(shards);  // d loss / d shard loss
  for (int64_t s = 0; s < shards; ++s) {
    const size_t first_value = g.values.size();
    const ValueId loss = append_loss(batch.subspan(static_cast<size_t>(s * rows), static_cast<size_t>(rows)),
                                     ForwardOptions{true, job.seed, step, s, shards});
    std::vector<ValueId> partial{loss};
    for (ValueId grad : append_backward(b, loss, params, weight)) partial.push_back(grad);
    const std::string prefix = fmt::format("shard{}/", s);
    for (size_t v = first_value; v < g.values.size(); ++v) g.values[v].name = prefix + g.values[v].name;
    g.node_shards.resize(g.nodes.size(), ShardSpan{static_cast<int32_t>(s), 1});
    g.partials.push_back(std::move(partial));
  }
  // Transposed: the shards' partials of one quantity, combined in the tree.
  const auto of_all_shards = [&](size_t k) {
    std::vector<ValueId> column;
    for (const std::vector<ValueId>& partial : g.partials) column.push_back(partial[k]);
    return column;
  };
  const ValueId loss_sum = append_tree_sum(b, of_all_shards(0), "loss.sum");
  const ValueId loss_weight = b.add_constant("loss.weight", scalar(weight));
  g.loss = b.add_node(OpKind::Scale, {}, {loss_sum, loss_weight}, "loss").front();
  std::vector<ValueId> grads;
  for (size_t p = 0; p < params.size(); ++p)
    grads.push_back(append_tree_sum(b, of_all_shards(p + 1), "grad/" + g.values[params[p]].name));
  return grads;
}

}  // namespace

StateLayout state_layout(const JobSpec& job) {
  StateLayout layout;
  const std::vector<ParamSpec> params = model_params(job.model);
  for (const ParamSpec& p : params) {
    layout.names.push_back(p.name);
    layout.shapes.push_back(p.shape);
  }
  layout.num_params = params.size();
  for (const ParamSpec& p : params)
    for (const std::string& slot : slot_names(job.optimizer.kind)) {
      layout.names.push_back(slot + p.name);
      layout.shapes.push_back(p.shape);
    }
  layout.first_buffer = layout.names.size();
  for (const BufferSpec& buffer : model_buffers(job.model)) {
    layout.names.push_back(buffer.name);
    layout.shapes.push_back(buffer.shape);
  }
  layout.num_buffers = layout.names.size() - layout.first_buffer;
  layout.names.push_back("step");
  layout.shapes.push_back(Shape{});
  layout.names.push_back("loss");
  layout.shapes.push_back(Shape{});
  return layout;
}

StepGraph build_step_graph(const JobSpec& job, const DataShape& data, int64_t step,
                           std::span<const int64_t> batch_indices) {
  check_label_width(job, data);
  const auto batch = static_cast<int64_t>(batch_indices.size());
  if (job.shards < 1 || batch % job.shards != 0)
    throw EngineError(fmt::format("{}: train.shards {} does not divide the batch of {} rows", job.source,
                                  job.shards, batch));
  StepGraph g;
  GraphBuilder b(g);
  const StateLayout layout = state_layout(job);
  if (job.shards > 1 && layout.num_buffers > 0)
    throw EngineError(fmt::format(
        "{}: train.shards {} with a model that has running statistics ('{}'): a batch's statistics are not "
        "a sum of its shards', so such a model trains unsharded (train.shards = 1)",
        job.source, job.shards, layout.names[layout.first_buffer]));
  std::vector<ValueId> state;
  for (size_t i = 0; i < layout.names.size(); ++i)
    state.push_back(b.add_state(layout.names[i], layout.shapes[i]));
  const std::span<const ValueId> params(state.data(), layout.num_params);
  const std::span<const ValueId> buffers(state.data() + layout.first_buffer, layout.num_buffers);
  std::vector<ValueId> buffer_updates;

  const ValueId table_x = b.add_data("data.inputs", Shape{data.samples, data.features});
  const ValueId table_y = b.add_data(
      "data.labels", data.label_width > 0 ? Shape{data.samples, data.label_width} : Shape{data.samples});
  // The loss of some batch rows and its graph: gather ×2 → forward → [labels flattened] → loss.
  const auto append_loss = [&](std::span<const int64_t> rows, const ForwardOptions& forward) {
    const Attrs gather{{rows.begin(), rows.end()}, {}};
    const ValueId x = b.add_node(OpKind::Gather, gather, {table_x}, "batch.inputs").front();
    const ValueId y = b.add_node(OpKind::Gather, gather, {table_y}, "batch.labels").front();
    Forward f = build_forward(b, job.model, params, buffers, x, forward);
    buffer_updates = std::move(f.buffer_updates);
    return append_job_loss(b, job, f.logits, y, "batch.labels.flat");
  };

  std::vector<ValueId> grads;
  if (job.shards == 1) {
    g.loss = append_loss(batch_indices, ForwardOptions{true, job.seed, step});
    grads = append_backward(b, g.loss, params);
  } else {
    grads = append_shards(b, job, step, batch_indices, params, append_loss);
  }
  // Global-norm clipping (torch.nn.utils.clip_grad_norm_): every gradient scaled by one coefficient.
  const OptimizerSpec& o = job.optimizer;
  if (o.clip_norm > 0.0f) {
    std::vector<ValueId> squares;
    for (size_t p = 0; p < layout.num_params; ++p)
      squares.push_back(
          b.add_node(OpKind::SumSquares, {}, {grads[p]}, "clip.sumsq/" + layout.names[p]).front());
    const ValueId coef =
        b.add_node(OpKind::ClipCoefficient, {{}, {o.clip_norm}}, squares, "clip.coef").front();
    for (size_t p = 0; p < layout.num_params; ++p)
      grads[p] = b.add_node(OpKind::Scale, {}, {grads[p], coef}, "clip.grad/" + layout.names[p]).front();
  }

  // Optimizer: one node per parameter, reading its slots from the state right after the params.
  const float lr = learning_rate(job, step);
  const size_t slots = slot_names(o.kind).size();
  std::vector<ValueId> next(state.size());
  for (size_t p = 0; p < layout.num_params; ++p) {
    const size_t slot0 = layout.num_params + p * slots;
    const float wd = decays(job, layout.shapes[p]) ? o.weight_decay : 0.0f;
    std::vector<ValueId> outs;
    if (o.kind == OptimizerKind::AdamW) {
      outs = b.add_node(OpKind::AdamW, {{step + 1}, {lr, o.beta1, o.beta2, o.eps, wd}},
                        {params[p], grads[p], state[slot0], state[slot0 + 1]}, "next/" + layout.names[p]);
    } else {
      outs = b.add_node(OpKind::SgdMomentum, {{}, {lr, o.momentum, wd}}, {params[p], grads[p], state[slot0]},
                        "next/" + layout.names[p]);
    }
    next[p] = outs[0];
    for (size_t s = 0; s < slots; ++s) next[slot0 + s] = outs[1 + s];
  }
  for (size_t k = 0; k < layout.num_buffers; ++k) next[layout.first_buffer + k] = buffer_updates.at(k);
  next[state.size() - 2] = b.add_constant("next/step", scalar(static_cast<float>(step + 1)));
  next[state.size() - 1] = g.loss;
  g.state_outputs = std::move(next);
  if (job.shards > 1) g.node_shards.resize(g.nodes.size());  // clipping, the optimizer: every shard
  return g;
}

namespace {

// The state inputs of an evaluation graph: the parameters, then the buffers.
struct EvalState {
  std::vector<ValueId> params, buffers;
};
EvalState add_eval_state(GraphBuilder& b, const ModelSpec& model) {
  EvalState s;
  for (const ParamSpec& p : model_params(model)) s.params.push_back(b.add_state(p.name, p.shape));
  for (const BufferSpec& k : model_buffers(model)) s.buffers.push_back(b.add_state(k.name, k.shape));
  return s;
}

}  // namespace

StepGraph build_eval_graph(const JobSpec& job, const DataShape& data, int64_t rows) {
  StepGraph g;
  GraphBuilder b(g);
  const EvalState s = add_eval_state(b, job.model);
  const ValueId x = b.add_data("eval.inputs", Shape{rows, data.features});
  g.loss = build_forward(b, job.model, s.params, s.buffers, x).logits;
  return g;
}

StepGraph build_eval_loss_graph(const JobSpec& job, const DataShape& data, int64_t rows) {
  check_label_width(job, data);
  StepGraph g;
  GraphBuilder b(g);
  const EvalState s = add_eval_state(b, job.model);
  const ValueId x = b.add_data("eval.inputs", Shape{rows, data.features});
  const ValueId y =
      b.add_data("eval.labels", data.label_width > 0 ? Shape{rows, data.label_width} : Shape{rows});
  const ValueId logits = build_forward(b, job.model, s.params, s.buffers, x).logits;
  g.loss = append_job_loss(b, job, logits, y, "eval.labels.flat");
  return g;
}

bool decays(const JobSpec& job, const Shape& param_shape) {
  return job.optimizer.decay == DecayScope::All || param_shape.rank() >= 2;
}

}  // namespace tribunal
