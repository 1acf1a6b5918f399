// Whose run a directory holds: a run directory (`tribunal train --out`, a provider's STORE/<job_id>/)
// keeps the checkpoints of one job, each naming its job id in its metadata (engine/state.h). Training
// into, auditing or drawing a report from a directory of another job would mix two runs silently.
#pragma once

#include <filesystem>
#include <optional>
#include <string_view>

#include "engine/state.h"

namespace tribunal {

/// A checkpoint of a run directory and its header.
struct CheckpointOfJob {
  std::filesystem::path file;
  CheckpointHeader header;
};

/// The first checkpoint (DIR/step_*.safetensors, in file-name order) of `dir` whose metadata names
/// another job than `job_id`; nullopt when there is none (or `dir` does not exist). Throws
/// EngineError naming a checkpoint whose header cannot be read.
std::optional<CheckpointOfJob> other_job_checkpoint(const std::filesystem::path& dir, const Digest& job_id);

/// Throws EngineError when `dir` holds a checkpoint of another job than `job_id`, naming `dir`, the
/// file, both job ids (hex) and `what` the caller was doing ("train --out", "audit", …).
void require_run_of_job(const std::filesystem::path& dir, const Digest& job_id, std::string_view what);

}  // namespace tribunal
