// The ONNX models this process has imported, found again by file without reading it: a referee or
// provider locates the same registered model file for every job submission and dispute, and reading,
// hashing and importing a GPT-2-small-sized file (0.5 GB) costs most of a second each time
// (docs/performance.md "GPT-2 small as an ONNX export").
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "onnx/lower.h"
#include "protocol/hash.h"

namespace tribunal {

/// A model file's content hash (HashTag::File over its bytes, what job_id binds) and its import.
struct ModelFile {
  Digest hash;
  std::shared_ptr<const OnnxModel> model;
};

/// Reads, hashes and imports the ONNX file at `path`, or returns the cached result when the file's
/// stamp — device, inode, size and modification time to the nanosecond (POSIX stat) — is that of a
/// file this process read before. The files are the operator's registered models (never named by a
/// peer); rewriting one changes its stamp, so the next lookup reads it again. A file read afresh whose
/// bytes hash to a cached model's reuses that import. The two most recent models are kept.
/// `name` is the job's model.file, for messages. Throws EngineError when the file cannot be read or
/// exceeds limits.max_file_bytes, OnnxError when the import refuses it.
ModelFile load_model_file(const std::filesystem::path& path, const std::string& name,
                          const OnnxLimits& limits);

}  // namespace tribunal
