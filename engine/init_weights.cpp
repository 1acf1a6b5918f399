// Loading and checking a job's initial weights. See init_weights.h.
#include "engine/init_weights.h"

#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/safetensors.h"

namespace tribunal {

std::vector<Tensor> load_init_weights(const JobSpec& job, std::span<const ParamSpec> params) {
  if (job.model.init.empty()) throw EngineError(fmt::format("{}: the job has no model.init", job.source));
  if (!job.init_hash || job.init_path.empty())
    throw EngineError(
        fmt::format("{}: the weights '{}' (model.init) have not been located in this node's "
                    "registry",
                    job.source, job.model.init));
  const std::filesystem::path& path = job.init_path;
  const auto fail = [&](const std::string& what) {
    throw EngineError(fmt::format("{}: weights '{}' (model.init): {}", path.string(), job.model.init, what));
  };
  // The bytes read below must be the bytes whose hash the job id holds.
  if (init_weights_hash(path) != *job.init_hash)
    fail("the file changed since the job was located (its hash is not the one in the job id)");
  SafetensorsFile file = read_safetensors(path);
  std::map<std::string, Tensor*> by_name;
  for (auto& [name, tensor] : file.tensors) by_name[name] = &tensor;
  std::vector<Tensor> out;
  out.reserve(params.size());
  for (const ParamSpec& p : params) {
    const auto it = by_name.find(p.name);
    if (it == by_name.end())
      fail(fmt::format("no tensor \"{}\" (the model's parameter, shape {})", p.name, p.shape.str()));
    Tensor& t = *it->second;
    if (t.shape() != p.shape)
      fail(fmt::format("tensor \"{}\" has shape {}, the model's parameter has {} (engine/model.h layout)",
                       p.name, t.shape().str(), p.shape.str()));
    const float* x = t.data();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(x[i])) fail(fmt::format("tensor \"{}\" element {} is {}", p.name, i, x[i]));
    out.push_back(std::move(t));
    by_name.erase(it);
  }
  if (!by_name.empty())
    fail(fmt::format("tensor \"{}\" is not a parameter of the model ({} tensors too many)",
                     by_name.begin()->first, by_name.size()));
  return out;
}

}  // namespace tribunal
