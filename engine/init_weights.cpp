// Loading and checking a job's initial weights. See init_weights.h.
#include "engine/init_weights.h"

#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/pytorch_export.h"
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
  // The file's form: the model's own names and layouts (engine/model.h), or those of the reference
  // PyTorch modules (engine/pytorch_export.h) — what `tribunal export` and a delegate's
  // model.safetensors hold, and what a torch module's state_dict saves. Decided by the first parameter.
  const bool torch_form = !params.empty() && !by_name.contains(params[0].name);
  std::vector<TorchParam> torch;
  if (torch_form) torch = torch_params(job.model);
  if (torch.size() != (torch_form ? params.size() : 0))
    fail("the model's PyTorch names do not match its parameters");
  const char* form =
      torch_form ? "PyTorch layout, docs/parity.md \"Exported weights\"" : "engine/model.h layout";
  std::vector<Tensor> out;
  out.reserve(params.size());
  for (size_t k = 0; k < params.size(); ++k) {
    const ParamSpec& p = params[k];
    const std::string& name = torch_form ? torch[k].name : p.name;
    const Shape want = torch_form && torch[k].transposed ? Shape{p.shape[1], p.shape[0]} : p.shape;
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      if (torch_form && k == 0)
        fail(
            fmt::format("neither \"{}\" (the model's parameter, shape {}) nor \"{}\" (its PyTorch name, "
                        "shape {})",
                        p.name, p.shape.str(), name, want.str()));
      if (!torch_form)
        fail(fmt::format("no tensor \"{}\" (the model's parameter, shape {})", name, want.str()));
      fail(fmt::format("no tensor \"{}\" (the model's parameter {}, shape {}; {})", name, p.name, want.str(),
                       form));
    }
    Tensor& t = *it->second;
    if (t.shape() != want)
      fail(fmt::format("tensor \"{}\" has shape {}, the model's parameter has {} ({})", name, t.shape().str(),
                       want.str(), form));
    const float* x = t.data();
    for (int64_t i = 0; i < t.numel(); ++i)
      if (!std::isfinite(x[i])) fail(fmt::format("tensor \"{}\" element {} is {}", name, i, x[i]));
    out.push_back(torch_form ? from_torch(torch[k], std::move(t)) : std::move(t));
    by_name.erase(it);
  }
  if (!by_name.empty())
    fail(fmt::format("tensor \"{}\" is not a parameter of the model ({} tensors too many)",
                     by_name.begin()->first, by_name.size()));
  return out;
}

}  // namespace tribunal
