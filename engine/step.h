// The training state's layout and the step graph of a job (docs/architecture.md "State and commitments",
// docs/protocol.md "The game" level 3).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/job.h"

namespace tribunal {

/// The state's named tensors in canonical order: the model parameters, then each optimizer slot
/// per parameter ("adamw.m/<p>", "adamw.v/<p>" or "sgd.momentum/<p>"), then the model's buffers
/// under their own names (engine/model.h model_buffers: BatchNormalization running statistics; none
/// for the built-in models), then "step" (the number of completed steps, a float32 scalar) and "loss"
/// (the training loss of the step that produced this state; 0 in the initial state). state_hash is
/// the Merkle root over these tensors' leaves.
struct StateLayout {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  size_t num_params = 0;    ///< the first num_params tensors are the parameters
  size_t first_buffer = 0;  ///< the buffers are tensors [first_buffer, first_buffer + num_buffers)
  size_t num_buffers = 0;
};

StateLayout state_layout(const JobSpec& job);

/// The graph of training step t (state t → state t+1) for the given batch:
///   gather ×2 (inputs, labels) → forward (engine/model.h; with dropout keyed by (seed, t)) →
///   [labels [B, L] reshaped to [B·L] when data.label_width > 0] → softmax cross-entropy "loss" →
///   backward (autodiff) → [clip_norm > 0: "clip.sumsq/<p>" = sum_squares(grad/<p>) for every
///   parameter in order, "clip.coef" = clip_coefficient(all of them; clip_norm), "clip.grad/<p>" =
///   scale(grad/<p>, clip.coef)] → optimizer node "next/<p>" per parameter, with the learning rate
///   learning_rate(job, t) (engine/schedule.h) and the weight decay where decays() says so, else 0.
///   Each buffer's next value is the forward's update of it (engine/model.h Forward).
/// With job.shards = S > 1 the part up to the gradients is built once per shard of B/S rows and
/// the shards' losses and gradients are combined in a fixed tree (docs/numerics.md "Sharded batch
/// reductions"; StepGraph::node_shards, partials): shard s's values are named "shard<s>/<name>", the
/// combined ones "loss" and "grad/<p>" as in the unsharded graph.
/// A pure function of (job, data shape, t, batch indices); the batch comes from BatchSampler.
/// Throws EngineError when data.label_width is not the model's (gpt: the context; others: 0), S does
/// not divide the batch, or S > 1 for a model with buffers (batch statistics are not a sum of shards'), and
/// OpError when another shape does not fit. An MLP job with a constant rate, no clipping and decay "all" has
/// exactly the graph it had before schedules, clipping and decay scopes existed.
StepGraph build_step_graph(const JobSpec& job, const DataShape& data, int64_t step,
                           std::span<const int64_t> batch_indices);

/// Forward-only graph for evaluation: data input 0 is x [rows, features], the result `loss` field
/// holds the logits ([rows, classes]; GPT: [rows·T, vocab]) instead. State inputs are the parameters,
/// then the buffers. No dropout; BatchNormalization normalizes by the running statistics.
StepGraph build_eval_graph(const JobSpec& job, const DataShape& data, int64_t rows);

/// Forward graph with the loss for evaluation: data inputs x [rows, features] and labels ([rows] or
/// [rows, label_width]); `loss` is the mean softmax cross-entropy over the rows (GPT: over the rows·T
/// predictions). State inputs are the parameters, then the buffers. No dropout; BatchNormalization
/// normalizes by the running statistics.
StepGraph build_eval_loss_graph(const JobSpec& job, const DataShape& data, int64_t rows);

/// Whether the optimizer decays the parameter of this shape: decay "all", or rank ≥ 2 for "matrices".
bool decays(const JobSpec& job, const Shape& param_shape);

}  // namespace tribunal
