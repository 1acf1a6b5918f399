#include "engine/state.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/init_weights.h"
#include "engine/model.h"
#include "engine/safetensors.h"
#include "onnx/lower.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"

namespace tribunal {

std::vector<Tensor*> State::pointers() {
  std::vector<Tensor*> p;
  for (Tensor& t : tensors) p.push_back(&t);
  return p;
}

int64_t State::step() const {
  return static_cast<int64_t>(tensors.at(tensors.size() - 2)[0]);
}

std::vector<const Tensor*> eval_state_inputs(const JobSpec& job, const State& state) {
  const StateLayout layout = state_layout(job);
  std::vector<const Tensor*> out;
  for (size_t p = 0; p < layout.num_params; ++p) out.push_back(&state.tensors[p]);
  for (size_t k = 0; k < layout.num_buffers; ++k) out.push_back(&state.tensors[layout.first_buffer + k]);
  return out;
}

State initial_state(const JobSpec& job) {
  const StateLayout layout = state_layout(job);
  const std::vector<ParamSpec> params = model_params(job.model);
  State s;
  for (const Shape& shape : layout.shapes) s.tensors.emplace_back(shape);
  if (job.model.kind == ModelKind::Onnx) {  // an imported model: its initializers (onnx/lower.h)
    if (!job.model.onnx)
      throw EngineError(fmt::format("{}: the onnx model has not been imported", job.source));
    std::vector<Tensor> weights = onnx_param_tensors(*job.model.onnx);
    for (size_t p = 0; p < params.size(); ++p) s.tensors[p] = std::move(weights[p]);
    std::vector<Tensor> buffers = onnx_buffer_tensors(*job.model.onnx);
    for (size_t k = 0; k < layout.num_buffers; ++k)
      s.tensors[layout.first_buffer + k] = std::move(buffers[k]);
    return s;
  }
  if (!job.model.init.empty()) {  // pretrained weights (engine/init_weights.h)
    std::vector<Tensor> weights = load_init_weights(job, params);
    for (size_t p = 0; p < params.size(); ++p) s.tensors[p] = std::move(weights[p]);
    return s;
  }
  for (size_t p = 0; p < params.size(); ++p)
    init_param(job.seed, static_cast<uint32_t>(p), params[p], s.tensors[p]);
  return s;
}

JobFootprint job_footprint(const JobSpec& job) {
  JobFootprint f;
  const StateLayout layout = state_layout(job);
  for (size_t i = 0; i < layout.shapes.size(); ++i) {
    const auto n = static_cast<uint64_t>(layout.shapes[i].numel());
    if (i < layout.num_params) f.parameters += static_cast<int64_t>(n);
    f.state_bytes += 4 * n;
  }
  const auto steps = static_cast<uint64_t>(job.steps), stride = static_cast<uint64_t>(job.stride);
  const uint64_t checkpoints = steps / stride + 1 + (steps % stride != 0 ? 1 : 0);  // checkpoint_steps(T, s)
  f.checkpoint_bytes = f.state_bytes * checkpoints;
  return f;
}

Digest state_hash(const State& state, ThreadPool& pool) {
  std::vector<Digest> leaves(state.tensors.size());
  pool.parallel_for(static_cast<int64_t>(leaves.size()), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const Tensor& t = state.tensors[static_cast<size_t>(i)];
      leaves[static_cast<size_t>(i)] = tensor_leaf(DType::F32, t.shape().dims(), t.bytes());
    }
  });
  return merkle_root(leaves);
}

Digest trajectory_root(std::span<const Digest> checkpoint_hashes) {
  return merkle_root(checkpoint_hashes);
}

std::filesystem::path checkpoint_path(const std::filesystem::path& dir, int64_t step) {
  return dir / fmt::format("step_{:09d}.safetensors", step);
}

void save_checkpoint(const std::filesystem::path& path, const JobSpec& job, const State& state,
                     const Digest& id, const Digest& hash) {
  const StateLayout layout = state_layout(job);
  std::vector<NamedTensor> named;
  for (size_t i = 0; i < state.tensors.size(); ++i) named.push_back({layout.names[i], &state.tensors[i]});
  write_safetensors(path, named,
                    {{"format", "tribunal-checkpoint-1"},
                     {"job_id", to_hex(id)},
                     {"step", std::to_string(state.step())},
                     {"state_hash", to_hex(hash)}});
}

CheckpointHeader read_checkpoint_header(const std::filesystem::path& path) {
  const auto meta = read_safetensors_metadata(path);
  auto field = [&](const char* key) -> const std::string& {
    auto it = meta.find(key);
    if (it == meta.end())
      throw EngineError(fmt::format("{}: checkpoint metadata lacks '{}'", path.string(), key));
    return it->second;
  };
  if (field("format") != "tribunal-checkpoint-1")
    throw EngineError(
        fmt::format("{}: not a tribunal checkpoint (format '{}')", path.string(), field("format")));
  CheckpointHeader h;
  try {
    size_t used = 0;
    const std::string& step = field("step");
    h.step = std::stoll(step, &used);
    if (used != step.size() || h.step < 0) throw EngineError("bad step");
    h.job_id = digest_from_hex(field("job_id"));
    h.state_hash = digest_from_hex(field("state_hash"));
  } catch (const EngineError&) {
    throw;
  } catch (const std::exception& e) {
    throw EngineError(fmt::format("{}: bad checkpoint metadata: {}", path.string(), e.what()));
  }
  return h;
}

State load_checkpoint(const std::filesystem::path& path, const JobSpec& job, const Digest& id,
                      ThreadPool& pool) {
  const CheckpointHeader header = read_checkpoint_header(path);
  if (header.job_id != id)
    throw EngineError(fmt::format("{}: checkpoint belongs to job {}, not {}", path.string(),
                                  to_hex(header.job_id), to_hex(id)));
  SafetensorsFile file = read_safetensors(path);
  const StateLayout layout = state_layout(job);
  if (file.tensors.size() != layout.names.size())
    throw EngineError(fmt::format("{}: checkpoint has {} tensors, the job's state has {}", path.string(),
                                  file.tensors.size(), layout.names.size()));
  State s;
  for (size_t i = 0; i < layout.names.size(); ++i) {
    auto& [name, tensor] = file.tensors[i];
    if (name != layout.names[i] || tensor.shape() != layout.shapes[i])
      throw EngineError(fmt::format("{}: tensor {} is '{}' {}, expected '{}' {}", path.string(), i, name,
                                    tensor.shape().str(), layout.names[i], layout.shapes[i].str()));
    s.tensors.push_back(std::move(tensor));
  }
  if (s.step() != header.step)
    throw EngineError(
        fmt::format("{}: step tensor says {}, metadata says {}", path.string(), s.step(), header.step));
  if (state_hash(s, pool) != header.state_hash)
    throw EngineError(fmt::format("{}: tensors do not match the recorded state_hash", path.string()));
  return s;
}

}  // namespace tribunal
