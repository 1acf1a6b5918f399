// The PyTorch form of a training state: what `tribunal export` and the delegate write for users. A
// conversion only — the committed form stays the checkpoint of engine/state.h (its state_hash is over
// the tensors in their stored layout, docs/commitments.md); this form is never hashed or disputed.
//
// Names and layouts are those of the reference torch modules of tools/parity_torch.py (docs/parity.md
// "Exported weights"), so `module.load_state_dict(tensors, strict=True)` takes the model file as is:
//  - MLP: nn.Sequential(Linear, ReLU, Linear, …): "l<i>.weight" [in, out] → "<2i>.weight" [out, in]
//    (transposed), "l<i>.bias" → "<2i>.bias";
//  - GPT: "tok_emb" → "tok_emb.weight", "pos_emb" → "pos_emb.weight"; "h<l>.ln1.*" → "blocks.<l>.ln1.*",
//    "h<l>.attn.{q,k,v,proj}.*" → "blocks.<l>.{q,k,v,proj}.*", "h<l>.ln2.*" → "blocks.<l>.ln2.*",
//    "h<l>.mlp.fc.*" → "blocks.<l>.fc.*", "h<l>.mlp.proj.*" → "blocks.<l>.mlp_proj.*", "ln_f.*",
//    "head.*"; every Linear weight transposed to [out, in]; embeddings and LayerNorm as stored;
//  - CNN: "conv<i>.*" → "convs.<i>.*" (Conv2d's [C_out, C_in, k, k], as stored), "fc.weight"
//    transposed to [classes, features], "fc.bias".
// An imported model's buffers (BatchNorm running statistics) follow its parameters in the model file,
// under their own names; for a file PyTorch wrote, each BatchNorm's "<module>.num_batches_tracked"
// (an I64 scalar: the steps taken, one training forward each) is added, as torch's state_dict has it.
// The optimizer state is keyed by the same torch names, with torch.optim's state keys: AdamW
// "exp_avg/<name>" (m) and "exp_avg_sq/<name>" (v), SGD "momentum_buffer/<name>"; and "step", the
// number of updates taken (torch.optim's per-parameter `step`), an I64 scalar. Each slot has its
// parameter's torch layout (transposed with it). Our AdamW and SGD updates keep exactly torch's
// exp_avg, exp_avg_sq and momentum_buffer (ops/kernels/optimizer.cpp), so torch.optim resumes from
// them: state[i] = {"step": step, "exp_avg": …, "exp_avg_sq": …} for the i-th parameter of its groups.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/state.h"

namespace tribunal {

/// Where parameter i of model_params() goes in the PyTorch form.
struct TorchParam {
  std::string name;         ///< the torch module's parameter path, e.g. "blocks.0.q.weight"
  bool transposed = false;  ///< an nn.Linear weight: ours [in, out], torch's [out, in]
};

/// The torch name and layout of every parameter of the model, in model_params() order; driven by the
/// parameters' names and shapes, so a model whose shapes come from its data set maps the same way.
/// Throws EngineError naming a parameter that has no torch counterpart.
std::vector<TorchParam> torch_params(const ModelSpec& model);

/// The internal form (engine/model.h) of a parameter given in its PyTorch form: `value` transposed
/// back to [in, out] when `param.transposed`, else as is. What a model.init file in the PyTorch form
/// needs (engine/init_weights.h).
Tensor from_torch(const TorchParam& param, Tensor value);

/// One tensor of the PyTorch form.
struct TorchTensor {
  std::string name;
  Tensor value;
};

/// A state in the PyTorch form (see the file comment for names and layouts).
struct PytorchState {
  std::vector<TorchTensor> model;  ///< the module's state_dict: model_params() order, then model_buffers()
  std::vector<std::string> batch_counters;  ///< I64 "….num_batches_tracked" entries, each = step
  std::vector<TorchTensor> optimizer;       ///< per parameter (same order), its slots in torch.optim's order
  int64_t step = 0;                         ///< updates taken (the state's "step")
  float loss = 0.0f;                        ///< the state's "loss": the training loss of step `step` − 1
};

/// Converts a state of `job` (the tensors of state_layout(job), as loaded by load_checkpoint) to the
/// PyTorch form: renamed, Linear weights and their slots transposed, values otherwise bitwise equal.
/// Throws EngineError when the state does not have the job's layout.
PytorchState to_pytorch(const JobSpec& job, const State& state);

/// Writes the PyTorch form of `state` as two safetensors files (atomically, engine/safetensors.h):
/// `model` (F32 weights only) and `optimizer` (F32 slots and the I64 "step"). Both carry the metadata
/// {format: "tribunal-pytorch-model-1" | "tribunal-pytorch-optimizer-1", model: "mlp" | "gpt" | "cnn",
/// job_id, step, loss (%.9g), state_hash: the hash of the committed checkpoint this came from (hex)};
/// the optimizer's adds {optimizer: "adamw" | "sgd"} and its hyperparameters (lr, betas, eps,
/// momentum, weight_decay as %.9g). Throws EngineError naming the file on any failure.
void write_pytorch(const std::filesystem::path& model, const std::filesystem::path& optimizer,
                   const JobSpec& job, const State& state, const Digest& job_id, const Digest& state_hash);

/// As above, from a state already converted by to_pytorch(job, state) (no second copy of the state).
void write_pytorch(const std::filesystem::path& model, const std::filesystem::path& optimizer,
                   const JobSpec& job, const PytorchState& form, const Digest& job_id,
                   const Digest& state_hash);

}  // namespace tribunal
