#include "engine/executor.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "engine/liveness.h"
#include "ops/registry.h"

namespace tribunal {

void Executor::run(const StepGraph& g, std::span<const Tensor* const> state,
                   std::span<const Tensor* const> data, const NodeHook& after_node, const ShardRun& shards) {
  assert(state.size() == g.state_inputs.size() && data.size() == g.data_inputs.size());
  ++runs_;
  // The last run's values are dead now: their buffers (and the state tensors take_next_state swapped
  // in) go back to the pool, and a free buffer idle since before the last run is freed.
  for (size_t v = 0; v < slots_.size(); ++v)
    if (capacity_[v] > 0) release(static_cast<ValueId>(v));
  free_.drop_given_before(runs_ - 1);  // runs_ ≥ 1 here
  peak_live_bytes_ = live_bytes_;
  slots_.resize(g.values.size());
  capacity_.assign(g.values.size(), 0);
  bound_.assign(g.values.size(), nullptr);
  // Released after its last reader: a node output other than the loss and the next state, in an
  // unsharded graph (a sharded one runs its shards side by side and exchanges partials).
  const bool keep = keep_values_ || !g.partials.empty();
  std::vector<size_t> last;
  std::vector<char> kept;
  if (!keep) {
    last = last_uses(g);
    kept.assign(g.values.size(), 0);
    kept.at(g.loss) = 1;
    for (ValueId v : g.state_outputs) kept.at(v) = 1;
  }
  plan_in_place(g, last);
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    switch (val.source) {
      case ValueSource::State:
        bound_[v] = state[val.index];
        break;
      case ValueSource::Data:
        bound_[v] = data[val.index];
        break;
      case ValueSource::Constant:
        bound_[v] = &g.constants[val.index];
        break;
      case ValueSource::Node:
        if (keep) acquire(static_cast<ValueId>(v), val.shape, pool_);  // else just before its node runs
        break;
    }
  }
  const auto run_node = [&](size_t n, ThreadPool& pool, std::vector<const Tensor*>& in,
                            std::vector<Tensor*>& out) {
    const Node& node = g.nodes[n];
    in.clear();
    out.clear();
    // Outputs first: one that updates a state tensor in place rebinds that input to its own storage.
    for (ValueId v : node.outputs) {
      if (!in_place_.empty() && in_place_[v] >= 0) {
        if (!dry_)  // a dry run leaves the state where it is
          take_state(v, g.state_inputs[static_cast<size_t>(in_place_[v])],
                     *updating_[static_cast<size_t>(in_place_[v])]);
      } else if (!keep) {
        acquire(v, g.values[v].shape, pool);
      }
      out.push_back(&slots_[v]);
    }
    for (ValueId v : node.inputs) in.push_back(bound_[v]);
    if (dry_) {
      // reserve(): no kernel runs
    } else if (fast_ && run_float32_gemm_op(node.op, node.attrs, in, out, *fast_)) {
      // fast mode's float32 GEMM ran it
    } else if (rounding_)
      run_rounded(n, node, in, out, pool);
    else if (reference_)
      run_reference(node.op, node.attrs, in, out);
    else
      run_on_device(device_, node.op, node.attrs, in, out, pool);
    if (after_node && !dry_) after_node(n, out);
    if (keep) return;
    for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs})
      for (ValueId v : *values)
        if (last[v] == n && !kept[v] && capacity_[v] > 0) release(v);
  };
  if (rounding_ && rounding_->record) rounding_->record->nodes.assign(g.nodes.size(), RoundingLog{});
  if (rounding_ && rounding_->replay && rounding_->replay->nodes.size() != g.nodes.size())
    throw EngineError(fmt::format("rounding log of step {} has {} nodes, the step graph {}",
                                  rounding_->replay->step, rounding_->replay->nodes.size(), g.nodes.size()));
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  if (g.partials.empty()) {  // not a sharded step graph (a lone tree sum's spans name no shards)
    for (size_t n = 0; n < g.nodes.size(); ++n) run_node(n, pool_, in, out);
    return;
  }
  // A sharded graph: the nodes within this process's block of shards (all of them on one rank), the
  // exchange, then the nodes across blocks (docs/architecture.md).
  ShardRun block = shards;
  if (block.count < 0) block = ShardRun{0, static_cast<int64_t>(g.partials.size()), {}};
  std::vector<std::vector<size_t>> by_shard(static_cast<size_t>(block.count));
  std::vector<size_t> combines;  // the tree's nodes within the block
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ShardSpan& span = g.node_shards[n];
    if (!block.within_a_block(span) || !block.within_mine(span)) continue;
    if (span.count == 1)
      by_shard[static_cast<size_t>(span.first - block.first)].push_back(n);
    else
      combines.push_back(n);
  }
  if (pool_.size() > 1 && block.count >= pool_.size()) {
    // The shards are independent: one thread per shard (each kernel on one thread) instead of every
    // small kernel split over the threads, whose per-call synchronization would dominate.
    while (shard_pools_.size() < by_shard.size()) shard_pools_.push_back(std::make_unique<ThreadPool>(1));
    pool_.parallel_for(block.count, [&](int64_t s0, int64_t s1) {
      std::vector<const Tensor*> shard_in;
      std::vector<Tensor*> shard_out;
      for (auto s = static_cast<size_t>(s0); s < static_cast<size_t>(s1); ++s)
        for (size_t n : by_shard[s]) run_node(n, *shard_pools_[s], shard_in, shard_out);
    });
  } else {
    for (const std::vector<size_t>& nodes : by_shard)
      for (size_t n : nodes) run_node(n, pool_, in, out);
  }
  for (size_t n : combines) run_node(n, pool_, in, out);
  if (shards.exchange) shards.exchange(*this);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!block.within_a_block(g.node_shards[n])) run_node(n, pool_, in, out);
}

