// The parity export: what PyTorch needs to run a tribunal job's first steps itself (tools/torch_parity.py
// writes the parity fixtures from it, tools/torch_gpt_step.py times the GPT step on it). A safetensors
// file (engine/safetensors.h) holding
//   param/<name>                     the initial parameters (state 0), by our parameter names and layouts
//   batch<t>/inputs, batch<t>/labels the gathered batch of step t, exactly as the step graph's gather
//                                    nodes produce it from our sampler's indices
//   batch<t>/dropout<k>              onnx jobs: the factor (keepᵢ ? 1/(1−p) : 0) the k-th Dropout node of
//                                    step t's graph multiplies its input by, so that torch applies our
//                                    masks (its own RNG draws others)
// and the metadata {format: "tribunal-parity-export-1", config: JSON (parity_config), job_id: hex}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/dataset.h"
#include "engine/trainer.h"

namespace tribunal::parity {

/// The job as tools/parity_torch.py reads it: {"model": {kind, vocab, context, layers, heads, d_model,
/// dropout | channels, kernel, image_channels, image_height, image_width, classes | widths | file, input,
/// output, params (the imported parameters' names, in state order) and, in the export, dropout (the
/// ratio of each Dropout node)}, "optimizer":
/// {kind, lr, beta1, beta2, eps, weight_decay, decay ("all" | "matrices"), clip_norm, schedule ("constant" |
/// "cosine"), warmup_steps, min_lr, total_steps}, "steps": exported steps, "batch_size"}. Floats are the
/// job's float32 values exactly (as binary64). Throws EngineError for an SGD job (no torch twin).
nlohmann::json parity_config(const JobSpec& job, int64_t steps);

/// The batch of step t as our step graph gathers it: {inputs [B, F], labels [B] or [B, L]}. Runs the
/// gather nodes of trainer.step_graph(t) with the reference kernel on `train` (the trainer's data set).
std::pair<Tensor, Tensor> step_batch(Trainer& trainer, const Dataset& train, int64_t t);

/// The dropout factors of step t's Dropout nodes, in graph order: the node's reference kernel run on
/// ones of its input's shape (keepᵢ ? 1/(1−p) : +0). Appends each node's ratio p to `ratios` if given.
std::vector<Tensor> step_dropout_masks(Trainer& trainer, int64_t t, std::vector<float>* ratios = nullptr);

/// Writes the export of the first `steps` steps of the trainer's job (its current state must be state 0)
/// to `path`. Throws EngineError when the file cannot be written.
void write_parity_export(const std::filesystem::path& path, Trainer& trainer, const Dataset& train,
                         int64_t steps);

}  // namespace tribunal::parity
