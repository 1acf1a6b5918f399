#include "engine/run_dir.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {

std::optional<CheckpointOfJob> other_job_checkpoint(const std::filesystem::path& dir, const Digest& job_id) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) == 0 && entry.path().extension() == ".safetensors")
      files.push_back(entry.path());
  }
  if (ec) throw EngineError(fmt::format("{}: cannot list the checkpoints: {}", dir.string(), ec.message()));
  std::sort(files.begin(), files.end());  // the first one found is the same on every file system
  for (const auto& file : files) {
    const CheckpointHeader h = read_checkpoint_header(file);
    if (h.job_id != job_id) return CheckpointOfJob{file, h};
  }
  return std::nullopt;
}

void require_run_of_job(const std::filesystem::path& dir, const Digest& job_id, std::string_view what) {
  if (const auto other = other_job_checkpoint(dir, job_id))
    throw EngineError(fmt::format("{}: {} holds checkpoints of job {} ({}), not of job {}", what,
                                  dir.string(), to_hex(other->header.job_id), other->file.filename().string(),
                                  to_hex(job_id)));
}

}  // namespace tribunal
