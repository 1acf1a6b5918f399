#include "dispute/job_oracle.h"

#include <cstring>
#include <string>

#include <fmt/format.h>

#include "engine/dataset.h"
#include "engine/numerics.h"
#include "engine/state.h"
#include "engine/step.h"
#include "engine/tensor_pool.h"
#include "ops/float64/float64.h"
#include "ops/op_part.h"
#include "ops/registry.h"
#include "ops/rounding_log.h"
#include "ops/thread_pool.h"
#include "protocol/tensor_hash.h"

namespace tribunal {
namespace {

Digest leaf_of(const Tensor& t) {
  return tensor_leaf(DType::F32, t.shape().dims(), t.bytes());
}

InputSpec input_spec_of(const StepGraph& g, ValueId v) {
  const Value& val = g.values[v];
  const auto dims = val.shape.dims();
  const std::vector<int64_t> shape(dims.begin(), dims.end());
  switch (val.source) {
    case ValueSource::State:
      return {InputSpec::Source::State, val.index, 0, {}, shape};
    case ValueSource::Data:
      return {InputSpec::Source::Data, val.index, 0, {}, {}};
    case ValueSource::Constant:
      return {InputSpec::Source::Constant, val.index, 0, leaf_of(g.constants[val.index]), {}};
    case ValueSource::Node:
      return {InputSpec::Source::Node, val.index, val.slot, {}, shape};
  }
  return {};
}

// The tensors a referee thread keeps between its re-executions (kReexecutionPoolBytes at most).
TensorPool& reexecution_pool() {
  static thread_local TensorPool pool(kReexecutionPoolBytes);
  return pool;
}

// The part of node `n` of `g` that computes elements `out` of its output `slot` (ops/op_part.h).
std::optional<OpPart> part_of(const StepGraph& g, const Node& n, uint32_t slot, ElementSpan out) {
  std::vector<Shape> shapes;
  for (ValueId v : n.inputs) shapes.push_back(g.values[v].shape);
  return op_part(n.op, n.attrs, shapes, static_cast<int>(slot),
                 {static_cast<int64_t>(out.first), static_cast<int64_t>(out.end)});
}

}  // namespace

StepSpec step_spec_of(const StepGraph& g, bool rounding_log) {
  StepSpec s;
  s.state_inputs = static_cast<uint32_t>(g.state_inputs.size());
  for (const Node& node : g.nodes) {
    NodeSpec n;
    n.op = static_cast<uint8_t>(node.op);
    const std::vector<std::byte> attrs = encode_attrs(node.attrs);
    n.attrs.resize(attrs.size());
    std::memcpy(n.attrs.data(), attrs.data(), attrs.size());
    for (ValueId v : node.inputs) {
      n.inputs.push_back(input_spec_of(g, v));
      if (g.values[v].source == ValueSource::Data)
        n.data_rows.assign(node.attrs.ints.begin(), node.attrs.ints.end());  // gather's rows
    }
    n.outputs = static_cast<uint32_t>(node.outputs.size());
    for (ValueId v : node.outputs) {
      const auto dims = g.values[v].shape.dims();
      n.output_shapes.emplace_back(dims.begin(), dims.end());
    }
    if (rounding_log) {
      n.rounding_log = true;
      ++n.outputs;  // the log's leaf (docs/protocol.md, "Rounding-log jobs")
      for (ValueId v : node.outputs) n.log_values += static_cast<uint64_t>(g.values[v].shape.numel());
    }
    s.nodes.push_back(std::move(n));
  }
  for (ValueId v : g.state_outputs) s.state_outputs.push_back(input_spec_of(g, v));
  return s;
}

JobOracle::JobOracle(const JobSpec& job, const DataShape& data)
    : job_(job), data_(data), sampler_(job.seed, data.samples, job.batch_size) {
  require_disputable(job.numerics, "dispute oracle");
}

const StepGraph& JobOracle::graph(uint64_t step) const {
  if (!cache_ || cache_->first != step) {
    const std::vector<int64_t> batch = sampler_.indices(static_cast<int64_t>(step));
    cache_.emplace(step, build_step_graph(job_, data_, static_cast<int64_t>(step), batch));
  }
  return cache_->second;
}

StepSpec JobOracle::step_spec(uint64_t step) const {
  return step_spec_of(graph(step), job_.numerics.mode == NumericsMode::RoundingLog);
}

Digest JobOracle::initial_state_hash() const {
  if (!initial_state_hash_) {
    ThreadPool pool(1);
    initial_state_hash_ = state_hash(initial_state(job_), pool);
  }
  return *initial_state_hash_;
}

std::optional<std::vector<ElementSpan>> JobOracle::part_inputs(uint64_t step, uint64_t node, uint32_t slot,
                                                               ElementSpan out) const {
  if (job_.numerics.mode == NumericsMode::RoundingLog) return std::nullopt;  // logs open whole nodes
  const StepGraph& g = graph(step);
  const std::optional<OpPart> part = part_of(g, g.nodes.at(node), slot, out);
  if (!part) return std::nullopt;
  std::vector<ElementSpan> spans;
  for (const ElementRange& r : part->inputs)
    spans.push_back({static_cast<uint64_t>(r.first), static_cast<uint64_t>(r.end)});
  return spans;
}

std::array<PartyReexecution, 2> JobOracle::reexecute_part(const Reexecute& rx) const {
  const StepGraph& g = graph(rx.step);
  const Node& node = g.nodes.at(rx.node);
  const Reexecute::Part& want = *rx.part;
  const std::optional<OpPart> part = part_of(g, node, want.slot, want.out);
  // The game asked for what part_inputs gave: anything else is the referee's own fault, not a party's
  // (std::runtime_error, not OpError).
  if (!part || want.input_first.size() != node.inputs.size())
    throw std::runtime_error(
        fmt::format("re-execution: node {} has no part for chunk {}", rx.node, want.chunk));
  std::vector<std::span<const float>> slices;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& val = g.values[node.inputs[i]];
    const ElementRange r = part->inputs[i];
    std::span<const float> values;
    uint64_t first = 0;
    if (val.source == ValueSource::Constant) {
      values = g.constants[val.index].values();
    } else if (val.source == ValueSource::Data) {
      throw std::runtime_error("re-execution: a part of a node that reads the data set");
    } else {
      if (rx.shapes.at(i) != std::vector<int64_t>(val.shape.dims().begin(), val.shape.dims().end()))
        throw OpError("re-execution: input " + std::to_string(i) + " has the wrong shape");
      values = rx.inputs.at(i);
      first = want.input_first[i];
    }
    if (static_cast<uint64_t>(r.first) < first || static_cast<uint64_t>(r.end) - first > values.size())
      throw std::runtime_error(fmt::format("re-execution: input {} of node {} was not opened for chunk {}", i,
                                           rx.node, want.chunk));
    slices.push_back(values.subspan(static_cast<size_t>(r.first) - first, static_cast<size_t>(r.size())));
  }
  static thread_local ThreadPool pool(1);  // one thread, as for a whole node
  TensorPool& kept = reexecution_pool();
  const PartBuffers buffers{[&](const Shape& s) { return kept.take(s); },
                            [&](Tensor&& t) { kept.give(std::move(t)); }};
  const std::vector<float> out = run_part(node.op, *part, slices, static_cast<int>(want.slot),
                                          want.out.end - want.out.first, pool, buffers);
  const Digest hash = tensor_chunk_hash(DType::F32, std::as_bytes(std::span<const float>(out)));
  return {PartyReexecution{{hash}, {}}, PartyReexecution{{hash}, {}}};
}