// An auditor's rounding of one node by the trainer's log (RoundingRun::audit): Nearest is this
// trainer's nearest; a direction is followed where this value is within 2τ of a boundary
// (boundary_distance), else the value rounds to nearest. Throws OpError when the log's digits do not unpack
// or it has another count than the outputs.
void Executor::round_audited(std::span<const std::vector<double>> wide, const RoundingLog& log,
                             std::span<Tensor* const> out, double tau,
                             std::span<const std::vector<double>> quanta) {
  uint64_t count = 0;
  for (const std::vector<double>& w : wide) count += w.size();
  if (log.count != count) throw OpError("rounding log: its count is not the node's output elements");
  const std::vector<Rounding> decisions = unpack_trits(log.packed, count);
  uint64_t j = 0;
  for (size_t i = 0; i < wide.size(); ++i) {
    float* y = out[i]->data();
    for (size_t k = 0; k < wide[i].size(); ++k, ++j) {
      const double q = quantum_at(quanta, i, k);
      Rounding d = decisions[j];
      if (d != Rounding::Nearest && !(boundary_distance(wide[i][k], q) <= 2 * tau)) d = Rounding::Nearest;
      y[k] = round_replayed(wide[i][k], d, q);
    }
  }
}

void Executor::run_rounded(size_t n, const Node& node, std::span<const Tensor* const> in,
                           std::span<Tensor* const> out, ThreadPool& pool) {
  // Per thread (shards may run side by side) and kept: a GPT step rounds ~80 M values, so fresh
  // buffers per node would fault in their pages every step.
  thread_local std::vector<std::vector<double>> wide, quanta;
  thread_local QuantaFactors factors;
  wide.resize(out.size());
  // Output i's float64 values go in a kept vector of exactly its size, one per size: run_float64 sizes
  // its outputs, and a vector sized down and up again from node to node would be zeroed as it grows.
  // Only sizes up to kKeptBySize values (128 MB), so what is kept is one vector per such size; a larger
  // output (GPT-2's logits) reuses wide[i] as before.
  constexpr size_t kKeptBySize = size_t{1} << 24;
  thread_local std::map<size_t, std::vector<double>> by_size;
  const auto trade = [](std::vector<double>& w, size_t n) {
    if (n <= kKeptBySize) w.swap(by_size[n]);
  };
  for (size_t i = 0; i < out.size(); ++i) trade(wide[i], out[i]->values().size());
  struct Return {  // puts them back however this returns
    std::span<std::vector<double>> wide;
    decltype(trade)& give;
    ~Return() {
      for (std::vector<double>& w : wide) give(w, w.size());
    }
  } give_back{std::span(wide).first(out.size()), trade};
  RoundingProfile* const profile = rounding_->profile;
  auto t0 = std::chrono::steady_clock::now();
  const auto lap = [&](RoundingProfile::Part part) {
    const auto t1 = std::chrono::steady_clock::now();
    profile->add(node.op, part, std::chrono::duration<double>(t1 - t0).count());
    t0 = t1;
  };
  run_float64(node.op, node.attrs, in, wide, rounding_->gemm, &pool);
  if (profile) lap(RoundingProfile::Float64);
  rounding_quanta_factors(node.op, node.attrs, in, factors, rounding_->numerics->quantum_bits);
  if (profile) lap(RoundingProfile::Quanta);
  // One quantum per value (rounding_quanta's vectors), for the paths that take them: a tamper hook, a
  // replay, an audit. The trainer's rounding makes them from the factors as it goes.
  const auto per_value = [&] {
    quanta.resize(out.size());
    for (std::vector<double>& q : quanta) q.clear();
    if (quanta.empty() || factors.empty()) return;
    quanta[0].resize(factors.size());
    factors.fill(0, factors.size(), quanta[0].data());
  };
  const double tau = rounding_->numerics->tau_of(node.op);
  if (!rounding_->replay) {
    RoundingLog log = round_outputs_logged(wide, out, tau, factors, &pool);
    if (profile) lap(RoundingProfile::Round);
    if (rounding_->tamper) {
      per_value();
      rounding_->tamper(n, wide, log, out, tau, quanta);
    }
    if (rounding_->record) rounding_->record->nodes[n] = std::move(log);
    return;
  }
  const RoundingLog& log = rounding_->replay->nodes[n];
  per_value();
  if (rounding_->audit) {
    round_audited(wide, log, out, tau, quanta);
    if (profile) lap(RoundingProfile::Round);
    if (rounding_->record) rounding_->record->nodes[n] = log;
    return;
  }
  const std::optional<uint64_t> bad = round_outputs_replayed(wide, log, out, tau, quanta);
  if (profile) lap(RoundingProfile::Round);
  if (bad) {
    uint64_t k = *bad;
    size_t i = 0;
    while (k >= wide[i].size()) k -= wide[i++].size();
    const double x = wide[i][k];
    throw RoundingLogRefused(
        n, *bad,
        fmt::format(
            "step {} node {} ({}): the rounding log's decision for output {} element {} is not allowed for "
            "this "
            "trainer's float64 value {:.17g} ({:.4g} spacings from a rounding boundary, tau {:.4g}): the log "
            "was not made from these inputs, or the two trainers' kernels differ by more than tau/2",
            rounding_->replay->step, n, op_info(node.op).name, i, k, x,
            boundary_distance(x, quantum_at(quanta, i, k)), tau));
  }
  if (rounding_->record) rounding_->record->nodes[n] = log;
}

