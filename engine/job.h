// The training job: what a client hands to every provider (DESIGN §5 "Job"). Parsed from TOML;
// its identity `job_id` is the hash of a canonical binary encoding, so two parties agree on a job
// exactly when they agree on every field that influences the trajectory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/hash.h"

namespace tribunal {

/// Version of the RepOps numerics contract (docs/numerics.md); part of every job_id.
inline constexpr uint32_t kRepOpsContractVersion = 1;

/// Largest step count: the step counter is a float32 state tensor, exact up to 2^24.
inline constexpr int64_t kMaxSteps = int64_t{1} << 24;

enum class ModelKind : uint8_t { Mlp = 1 };
enum class OptimizerKind : uint8_t { Sgd = 1, AdamW = 2 };

/// A multilayer perceptron: Linear(widths[i] → widths[i+1]) with ReLU between layers.
struct ModelSpec {
  ModelKind kind = ModelKind::Mlp;
  std::vector<int64_t> widths{784, 256, 10};
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::AdamW;
  float lr = 1e-3f;
  float momentum = 0.9f;  ///< SGD only
  float beta1 = 0.9f;     ///< AdamW only
  float beta2 = 0.999f;   ///< AdamW only
  float eps = 1e-8f;      ///< AdamW only
  float weight_decay = 0.0f;
};

struct JobSpec {
  ModelSpec model;
  std::string dataset = "fashion-mnist";            ///< the data set's name (only Fashion-MNIST so far)
  std::filesystem::path data_dir = "/usr/share/datasets/fashion-mnist";  ///< local; not part of job_id
  uint64_t seed = 0;
  int64_t steps = 0;       ///< T, the number of optimizer steps
  int64_t batch_size = 0;  ///< B
  int64_t stride = 0;      ///< s: checkpoints at steps 0, s, 2s, …, T
  OptimizerSpec optimizer;
  std::string source = "job";  ///< where the job came from (its file), for error messages; not part of job_id
};

/// Parses a job from TOML text. `source` names the file in error messages. Unknown keys, wrong
/// types and out-of-range values throw EngineError("<source>:<line>:<col>: <what>").
/// Relative data directories are resolved against `base_dir`.
JobSpec parse_job(std::string_view toml_text, const std::string& source, const std::filesystem::path& base_dir);

/// Reads and parses a job file; a missing or unreadable file throws EngineError.
JobSpec load_job(const std::filesystem::path& path);

/// Checks the job against the data set's shape (input features, classes, sample count): e.g. the
/// first width must equal the features and the batch must fit. Throws EngineError.
void check_job_against_data(const JobSpec& job, int64_t samples, int64_t features, int64_t classes);

/// Canonical binary encoding of the job (fixed field order, integers u64 LE, floats as f32 bits,
/// strings length-prefixed), including the contract version and the data set's Merkle root.
std::vector<uint8_t> canonical_job_encoding(const JobSpec& job, const Digest& dataset_root);

/// job_id = BLAKE2b-256(Job tag ‖ canonical_job_encoding).
Digest job_id(const JobSpec& job, const Digest& dataset_root);

}  // namespace tribunal
