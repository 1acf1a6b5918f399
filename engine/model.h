// Models: their parameters, their initialization and their forward graph.
//  - MLP: Linear layers with ReLU between them.
//  - GPT: a decoder-only, pre-LayerNorm transformer over bytes (Radford et al. 2019, "Language
//    Models are Unsupervised Multitask Learners" (GPT-2); Karpathy's nanoGPT model.py), with
//    separate q/k/v projections, learned positions and no weight tying.
//  - CNN: conv → ReLU → 2×2 max-pool blocks and a Linear classifier (LeCun et al. 1998 style).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/job.h"

namespace tribunal {

/// How a parameter tensor is initialized (init_param).
enum class InitRule : uint8_t {
  FanIn,      ///< uniform ±1/√fan_in: PyTorch's nn.Linear / nn.Conv2d default, weights and biases
  Embedding,  ///< uniform ±0.02·√3 (standard deviation 0.02, the GPT-2 embedding scale)
  Ones,       ///< 1 (LayerNorm gain)
  Zeros,      ///< 0 (LayerNorm shift)
};

/// One trainable parameter tensor.
struct ParamSpec {
  std::string name;  ///< e.g. "l0.weight", "h1.attn.q.weight", "conv0.bias"
  Shape shape;
  int64_t fan_in;  ///< inputs per output unit, sets the FanIn bound (0 for the other rules)
  InitRule init = InitRule::FanIn;
};

/// The parameters of a model, in canonical order.
///  - MLP layer l: "l<l>.weight" [in, out] (y = x·w + b, the input-major layout that lets the matmul
///    vectorize over outputs) and "l<l>.bias" [out].
///  - GPT (V vocab, T context, D d_model): "tok_emb" [V,D], "pos_emb" [T,D]; per layer l
///    "h<l>.ln1.weight" [D], "h<l>.ln1.bias" [D], "h<l>.attn.{q,k,v}.weight" [D,D] and ".bias" [D]
///    (q, k, v in that order, each weight then bias), "h<l>.attn.proj.weight" [D,D], ".bias" [D],
///    "h<l>.ln2.weight", "h<l>.ln2.bias", "h<l>.mlp.fc.weight" [D,4D], "h<l>.mlp.fc.bias" [4D],
///    "h<l>.mlp.proj.weight" [4D,D], "h<l>.mlp.proj.bias" [D]; then "ln_f.weight", "ln_f.bias",
///    "head.weight" [D,V], "head.bias" [V].
///  - CNN: per block i "conv<i>.weight" [C_out, C_in, k, k] and "conv<i>.bias" [C_out] (fan_in
///    C_in·k·k), then "fc.weight" [C_last·(H/2ⁿ)·(W/2ⁿ), classes] and "fc.bias" [classes].
std::vector<ParamSpec> model_params(const ModelSpec& model);

/// A buffer: a state tensor the forward reads and a training step replaces, which the optimizer does
/// not train — an imported model's BatchNormalization running mean or variance (docs/onnx.md
/// "Parameters and buffers"). The built-in models have none.
struct BufferSpec {
  std::string name;  ///< the file's name, e.g. "bn1.running_mean"
  Shape shape;
};

/// The buffers of a model in canonical order (onnx: OnnxModel::buffers(), file order).
std::vector<BufferSpec> model_buffers(const ModelSpec& model);

/// Fills `out` (already shaped) with parameter `param_index` of the model. For the uniform rules,
/// element i is
///   u = uniform_from_bits(philox_random(seed, Init, param_index, i)[0]);  w = (2u − 1)·bound
/// with bound = 1/sqrt(float(fan_in)) (FanIn) or 0.034641016f = 0.02·√3 (Embedding); Ones and Zeros
/// fill the constant. Reproducible element by element on any device.
void init_param(uint64_t seed, uint32_t param_index, const ParamSpec& spec, Tensor& out);

/// Where a forward graph is used: a training step (dropout on, its masks keyed by the job's seed
/// and the step) or evaluation (no dropout nodes at all).
struct ForwardOptions {
  bool training = false;
  uint64_t seed = 0;  ///< the job's seed (Dropout attribute)
  int64_t step = 0;   ///< the step t being taken (Dropout attribute)
  /// Of a sharded step graph: the forward of shard `shard` of `shards`. Dropout site k of the shard's
  /// forward is k·shards + shard, so no two shards draw the same mask (1 shard: site k, as before).
  int64_t shard = 0, shards = 1;
};

/// LayerNorm's ε in the GPT (PyTorch's nn.LayerNorm default).
inline constexpr float kLayerNormEps = 1e-5f;

/// What build_forward appends: the logits and, in a training forward of a model with buffers, each
/// buffer's next value (model_buffers() order; empty otherwise).
struct Forward {
  ValueId logits = 0;
  std::vector<ValueId> buffer_updates;
};

/// Appends the forward pass to the graph. `params` are the graph values of model_params(), `buffers`
/// those of model_buffers(), same orders. With options.training a model's BatchNormalization
/// normalizes by the batch and updates its buffers; otherwise by the buffers (evaluation).
///  - MLP: x [B, features] → logits [B, classes].
///  - CNN: x [B, C·H·W] → Reshape [B,C,H,W] → per block conv (stride 1, pad k/2) → relu → max-pool
///    → Reshape [B, C_last·h·w] → Linear → logits [B, classes].
///  - GPT: ids x [B, T] (byte values as floats) → logits [B·T, V] (row b·T + t predicts token t+1
///    of window b): Embedding → Dropout, per layer x += Dropout(proj(attn(LN1(x)))),
///    x += Dropout(mlp.proj(GELU(mlp.fc(LN2(x))))) with causal softmax attention scaled by
///    1/√E per head (E = D/H), then LN_f and the head. With options.training and dropout p > 0, each
///    Dropout node has ints {seed, step, site} (site: its index among the forward's dropout nodes, in
///    forward order; sharded: see ForwardOptions::shard) and floats {p}; otherwise no dropout nodes are
///    emitted. Value names, in order: "embed" [B·T,D], "embed.dropout"; per layer "h<l>.ln1",
///    "h<l>.attn.{q,k,v}" [B·T,D], "h<l>.attn.{q,k,v}.heads" [B·H,T,E], "h<l>.attn.scores" and
///    "h<l>.attn.softmax" [B·H,T,T], "h<l>.attn.context" [B·H,T,E], "h<l>.attn.merge", "h<l>.attn.proj",
///    "h<l>.attn.dropout", "h<l>.attn.residual", "h<l>.ln2", "h<l>.mlp.fc" and "h<l>.mlp.gelu" [B·T,4D],
///    "h<l>.mlp.proj", "h<l>.mlp.dropout", "h<l>.out" [B·T,D]; then "ln_f" and "logits" [B·T,V]. The autodiff
///    names each gradient "grad/<value>" (e.g. "grad/logits", "grad/h0.attn.q.weight"). CNN names:
///    "input.image", "conv<i>.out", "conv<i>.relu", "conv<i>.pool", "flatten", "logits".
/// Throws OpError when a shape does not fit.
Forward build_forward(GraphBuilder& b, const ModelSpec& model, std::span<const ValueId> params,
                      std::span<const ValueId> buffers, ValueId x, const ForwardOptions& options = {});

/// The mean softmax cross-entropy "loss" of `logits` against `labels`: class ids labels[B] against
/// logits[B, C], or label sequences labels[B, L] (next-token prediction) reshaped to [B·L] (the value
/// `flat_labels_name`) against logits[B·L, V], or logits[B, L, V] reshaped to [B·L, V] ("logits.flat",
/// an imported model's output). Throws OpError when the shapes do not fit.
ValueId append_cross_entropy(GraphBuilder& b, ValueId logits, ValueId labels,
                             const std::string& flat_labels_name);

}  // namespace tribunal
