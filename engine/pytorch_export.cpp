// The PyTorch form of a state. See pytorch_export.h.
#include "engine/pytorch_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string_view>

#include "engine/error.h"
#include "engine/model.h"
#include "engine/safetensors.h"
#include "engine/step.h"

namespace tribunal {
namespace {

// "<prefix><digits>.<rest>" → (digits, rest); nullopt when `name` is not of that form.
std::optional<std::pair<int64_t, std::string>> split_indexed(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  const size_t dot = name.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  int64_t index = 0;
  const auto [end, ec] = std::from_chars(name.data(), name.data() + dot, index);
  if (ec != std::errc{} || end != name.data() + dot) return std::nullopt;
  return std::pair{index, std::string(name.substr(dot + 1))};
}

// The torch counterpart of our parameter `name` of a `kind` model; nullopt when it has none.
std::optional<TorchParam> torch_param(ModelKind kind, const std::string& name) {
  // An imported model's parameters are the ONNX initializers torch.onnx.export wrote: the module's
  // own state_dict names, in torch's layouts.
  if (kind == ModelKind::Onnx) return TorchParam{name, false};
  if (kind == ModelKind::Mlp) {
    // nn.Sequential(Linear, ReLU, Linear, …): Linear l is module 2l.
    const auto l = split_indexed(name, "l");
    if (!l || (l->second != "weight" && l->second != "bias")) return std::nullopt;
    return TorchParam{fmt::format("{}.{}", 2 * l->first, l->second), l->second == "weight"};
  }
  if (kind == ModelKind::Cnn) {
    if (const auto c = split_indexed(name, "conv"); c && (c->second == "weight" || c->second == "bias"))
      return TorchParam{fmt::format("convs.{}.{}", c->first, c->second), false};
    if (name == "fc.weight") return TorchParam{name, true};
    if (name == "fc.bias") return TorchParam{name, false};
    return std::nullopt;
  }
  // GPT (tools/parity_torch.py's Gpt and Block).
  if (name == "tok_emb" || name == "pos_emb") return TorchParam{name + ".weight", false};
  if (name == "ln_f.weight" || name == "ln_f.bias" || name == "head.bias") return TorchParam{name, false};
  if (name == "head.weight") return TorchParam{name, true};
  const auto h = split_indexed(name, "h");
  if (!h) return std::nullopt;
  // Ours (inside block l) → the Block's attribute, and whether it is an nn.Linear.
  static const std::map<std::string, std::pair<std::string, bool>> kBlock = {
      {"ln1", {"ln1", false}},  {"ln2", {"ln2", false}},         {"attn.q", {"q", true}},
      {"attn.k", {"k", true}},  {"attn.v", {"v", true}},         {"attn.proj", {"proj", true}},
      {"mlp.fc", {"fc", true}}, {"mlp.proj", {"mlp_proj", true}}};
  const size_t dot = h->second.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string module = h->second.substr(0, dot), param = h->second.substr(dot + 1);
  const auto it = kBlock.find(module);
  if (it == kBlock.end() || (param != "weight" && param != "bias")) return std::nullopt;
  return TorchParam{fmt::format("blocks.{}.{}.{}", h->first, it->second.first, param),
                    it->second.second && param == "weight"};
}

// w [rows, cols] → [cols, rows], in tiles so that both sides stream through the cache.
Tensor transposed(const Tensor& w) {
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  Tensor out(Shape{cols, rows});
  const float* in = w.data();
  float* o = out.data();
  constexpr int64_t kTile = 32;
  for (int64_t i0 = 0; i0 < rows; i0 += kTile)
    for (int64_t j0 = 0; j0 < cols; j0 += kTile)
      for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j) o[j * rows + i] = in[i * cols + j];
  return out;
}

const char* model_name(ModelKind kind) {
  switch (kind) {
    case ModelKind::Mlp:
      return "mlp";
    case ModelKind::Gpt:
      return "gpt";
    case ModelKind::Cnn:
      return "cnn";
    case ModelKind::Onnx:
      return "onnx";
  }
  return "?";
}

// torch.optim's state key of each of our slot prefixes (engine/step.cpp's slot names).
std::vector<std::pair<std::string, std::string>> slot_keys(OptimizerKind kind) {
  if (kind == OptimizerKind::AdamW) return {{"adamw.m/", "exp_avg"}, {"adamw.v/", "exp_avg_sq"}};
  return {{"sgd.momentum/", "momentum_buffer"}};
}

std::string number(double v) {
  return fmt::format("{:.9g}", v);
}

}  // namespace

std::vector<TorchParam> torch_params(const ModelSpec& model) {
  std::vector<TorchParam> out;
  for (const ParamSpec& p : model_params(model)) {
    std::optional<TorchParam> t = torch_param(model.kind, p.name);
    if (!t)
      throw EngineError(fmt::format("the {} model's parameter '{}' has no PyTorch counterpart",
                                    model_name(model.kind), p.name));
    if (t->transposed && p.shape.rank() != 2)
      throw EngineError(fmt::format("the {} model's Linear weight '{}' has shape {}, not [in, out]",
                                    model_name(model.kind), p.name, p.shape.str()));
    out.push_back(std::move(*t));
  }
  return out;
}

