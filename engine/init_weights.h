// Pretrained initial weights (a job's model.init): a safetensors file registered by name on each node
// (engine/data_registry.h) whose tensors become the parameters of state 0 in place of init_param.
// The file's hash is in the job id (engine/job.h), so every party of the job starts from the same bytes.
#pragma once

#include <filesystem>
#include <span>
#include <vector>

#include "engine/job.h"
#include "engine/model.h"
#include "ops/tensor.h"

namespace tribunal {

/// Reads the job's initial weights from job.init_path (set by locate_data or locate_model_files). The file
/// holds exactly one F32 tensor per parameter of model_params(job.model), either under its name and in
/// its internal shape (engine/model.h: e.g. "l0.weight" [in, out]) or under the reference PyTorch
/// module's name and layout (engine/pytorch_export.h: e.g. "0.weight" [out, in], as `tribunal export`,
/// a delegate's model.safetensors or torch's state_dict write it), in any order; other tensors and
/// "__metadata__" entries other than strings are refused (a wrong file is likelier than an intent), metadata
/// is ignored. Returns the tensors in `params` order. Throws EngineError("<file>: …") naming the tensor for:
/// a hash that is not job.init_hash (the file changed since the job was located), a missing or extra tensor,
/// a shape that differs, a dtype other than F32, a NaN or infinite element (with its index); and for a job
/// never located.
std::vector<Tensor> load_init_weights(const JobSpec& job, std::span<const ParamSpec> params);

}  // namespace tribunal