std::array<PartyReexecution, 2> JobOracle::reexecute(const Reexecute& rx) const {
  if (rx.part) {
    if (job_.numerics.mode == NumericsMode::RoundingLog)
      throw std::runtime_error("re-execution: a part of a rounding-log node");
    return reexecute_part(rx);
  }
  const StepGraph& g = graph(rx.step);
  const Node& node = g.nodes.at(rx.node);
  // The inputs' copies and the outputs come from this thread's pool and go back to it whatever happens
  // (engine/tensor_pool.h): a referee's next re-execution of a like size touches no fresh page. An op
  // writes every element of its outputs (the executor's buffer reuse relies on it too), so a kept
  // tensor's old contents never reach a hash.
  TensorPool& pool = reexecution_pool();
  std::vector<Tensor> owned, outputs;
  owned.reserve(node.inputs.size());
  struct GiveBack {
    std::vector<Tensor>& owned;
    std::vector<Tensor>& outputs;
    ~GiveBack() {
      for (Tensor& t : owned) reexecution_pool().give(std::move(t));
      for (Tensor& t : outputs) reexecution_pool().give(std::move(t));
    }
  } give_back{owned, outputs};
  std::vector<const Tensor*> in;
  Attrs attrs = node.attrs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Value& val = g.values[node.inputs[i]];
    if (val.source == ValueSource::Constant) {
      in.push_back(&g.constants[val.index]);
      continue;
    }
    if (val.source == ValueSource::Data) {
      // Gather from a table of just the proven rows, in data_rows order: row b of the table is the
      // sample the original index b named, so the indices become 0..B−1.
      const int64_t rows = static_cast<int64_t>(rx.sample_labels.size());
      if (val.index == 0) {
        Tensor table = pool.take(Shape{rows, data_.features});
        for (int64_t r = 0; r < rows; ++r) {
          const auto& x = rx.sample_inputs.at(static_cast<size_t>(r));
          if (static_cast<int64_t>(x.size()) != data_.features)
            throw OpError("re-execution: a sample has the wrong size");
          std::memcpy(table.data() + r * data_.features, x.data(), x.size() * sizeof(float));
        }
        owned.push_back(std::move(table));
      } else {
        // Class ids ([rows]) or label sequences ([rows, label_width]); the game checked each row's size.
        const int64_t width = data_.label_width;
        std::vector<float> labels;
        for (const auto& y : rx.sample_labels) {
          if (static_cast<int64_t>(y.size()) != std::max<int64_t>(width, 1))
            throw OpError("re-execution: a sample has the wrong label size");
          labels.insert(labels.end(), y.begin(), y.end());
        }
        owned.emplace_back(width == 0 ? Shape{rows} : Shape{rows, width}, std::span<const float>(labels));
      }
      for (int64_t b = 0; b < rows; ++b) attrs.ints.at(static_cast<size_t>(b)) = b;
      in.push_back(&owned.back());
      continue;
    }
    const Shape shape(std::span<const int64_t>(rx.shapes.at(i)));
    const std::vector<float>& values = rx.inputs.at(i);
    if (shape != val.shape)
      throw OpError("re-execution: input " + std::to_string(i) + " has the wrong shape");
    if (static_cast<int64_t>(values.size()) != shape.numel())
      throw OpError("tensor of shape " + shape.str() + " needs " + std::to_string(shape.numel()) +
                    " values, got " + std::to_string(values.size()));
    owned.push_back(pool.take(shape));
    std::memcpy(owned.back().data(), values.data(), values.size() * sizeof(float));
    in.push_back(&owned.back());
  }
  std::vector<Shape> in_shapes;
  for (const Tensor* t : in) in_shapes.push_back(t->shape());
  for (const Shape& s : infer_shapes(node.op, attrs, in_shapes)) outputs.push_back(pool.take(s));
  std::vector<Tensor*> out;
  for (Tensor& t : outputs) out.push_back(&t);
  const auto leaves = [&] {
    std::vector<Digest> hashes;
    for (const Tensor& t : outputs) hashes.push_back(leaf_of(t));
    return hashes;
  };
  if (job_.numerics.mode != NumericsMode::RoundingLog) {
    // The fast kernels are bitwise identical to the reference (tests/ops) and 100× faster for a
    // matmul; one thread, since a referee serves many disputes at once.
    static thread_local ThreadPool pool(1);
    run_fast(node.op, attrs, in, out, pool);
    const std::vector<Digest> hashes = leaves();
    return {PartyReexecution{hashes, {}}, PartyReexecution{hashes, {}}};
  }
  // Rounding-log mode: the referee's own float64 values, rounded by each party's log. A decision the
  // referee's value does not allow convicts the party that logged it (docs/protocol.md, "Rounding-log
  // jobs"); the referee's kernel may differ from the parties' by up to τ/2 (the scheme's contract).
  std::vector<std::vector<double>> wide(outputs.size());
  run_float64(node.op, attrs, in, wide, default_float64_gemm());
  const double tau = job_.numerics.tau_of(node.op);
  std::vector<std::vector<double>> quanta(outputs.size());
  rounding_quanta(node.op, attrs, in, quanta, job_.numerics.quantum_bits);
  uint64_t count = 0;
  for (const std::vector<double>& w : wide) count += w.size();
  std::array<PartyReexecution, 2> result;
  for (size_t p = 0; p < 2; ++p) {
    // A job with roles opens the trainer's log only; it decides for both (Game::on_reexecuted).
    if (rx.logs[p].empty() && count > 0) continue;
    const RoundingLog log{count, rx.logs[p]};
    std::optional<uint64_t> bad;
    try {
      bad = round_outputs_replayed(wide, log, out, tau, quanta);
    } catch (const OpError& e) {
      result[p].bad_log = e.what();  // the log's digits do not unpack (count and size were proven)
      continue;
    }
    if (!bad) {
      result[p].outputs = leaves();
      continue;
    }
    uint64_t k = *bad;
    size_t i = 0;
    while (k >= wide[i].size()) k -= wide[i++].size();
    const Rounding d = unpack_trits(log.packed, count)[*bad];
    const double x = wide[i][k];
    result[p].bad_log = fmt::format(
        "decision {} (output {} element {}) is {}, not allowed for the referee's float64 value {:.17g} "
        "({:.4g} "
        "spacings from a rounding boundary, tau {:.4g})",
        *bad, i, k,
        d == Rounding::Nearest ? "nearest"
        : d == Rounding::Down  ? "down"
                               : "up",
        x, boundary_distance(x, quantum_at(quanta, i, k)), tau);
  }
  return result;
}

}  // namespace tribunal
