// The floating-point operations of a step graph's products — the matmuls, linear layers and
// convolutions (forward and backward), 2 per multiply-add — from the shapes and attributes of its
// nodes (ops/registry.h). Elementwise ops, reductions and the optimizer are not counted: they are
// bound by memory, and counting them would flatter a GFLOP/s figure set against the FMA peak; the
// bytes every node moves (node_bytes) set them against the memory bandwidth instead.
#pragma once

#include <cstdint>

#include "engine/graph.h"
#include "ops/registry.h"

namespace tribunal::bench {

/// 2·M·N·K of node `n` of `g` if it is a product (batched matmuls: per batch), else 0; FLOPs.
inline double node_product_flops(const StepGraph& g, const Node& n) {
  if (n.outputs.empty() || n.inputs.empty()) return 0;
  const Shape& out = g.values[n.outputs[0]].shape;
  const Shape& a = g.values[n.inputs[0]].shape;
  const double outputs = static_cast<double>(out.numel());
  switch (n.op) {
    case OpKind::Linear:  // x[M,K] → y[M,N]
      return 2 * outputs * static_cast<double>(a[a.rank() - 1]);
    case OpKind::Matmul: {  // op(a)[…,M,K] · op(b)[…,K,N]
      const bool trans_a = !n.attrs.ints.empty() && n.attrs.ints[0] != 0;
      return 2 * outputs * static_cast<double>(a[a.rank() - (trans_a ? 2 : 1)]);
    }
    case OpKind::Conv2d: {  // each output sums C/G·KH·KW products: w[O,C/G,KH,KW]
      const Shape& w = g.values[n.inputs[1]].shape;
      return 2 * outputs * static_cast<double>(w[1] * w[2] * w[3]);
    }
    case OpKind::Conv2dBackwardInput:  // w[O,C/G,KH,KW], dy[N,O,OH,OW]: the forward's products
    case OpKind::Conv2dBackwardWeight: {
      const Shape& dy = g.values[n.inputs[1]].shape;
      const Shape& w = n.op == OpKind::Conv2dBackwardInput ? a : out;
      return 2 * static_cast<double>(dy.numel()) * static_cast<double>(w[1] * w[2] * w[3]);
    }
    default:
      return 0;
  }
}

/// The bytes node `n` of `g` moves if each of its float32 inputs is read once and each output written
/// once (an in-place update, AdamW's, counts both): what a memory-bound op costs at the machine's
/// memory bandwidth when its operands are not in cache (bench/memory_bandwidth.h).
inline double node_bytes(const StepGraph& g, const Node& n) {
  double bytes = 0;
  for (ValueId v : n.inputs) bytes += 4.0 * static_cast<double>(g.values[v].shape.numel());
  for (ValueId v : n.outputs) bytes += 4.0 * static_cast<double>(g.values[v].shape.numel());
  return bytes;
}

/// node_product_flops summed over the nodes of `g`; FLOPs per step.
inline double step_product_flops(const StepGraph& g) {
  double flops = 0;
  for (const Node& n : g.nodes) flops += node_product_flops(g, n);
  return flops;
}

}  // namespace tribunal::bench