void Executor::throw_released(ValueId v) {
  throw std::logic_error(fmt::format(
      "Executor::value: value {} was released after its last reader (set_keep_values(false)) or taken", v));
}

void Executor::run_updating(const StepGraph& g, std::span<Tensor* const> state,
                            std::span<const Tensor* const> data, const NodeHook& after_node,
                            const ShardRun& shards) {
  struct Reset {  // however run() returns
    Executor& ex;
    ~Reset() {
      ex.updating_ = {};
      ex.in_place_.clear();
    }
  } reset{*this};
  updating_ = state;
  const std::vector<const Tensor*> view(state.begin(), state.end());
  run(g, view, data, after_node, shards);
}

void Executor::reserve(const StepGraph& g, std::span<Tensor* const> state,
                       std::span<const Tensor* const> data) {
  if (keep_values_ || !g.partials.empty() || rounding_) return;
  struct Reset {  // however run_updating returns
    bool& dry;
    ~Reset() { dry = false; }
  } reset{dry_};
  dry_ = true;
  run_updating(g, state, data);
}

void Executor::plan_in_place(const StepGraph& g, const std::vector<size_t>& last) {
  in_place_.clear();
  // Where no other reader can see it: values released after their last reader (`last`), one
  // process's whole graph, the CPU kernels (whose optimizer paths are alias-safe: OpInfo::in_place).
  if (updating_.empty() || last.empty() || !g.partials.empty() || rounding_ || device_ != Device::Cpu) return;
  std::vector<char> passed_on(g.values.size(), 0);  // a state output: read after the run
  for (ValueId v : g.state_outputs) passed_on.at(v) = 1;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    const OpInfo& info = op_info(node.op);
    for (size_t k = 0; k < node.outputs.size() && k < info.in_place.size(); ++k) {
      if (info.in_place[k] < 0) continue;
      const ValueId in = node.inputs.at(static_cast<size_t>(info.in_place[k]));
      const Value& val = g.values[in];
      if (val.source != ValueSource::State || last[in] != n || passed_on[in]) continue;
      const auto i = static_cast<size_t>(val.index);
      if (g.state_outputs.at(i) != node.outputs[k] ||
          updating_[i]->shape() != g.values[node.outputs[k]].shape)
        continue;
      if (std::count(node.inputs.begin(), node.inputs.end(), in) != 1) continue;  // read twice by the node
      if (in_place_.empty()) in_place_.assign(g.values.size(), -1);
      in_place_[node.outputs[k]] = val.index;
    }
  }
}

