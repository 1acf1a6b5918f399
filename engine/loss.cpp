#include "engine/loss.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/model.h"

namespace tribunal {

ValueId append_mse(GraphBuilder& b, ValueId predictions, ValueId targets, const std::string& source) {
  const Shape p = b.graph().values.at(predictions).shape, t = b.graph().values.at(targets).shape;
  if (p.rank() != 2)
    throw EngineError(fmt::format(
        "{}: model.loss = \"mse\" reads a model output of shape [B, K] (K predictions per sample), but the "
        "model's output is {}",
        source, p.str()));
  if (t.rank() != 2 || t[0] != p[0] || t[1] != p[1])
    throw EngineError(fmt::format(
        "{}: the model output is {} ({} predictions per sample), but the targets are {} (data.targets = {})",
        source, p.str(), p[1], t.str(), t.rank() == 2 ? t[1] : 0));
  // Broadcast codes (ops/registry.h BroadcastBinary): 1 sub, 2 mul.
  const ValueId diff =
      b.add_node(OpKind::BroadcastBinary, {{1}, {}}, {predictions, targets}, "loss.diff").front();
  const ValueId square = b.add_node(OpKind::BroadcastBinary, {{2}, {}}, {diff, diff}, "loss.square").front();
  const ValueId flat = b.add_node(OpKind::Reshape, {{p[0] * p[1]}, {}}, {square}, "loss.flat").front();
  const ValueId mean = b.add_node(OpKind::ReduceMean, {{0}, {}}, {flat}, "loss.mean").front();
  return b.add_node(OpKind::Reshape, {}, {mean}, "loss").front();
}

ValueId append_job_loss(GraphBuilder& b, const JobSpec& job, ValueId output, ValueId labels,
                        const std::string& flat_labels_name) {
  if (job.model.loss == LossKind::Mse) return append_mse(b, output, labels, job.source);
  return append_cross_entropy(b, output, labels, flat_labels_name);
}

}  // namespace tribunal
