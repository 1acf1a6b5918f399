// Models: their parameters, their initialization and their forward graph.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/job.h"

namespace tribunal {

/// One trainable parameter tensor.
struct ParamSpec {
  std::string name;  ///< e.g. "l0.weight"
  Shape shape;
  int64_t fan_in;    ///< inputs per output unit, sets the init bound
};

/// The parameters of a model, in canonical order. MLP layer l: "l<l>.weight" [in, out] (y = x·w + b,
/// the input-major layout that lets the matmul vectorize over outputs) and "l<l>.bias" [out].
std::vector<ParamSpec> model_params(const ModelSpec& model);

/// Fills `out` (already shaped) with parameter `param_index` of the model, element i being
///   u = uniform_from_bits(philox_random(seed, Init, param_index, i)[0]);  w = (2u − 1)·bound
/// with bound = 1 / sqrt(fan_in) — PyTorch's nn.Linear default (Kaiming-uniform with a = √5) for
/// weights and biases alike. Reproducible element by element on any device.
void init_param(uint64_t seed, uint32_t param_index, const ParamSpec& spec, Tensor& out);

/// Appends the forward pass to the graph: logits [rows, classes] from x [rows, features].
/// `params` are the graph values of model_params(), same order.
ValueId build_forward(GraphBuilder& b, const ModelSpec& model, std::span<const ValueId> params, ValueId x);

}  // namespace tribunal
