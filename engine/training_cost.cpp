#include "engine/training_cost.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "engine/cost.h"
#include "engine/state.h"
#include "engine/step.h"

namespace tribunal {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t mul(uint64_t a, uint64_t b) {
  return a != 0 && b > kMax / a ? kMax : a * b;
}
uint64_t add(uint64_t a, uint64_t b) {
  return b > kMax - a ? kMax : a + b;
}

// The training set's shape as the model sees it: what a data set the job fits must have (the sample
// count only sizes the data tables, which the estimate leaves out).
DataShape model_shape(const JobSpec& job, int64_t rows) {
  const ModelSpec& m = job.model;
  switch (m.kind) {
    case ModelKind::Mlp:
      return {rows, m.widths.front(), m.widths.back(), label_width(job)};  // mse: K targets
    case ModelKind::Cnn:
      return {rows, m.image_channels * m.image_height * m.image_width, m.classes, 0};
    case ModelKind::Gpt:
      return {rows, m.context, m.vocab, m.context};
    case ModelKind::Onnx: {  // the graph input's per-sample elements, as declared in the file
      int64_t features = 1;
      if (m.onnx && !m.onnx->inputs().empty()) {
        const OnnxValueInfo* named = m.input.empty() ? nullptr : m.onnx->input(m.input);
        const OnnxValueInfo& in = named ? *named : m.onnx->inputs().front();
        for (size_t d = 1; d < in.dims.size(); ++d) features *= std::max<int64_t>(in.dims[d], 1);
      }
      return {rows, features, m.classes, label_width(job)};
    }
  }
  return {rows, 0, 0, 0};
}

}  // namespace

TrainingCost training_cost(const JobSpec& job) {
  // One shard of B/S rows as an unsharded job: the same nodes and shapes as each shard's part of the
  // sharded graph (its forward and backward), built in time independent of S.
  JobSpec shard = job;
  const int64_t rows = job.batch_size / std::max<int64_t>(job.shards, 1);
  shard.shards = 1;
  shard.batch_size = rows;
  std::vector<int64_t> batch(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) batch[static_cast<size_t>(r)] = r;
  const StepGraph g = build_step_graph(shard, model_shape(shard, rows), 0, batch);
  uint64_t work = 0, bytes = 0;
  for (const Node& n : g.nodes) {
    work = add(work, node_work(g, n));
    for (ValueId v : n.outputs)
      bytes = add(bytes, mul(4, static_cast<uint64_t>(g.values.at(v).shape.numel())));
  }
  const JobFootprint footprint = job_footprint(job);
  const auto shards = static_cast<uint64_t>(std::max<int64_t>(job.shards, 1));
  const auto parameters = static_cast<uint64_t>(footprint.parameters);
  const uint64_t tensors = state_layout(job).num_params + 1;  // every gradient and the loss
  // Combining S partials takes S − 1 adds per gradient (and loss), each reading two partials.
  const uint64_t combines = shards - 1;
  TrainingCost c;
  c.nodes = add(mul(static_cast<uint64_t>(g.nodes.size()), shards), mul(combines, tensors));
  c.step_work = add(mul(work, shards), mul(combines, mul(3, add(parameters, 1))));
  c.total_work = mul(c.step_work, static_cast<uint64_t>(job.steps));
  c.memory_bytes = add(mul(bytes, shards), mul(combines, mul(4, add(parameters, 1))));
  c.memory_bytes = add(c.memory_bytes, mul(4, footprint.state_bytes));
  return c;
}

}  // namespace tribunal
