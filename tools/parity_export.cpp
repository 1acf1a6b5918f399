#include "tools/parity_export.h"

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/safetensors.h"
#include "engine/step.h"

namespace tribunal::parity {

nlohmann::json parity_config(const JobSpec& job, int64_t steps) {
  const ModelSpec& m = job.model;
  nlohmann::json model;
  if (m.kind == ModelKind::Gpt) {
    model = {{"kind", "gpt"},
             {"vocab", m.vocab},
             {"context", m.context},
             {"layers", m.layers},
             {"heads", m.heads},
             {"d_model", m.d_model},
             {"dropout", static_cast<double>(m.dropout)}};
  } else if (m.kind == ModelKind::Cnn) {
    model = {{"kind", "cnn"},
             {"channels", m.channels},
             {"kernel", m.kernel},
             {"image_channels", m.image_channels},
             {"image_height", m.image_height},
             {"image_width", m.image_width},
             {"classes", m.classes}};
  } else if (m.kind == ModelKind::Onnx) {
    if (!m.onnx) throw EngineError(fmt::format("{}: the onnx model has not been imported", job.source));
    model = {{"kind", "onnx"},
             {"file", m.file},
             {"input", m.input},
             {"output", m.output},
             {"params", m.onnx->params()}};
    if (m.loss == LossKind::Mse) model["loss"] = "mse";  // else the cross-entropy (no key: older exports)
  } else {
    model = {{"kind", "mlp"}, {"widths", m.widths}};
  }
  const OptimizerSpec& o = job.optimizer;
  if (o.kind != OptimizerKind::AdamW)
    throw EngineError(fmt::format("{}: the parity export covers the adamw optimizer only", job.source));
  const nlohmann::json optimizer = {{"kind", "adamw"},
                                    {"lr", static_cast<double>(o.lr)},
                                    {"beta1", static_cast<double>(o.beta1)},
                                    {"beta2", static_cast<double>(o.beta2)},
                                    {"eps", static_cast<double>(o.eps)},
                                    {"weight_decay", static_cast<double>(o.weight_decay)},
                                    {"decay", o.decay == DecayScope::Matrices ? "matrices" : "all"},
                                    {"clip_norm", static_cast<double>(o.clip_norm)},
                                    {"schedule", o.schedule == LrSchedule::Cosine ? "cosine" : "constant"},
                                    {"warmup_steps", o.warmup_steps},
                                    {"min_lr", static_cast<double>(o.min_lr)},
                                    {"total_steps", job.steps}};
  return {{"model", model}, {"optimizer", optimizer}, {"steps", steps}, {"batch_size", job.batch_size}};
}

std::pair<Tensor, Tensor> step_batch(Trainer& trainer, const Dataset& train, int64_t t) {
  const StepGraph g = trainer.step_graph(t);
  const Tensor* tables[2] = {&train.inputs, &train.labels};
  Tensor out[2];
  bool found[2] = {false, false};
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::Gather) continue;
    for (int k = 0; k < 2; ++k) {
      if (n.inputs.at(0) != g.data_inputs.at(static_cast<size_t>(k))) continue;
      out[k] = Tensor(g.values.at(n.outputs.at(0)).shape);
      const Tensor* in[] = {tables[k]};
      Tensor* res[] = {&out[k]};
      run_reference(OpKind::Gather, n.attrs, in, res);
      found[k] = true;
    }
  }
  if (!found[0] || !found[1])
    throw EngineError(fmt::format("{}: step {}'s graph has no gather node of the inputs or the labels",
                                  trainer.job().source, t));
  return {std::move(out[0]), std::move(out[1])};
}

std::vector<Tensor> step_dropout_masks(Trainer& trainer, int64_t t, std::vector<float>* ratios) {
  const StepGraph g = trainer.step_graph(t);
  std::vector<Tensor> masks;
  if (ratios) ratios->clear();
  for (const Node& n : g.nodes) {
    if (n.op != OpKind::Dropout) continue;
    // Dropout of ones: keepᵢ ? 1/(1−p) : 0, the factor the node multiplies xᵢ by (ops/registry.h).
    Tensor ones(g.values.at(n.inputs.at(0)).shape);
    for (float& v : ones.values()) v = 1.0f;
    masks.emplace_back(ones.shape());
    const Tensor* in[] = {&ones};
    Tensor* res[] = {&masks.back()};
    run_reference(OpKind::Dropout, n.attrs, in, res);
    if (ratios) ratios->push_back(n.attrs.floats.at(0));
  }
  return masks;
}

void write_parity_export(const std::filesystem::path& path, Trainer& trainer, const Dataset& train,
                         int64_t steps) {
  const JobSpec& job = trainer.job();
  const StateLayout layout = state_layout(job);
  std::vector<std::pair<std::string, Tensor>> owned;
  for (int64_t t = 0; t < steps; ++t) {
    auto [inputs, labels] = step_batch(trainer, train, t);
    owned.emplace_back(fmt::format("batch{}/inputs", t), std::move(inputs));
    owned.emplace_back(fmt::format("batch{}/labels", t), std::move(labels));
  }
  nlohmann::json config = parity_config(job, steps);
  if (job.model.kind == ModelKind::Onnx) {
    std::vector<float> ratios;
    for (int64_t t = 0; t < steps; ++t) {
      std::vector<Tensor> masks = step_dropout_masks(trainer, t, t == 0 ? &ratios : nullptr);
      for (size_t k = 0; k < masks.size(); ++k)
        owned.emplace_back(fmt::format("batch{}/dropout{}", t, k), std::move(masks[k]));
    }
    config["model"]["dropout"] = nlohmann::json::array();
    for (float r : ratios) config["model"]["dropout"].push_back(static_cast<double>(r));
  }
  std::vector<NamedTensor> tensors;
  for (size_t p = 0; p < layout.num_params; ++p)
    tensors.push_back({"param/" + layout.names[p], &trainer.state().tensors.at(p)});
  for (const auto& [name, tensor] : owned) tensors.push_back({name, &tensor});
  const std::map<std::string, std::string> metadata = {{"format", "tribunal-parity-export-1"},
                                                       {"config", config.dump()},
                                                       {"job_id", to_hex(trainer.job_id())}};
  write_safetensors(path, tensors, metadata);
}

}  // namespace tribunal::parity