PytorchState to_pytorch(const JobSpec& job, const State& state) {
  const StateLayout layout = state_layout(job);
  if (state.tensors.size() != layout.names.size())
    throw EngineError(fmt::format("{}: the state has {} tensors, the job's layout {}", job.source,
                                  state.tensors.size(), layout.names.size()));
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < layout.names.size(); ++i) {
    if (state.tensors[i].shape() != layout.shapes[i])
      throw EngineError(fmt::format("{}: state tensor '{}' has shape {}, the job's layout {}", job.source,
                                    layout.names[i], state.tensors[i].shape().str(), layout.shapes[i].str()));
    index[layout.names[i]] = i;
  }
  const std::vector<TorchParam> names = torch_params(job.model);
  const auto convert = [&](const TorchParam& t, size_t i) {
    return t.transposed ? transposed(state.tensors[i]) : state.tensors[i];
  };
  PytorchState out;
  for (size_t p = 0; p < names.size(); ++p) out.model.push_back({names[p].name, convert(names[p], p)});
  const std::string running_mean = ".running_mean";
  for (size_t k = 0; k < layout.num_buffers; ++k) {
    const std::string& name = layout.names[layout.first_buffer + k];
    out.model.push_back({name, state.tensors[layout.first_buffer + k]});
    if (job.model.onnx && job.model.onnx->producer() == "pytorch" && name.size() > running_mean.size() &&
        name.compare(name.size() - running_mean.size(), running_mean.size(), running_mean) == 0)
      out.batch_counters.push_back(name.substr(0, name.size() - running_mean.size()) +
                                   ".num_batches_tracked");
  }
  for (size_t p = 0; p < names.size(); ++p)
    for (const auto& [slot, key] : slot_keys(job.optimizer.kind))
      out.optimizer.push_back(
          {key + "/" + names[p].name, convert(names[p], index.at(slot + layout.names[p]))});
  out.step = state.step();
  out.loss = state.tensors.at(index.at("loss"))[0];
  return out;
}

void write_pytorch(const std::filesystem::path& model, const std::filesystem::path& optimizer,
                   const JobSpec& job, const State& state, const Digest& job_id, const Digest& state_hash) {
  write_pytorch(model, optimizer, job, to_pytorch(job, state), job_id, state_hash);
}

void write_pytorch(const std::filesystem::path& model, const std::filesystem::path& optimizer,
                   const JobSpec& job, const PytorchState& form, const Digest& job_id,
                   const Digest& state_hash) {
  std::map<std::string, std::string> meta = {{"model", model_name(job.model.kind)},
                                             {"job_id", to_hex(job_id)},
                                             {"step", std::to_string(form.step)},
                                             {"loss", number(form.loss)},
                                             {"state_hash", to_hex(state_hash)}};
  const int64_t step = form.step;
  const auto step_bytes = std::as_bytes(std::span<const int64_t>(&step, 1));
  std::vector<RawTensor> weights;
  for (const TorchTensor& t : form.model) {
    const auto dims = t.value.shape().dims();
    weights.push_back({t.name, "F32", {dims.begin(), dims.end()}, t.value.bytes()});
  }
  for (const std::string& name : form.batch_counters) weights.push_back({name, "I64", {}, step_bytes});
  meta["format"] = "tribunal-pytorch-model-1";
  write_safetensors_raw(model, weights, meta);

  const OptimizerSpec& o = job.optimizer;
  meta["format"] = "tribunal-pytorch-optimizer-1";
  meta["lr"] = number(o.lr);
  meta["weight_decay"] = number(o.weight_decay);
  if (o.kind == OptimizerKind::AdamW) {
    meta["optimizer"] = "adamw";
    meta["betas"] = fmt::format("{},{}", number(o.beta1), number(o.beta2));
    meta["eps"] = number(o.eps);
  } else {
    meta["optimizer"] = "sgd";
    meta["momentum"] = number(o.momentum);
  }
  std::vector<RawTensor> slots;
  for (const TorchTensor& t : form.optimizer) {
    const auto dims = t.value.shape().dims();
    slots.push_back({t.name, "F32", {dims.begin(), dims.end()}, t.value.bytes()});
  }
  slots.push_back({"step", "I64", {}, step_bytes});
  write_safetensors_raw(optimizer, slots, meta);
}

Tensor from_torch(const TorchParam& param, Tensor value) {
  if (!param.transposed) return value;
  if (value.shape().rank() != 2)
    throw EngineError(
        fmt::format("{}: a Linear weight must be 2-D, it has shape {}", param.name, value.shape().str()));
  return transposed(value);
}

}  // namespace tribunal
