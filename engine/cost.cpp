#include "engine/cost.h"

#include <limits>

#include <fmt/format.h>

#include "engine/state.h"

namespace tribunal {
namespace {

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::numeric_limits<uint64_t>::max();
  return a * b;
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return b > std::numeric_limits<uint64_t>::max() - a ? std::numeric_limits<uint64_t>::max() : a + b;
}

uint64_t elements(const StepGraph& g, ValueId v) { return static_cast<uint64_t>(g.values.at(v).shape.numel()); }

// What a node reads of an input: a data-set table is read only at the gathered rows (the referee
// rebuilds it from the proven samples, as many elements as the gather's output), anything else whole.
uint64_t read_elements(const StepGraph& g, const Node& n, ValueId v) {
  if (g.values.at(v).source != ValueSource::Data) return elements(g, v);
  uint64_t out = 0;
  for (ValueId o : n.outputs) out = saturating_add(out, elements(g, o));
  return out;
}

const Shape& shape_of(const StepGraph& g, const Node& n, size_t input) { return g.values.at(n.inputs.at(input)).shape; }

// The length of each output element's fma chain of a contraction; 0 for every other op.
uint64_t chain_length(const StepGraph& g, const Node& n) {
  switch (n.op) {
    case OpKind::Linear: return static_cast<uint64_t>(shape_of(g, n, 1).dims().front());  // w[K,N]
    case OpKind::Matmul: {
      const auto& a = shape_of(g, n, 0).dims();
      const bool trans_a = !n.attrs.ints.empty() && n.attrs.ints[0] != 0;
      return static_cast<uint64_t>(trans_a ? a[a.size() - 2] : a.back());
    }
    case OpKind::Conv2d: {  // w[O,C,KH,KW]
      const auto& w = shape_of(g, n, 1).dims();
      return static_cast<uint64_t>(w[1] * w[2] * w[3]);
    }
    case OpKind::Conv2dBackwardInput: {  // w[O,C,KH,KW]: each dx element gathers ≤ O·KH·KW taps
      const auto& w = shape_of(g, n, 0).dims();
      return static_cast<uint64_t>(w[0] * w[2] * w[3]);
    }
    case OpKind::Conv2dBackwardWeight: {  // dy[N,O,OH,OW]: each dw element sums over N·OH·OW
      const auto& dy = shape_of(g, n, 1).dims();
      return static_cast<uint64_t>(dy[0] * dy[2] * dy[3]);
    }
    default: return 0;
  }
}

}  // namespace

uint64_t node_work(const StepGraph& g, const Node& n) {
  uint64_t out = 0;
  for (ValueId v : n.outputs) out = saturating_add(out, elements(g, v));
  if (const uint64_t k = chain_length(g, n); k != 0) return saturating_mul(out, k);
  uint64_t work = out;
  for (ValueId v : n.inputs) work = saturating_add(work, read_elements(g, n, v));
  return work;
}

uint64_t node_input_bytes(const StepGraph& g, const Node& n) {
  uint64_t bytes = 0;
  for (ValueId v : n.inputs) bytes = saturating_add(bytes, saturating_mul(read_elements(g, n, v), 4));
  return bytes;
}

DisputeCost dispute_cost(const JobSpec& job, const StepGraph& g) {
  DisputeCost c;
  c.parameters = job_footprint(job).parameters;
  c.nodes = g.nodes.size();
  for (const Node& n : g.nodes) {
    if (const uint64_t w = node_work(g, n); w > c.max_node_work) {
      c.max_node_work = w;
      c.heaviest_node = fmt::format("{} '{}'", op_name(n.op), g.values.at(n.outputs.at(0)).name);
    }
    c.max_opened_bytes = std::max(c.max_opened_bytes, node_input_bytes(g, n));
  }
  return c;
}

}  // namespace tribunal
