#include "engine/model.h"

#include <cmath>

#include "ops/philox.h"

namespace tribunal {

std::vector<ParamSpec> model_params(const ModelSpec& model) {
  std::vector<ParamSpec> params;
  const auto& w = model.widths;
  for (size_t l = 0; l + 1 < w.size(); ++l) {
    const std::string prefix = "l" + std::to_string(l);
    params.push_back({prefix + ".weight", Shape{w[l], w[l + 1]}, w[l]});
    params.push_back({prefix + ".bias", Shape{w[l + 1]}, w[l]});
  }
  return params;
}

void init_param(uint64_t seed, uint32_t param_index, const ParamSpec& spec, Tensor& out) {
  const float bound = 1.0f / std::sqrt(static_cast<float>(spec.fan_in));
  for (int64_t i = 0; i < out.numel(); ++i) {
    const float u = uniform_from_bits(philox_random(seed, RandomPurpose::Init, param_index, static_cast<uint64_t>(i))[0]);
    out[i] = (u * 2.0f - 1.0f) * bound;  // 2u − 1 is exact for u = k·2⁻²⁴
  }
}

ValueId build_forward(GraphBuilder& b, const ModelSpec& model, std::span<const ValueId> params, ValueId x) {
  ValueId h = x;
  const size_t layers = model.widths.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const std::string prefix = "l" + std::to_string(l);
    h = b.add_node(OpKind::Linear, {}, {h, params[2 * l], params[2 * l + 1]}, prefix + ".out").front();
    if (l + 1 < layers) h = b.add_node(OpKind::Relu, {}, {h}, prefix + ".relu").front();
  }
  return h;
}

}  // namespace tribunal