void Executor::take_state(ValueId v, ValueId input, Tensor& state) {
  slots_[v] = std::move(state);
  capacity_[v] = std::max<size_t>(slots_[v].capacity(), 1);
  live_bytes_ += capacity_[v] * sizeof(float);
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  bound_[v] = &slots_[v];
  bound_[input] = &slots_[v];  // the node reads the state where it writes the next one
}

void Executor::acquire(ValueId v, const Shape& shape, ThreadPool& threads) {
  slots_[v] = free_.take(shape, &threads);
  capacity_[v] = std::max<size_t>(slots_[v].capacity(), 1);  // a scalar's or an empty value's: 1
  live_bytes_ += capacity_[v] * sizeof(float);
  peak_live_bytes_ = std::max(peak_live_bytes_, live_bytes_);
  bound_[v] = &slots_[v];
}

void Executor::release(ValueId v) {
  live_bytes_ -= capacity_[v] * sizeof(float);
  free_.give(std::move(slots_[v]), runs_);
  capacity_[v] = 0;
  if (v < bound_.size()) bound_[v] = nullptr;
}

void Executor::take_next_state(const StepGraph& g, std::span<Tensor* const> state) {
  assert(state.size() == g.state_outputs.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const ValueId v = g.state_outputs[i];
    if (g.values[v].source == ValueSource::Node) {
      // The slot gets the state tensor it replaced, a buffer of its size, for the pool's next run.
      live_bytes_ -= capacity_[v] * sizeof(float);
      std::swap(*state[i], slots_[v]);
      capacity_[v] = std::max<size_t>(slots_[v].capacity(), 1);
      live_bytes_ += capacity_[v] * sizeof(float);
    } else
      *state[i] = *bound_[v];
  }
}

Tensor Executor::take_value(ValueId v) {
  if (v >= bound_.size() || bound_[v] != &slots_.at(v) || capacity_[v] == 0)
    throw std::out_of_range(fmt::format("Executor::take_value: value {} is not a node output", v));
  Tensor out = std::move(slots_[v]);
  live_bytes_ -= capacity_[v] * sizeof(float);
  capacity_[v] = 0;  // the next run takes another buffer for it
  bound_[v] = nullptr;
  return out;
}

}  // namespace tribunal
