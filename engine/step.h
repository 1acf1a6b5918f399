// The training state's layout and the step graph of a job (DESIGN §5 "State", §6 level 3).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/job.h"

namespace tribunal {

/// Sizes of the data set a job trains on.
struct DataShape {
  int64_t samples = 0;
  int64_t features = 0;
  int64_t classes = 0;
  int64_t label_width = 0;  ///< 0: one class id per sample (labels [N]); L: a label sequence (labels [N, L])
};

/// The state's named tensors in canonical order: the model parameters, then each optimizer slot
/// per parameter ("adamw.m/<p>", "adamw.v/<p>" or "sgd.momentum/<p>"), then "step" (the number of
/// completed steps, a float32 scalar) and "loss" (the training loss of the step that produced this
/// state; 0 in the initial state). state_hash is the Merkle root over these tensors' leaves.
struct StateLayout {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  size_t num_params = 0;  ///< the first num_params tensors are the parameters
};

StateLayout state_layout(const JobSpec& job);

/// The graph of training step t (state t → state t+1) for the given batch:
///   gather ×2 (inputs, labels) → forward → softmax cross-entropy → backward (autodiff) → optimizer
/// A pure function of (job, data shape, t, batch indices); the batch comes from BatchSampler.
StepGraph build_step_graph(const JobSpec& job, const DataShape& data, int64_t step,
                           std::span<const int64_t> batch_indices);

/// Forward-only graph for evaluation: data input 0 is x [rows, features], the result `loss` field
/// holds the logits [rows, classes] instead. State inputs are the parameters only.
StepGraph build_eval_graph(const JobSpec& job, const DataShape& data, int64_t rows);

}  // namespace tribunal
