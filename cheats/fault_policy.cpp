#include "cheats/fault_policy.h"

namespace tribunal::cheats {

void FaultPolicy::check(const JobSpec& job, const DataShape& data) const {
  check_fault(fault_, job, data);
}

int64_t FaultPolicy::claimed_steps(const JobSpec& job) const {
  return fault_.claim_steps >= 0 ? fault_.claim_steps : job.steps;
}

void FaultPolicy::initial_state(State& state) const {
  state.tensors[0][0] += fault_.init_delta;
}

std::vector<int64_t> FaultPolicy::batch(int64_t t, BatchSampler& sampler) const {
  // Reorder: steps reorder_step and reorder_with exchange their batches.
  int64_t source = t;
  if (fault_.reorder_step >= 0 && t == fault_.reorder_step) source = fault_.reorder_with;
  if (fault_.reorder_step >= 0 && t == fault_.reorder_with) source = fault_.reorder_step;
  std::vector<int64_t> rows = sampler.indices(source);
  if (t == fault_.swap_step) rows.at(static_cast<size_t>(fault_.swap_position)) = fault_.swap_row;
  return rows;
}

GraphAttributes FaultPolicy::graph_attributes(int64_t t, const JobSpec& job) const {
  GraphAttributes a;
  if (fault_.hparam_from >= 0 && t >= fault_.hparam_from) {
    a.job = job;
    a.job->optimizer.lr *= fault_.lr_scale;
    a.job->optimizer.weight_decay *= fault_.wd_scale;
    a.records_name_job = fault_.hparam_hidden;  // a hidden change: the records name the job's
  }
  return a;
}

Executor::NodeHook FaultPolicy::node_hook(int64_t t, const StepGraph& g) const {
  const bool corrupt = t == fault_.step;
  const bool relabel = t == fault_.relabel_step;
  const bool bf16 = fault_.bf16_from >= 0 && t >= fault_.bf16_from;
  if (!corrupt && !relabel && !bf16) return {};
  // The label gather holding batch position relabel_position (one per shard, B/S rows each).
  size_t label_gather = g.nodes.size();
  int64_t relabel_row = fault_.relabel_position;
  for (size_t n = 0; n < g.nodes.size() && relabel; ++n) {
    if (g.nodes[n].op != OpKind::Gather || g.nodes[n].inputs.at(0) != g.data_inputs.at(1)) continue;
    const auto rows = static_cast<int64_t>(g.nodes[n].attrs.ints.size());
    if (relabel_row < rows) {
      label_gather = n;
      break;
    }
    relabel_row -= rows;
  }
  std::vector<OpKind> ops;  // each node's op kind (for bf16), so the hook does not hold the graph
  for (const Node& node : g.nodes) ops.push_back(node.op);
  return [f = fault_, corrupt, bf16, label_gather, relabel_row, ops = std::move(ops)](
             size_t n, std::span<Tensor* const> outputs) {
    if (n == label_gather) (*outputs[0])[relabel_row] = static_cast<float>(f.relabel_label);
    if (bf16 && ops[n] == f.bf16_op)
      for (Tensor* out : outputs)
        for (float& x : out->values()) x = round_to_bf16(x);
    if (corrupt && static_cast<int64_t>(n) == f.node) {
      Tensor& out = *outputs[f.slot];
      if (f.element >= 0)
        out[f.element] += f.delta;
      else
        for (float& x : out.values()) x += f.delta;
    }
  };
}

StepPolicy::RoundingTamper FaultPolicy::rounding_tamper(int64_t t) const {
  if (fault_.rounding == RoundingFault::None || fault_.rounding_step != t) return {};
  return
      [f = fault_, t](size_t n, std::span<const std::vector<double>> wide, RoundingLog& log,
                      std::span<Tensor* const> out, double tau, std::span<const std::vector<double>> quanta) {
        tamper_rounding(f, t, n, wide, log, out, tau, quanta);
      };
}

bool FaultPolicy::skipped(int64_t t) const {
  return fault_.skip_from >= 0 && t >= fault_.skip_from && t - fault_.skip_from < fault_.skip_count;
}

bool FaultPolicy::begin_step(int64_t t, const Replay& replay_to) {
  const bool extrapolate = fault_.skip_from >= 0 && fault_.skip_mode == SkipMode::Extrapolate;
  // Δ is learned when step skip_from − 1 runs (claimed_state); a trainer that did not run it (a
  // dispute responder starting from a checkpoint) replays its own trajectory up to state skip_from
  // first (its steps before skip_from never skip, so nothing recurses).
  if (skipped(t) && extrapolate && skip_delta_.empty() && fault_.skip_from > 0) replay_to(fault_.skip_from);
  return skipped(t) || (extrapolate && t + 1 == fault_.skip_from && skip_delta_.empty());
}

bool FaultPolicy::claimed_state(int64_t t, const State& pre, State& post) {
  const bool extrapolate = fault_.skip_from >= 0 && fault_.skip_mode == SkipMode::Extrapolate;
  if (extrapolate && t + 1 == fault_.skip_from && skip_delta_.empty()) {  // learn Δ
    for (size_t i = 0; i < post.tensors.size(); ++i) {
      Tensor d(post.tensors[i].shape());
      const std::span<const float> now = post.tensors[i].values(), before = pre.tensors[i].values();
      for (size_t e = 0; e < now.size(); ++e) d.values()[e] = now[e] - before[e];
      skip_delta_.push_back(std::move(d));
    }
  }
  if (!skipped(t)) return false;
  if (extrapolate && skip_delta_.empty())  // skip_from = 0: no step before, Δ = 0
    for (const Tensor& x : pre.tensors) skip_delta_.emplace_back(x.shape());
  // Claim the pre-state (or its extrapolation) with the step counter advanced.
  const size_t step_index = post.tensors.size() - 2;  // "step", then "loss" (engine/step.h)
  for (size_t i = 0; i < post.tensors.size(); ++i) {
    if (i == step_index) continue;
    post.tensors[i] = pre.tensors[i];
    if (extrapolate) {
      const std::span<float> x = post.tensors[i].values();
      const std::span<const float> d = skip_delta_[i].values();
      for (size_t e = 0; e < x.size(); ++e) x[e] += d[e];
    }
  }
  return true;
}

StepPolicyPtr fault_policy(const Fault& fault) {
  return std::make_shared<FaultPolicy>(fault);
}

}  // namespace tribunal::cheats
