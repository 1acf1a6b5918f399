// The loss head of a step graph: what the job's model.loss (engine/job.h LossKind) compares the model
// output with. Cross-entropy is engine/model.h's append_cross_entropy; mean squared error is composed
// of existing ops here, its order of operations in docs/numerics.md "Mean squared error".
#pragma once

#include <string>

#include "engine/graph.h"
#include "engine/job.h"

namespace tribunal {

/// The mean squared error "loss" of predictions[B, K] against targets[B, K] (torch.nn.MSELoss,
/// reduction "mean"): the mean over all B·K elements of (prediction − target)². Nodes, in order:
/// "loss.diff" = broadcast_binary sub (p − t) [B, K], "loss.square" = broadcast_binary mul
/// (d · d) [B, K], "loss.flat" = reshape [B·K], "loss.mean" = reduce_mean over axis 0 [1] (the
/// canonical sum of the B·K squares, then one division by float(B·K)), "loss" = reshape to [].
/// Every one has a VJP, so the autodiff differentiates it like any other graph. Throws EngineError
/// naming `source` when the shapes are not both [B, K] with the same B and K (K: data.targets).
ValueId append_mse(GraphBuilder& b, ValueId predictions, ValueId targets, const std::string& source);

/// The job's loss of the model output `output` against the batch's `labels`: append_mse for
/// model.loss = "mse", else append_cross_entropy (with `flat_labels_name` for label sequences).
ValueId append_job_loss(GraphBuilder& b, const JobSpec& job, ValueId output, ValueId labels,
                        const std::string& flat_labels_name);

}  // namespace tribunal
