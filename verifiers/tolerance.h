// The tolerance verifier (OVIG; Proof-of-Learning, Jia et al., IEEE S&P 2021; docs/verifiers.md
// "Tolerance verifier"): a provider trains a fast-mode job (plain float32, any GEMM) and keeps only
// its stride-aligned checkpoints (endpoint evidence). The verifier calibrates an empirical boundary on
// the distance between honest replays that differ in their kernels, opens a random sample of the
// intervals (optimistic sampling), replays each opened interval from its first checkpoint with its own
// kernels and accepts it when the replay lies within the boundary of the interval's last checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/dataset.h"
#include "engine/job.h"
#include "engine/trainer.h"

namespace tribunal::verifiers {

/// The honest heterogeneous kernels calibration replays by default: OpenBLAS SGEMM on 1 and 2
/// threads and the portable naive, blocked and reversed orders (ops/float32_gemm.h), those built.
std::vector<FastOptions> default_calibration_kernels();

/// "openblas/2" (GEMM / OpenBLAS threads, 0 = OPENBLAS_NUM_THREADS's) and its parse (EngineError).
std::string kernel_name(const FastOptions& k);
FastOptions parse_kernel(const std::string& name);

struct CalibrationOptions {
  std::vector<FastOptions> kernels = default_calibration_kernels();  ///< at least 2
  int64_t intervals = 2;  ///< the first intervals of the job calibrated on (each replayed by every kernel)
  double margin = 2.0;    ///< boundary = margin × the largest honest distance observed
  int threads = 1;
};

/// The calibration and the boundary it sets (written out by write_calibration).
struct Calibration {
  std::string job_id;  ///< hex
  int64_t stride = 0, intervals = 0;
  std::vector<std::string> kernels;  ///< kernel_name of each
  /// Every pairwise L2 distance (state_distance, every tensor but "step") between two kernels' states
  /// at the end of a calibrated interval started from the same state, in order (interval, pair).
  std::vector<double> distances;
  double max_distance = 0;  ///< the largest of them
  double margin = 0;
  double boundary = 0;     ///< margin × max_distance: the distance an opened interval may show
  double cpu_seconds = 0;  ///< process CPU time of the calibration
};

/// Calibrates on `job` (a fast-mode job: EngineError otherwise): the first kernel trains the
/// reference trajectory; at the start of each of the first `intervals` intervals every kernel trains
/// the interval's s steps from the reference state, and every pair of their end states is measured.
Calibration calibrate(const JobSpec& job, const Dataset& train, const CalibrationOptions& options);

/// JSON file; read checks the fields and that it is the calibration of `job_id` (EngineError naming
/// the path otherwise).
void write_calibration(const std::filesystem::path& path, const Calibration& c);
Calibration read_calibration(const std::filesystem::path& path, const Digest& job_id);

struct ToleranceOptions {
  double sample_fraction = 0.25;  ///< intervals opened: round(fraction × intervals), at least 1
  uint64_t seed = 1;              ///< the verifier's sampling seed, drawn after the provider committed
  FastOptions kernel;             ///< the verifier's own kernels for the replays
  int threads = 1;
};

/// One opened interval.
struct OpenedInterval {
  int64_t from = 0, to = 0;
  double distance = 0;  ///< L2 between the replay and the checkpoint of `to`
  bool passed = false;
};

struct ToleranceReport {
  int64_t intervals = 0;               ///< in the trajectory
  std::vector<OpenedInterval> opened;  ///< in step order
  double boundary = 0;
  bool passed = false;  ///< every checkpoint there and every opened interval within the boundary
  std::string detail;
  double cpu_seconds = 0;       ///< the check's process CPU time (not the calibration's)
  uint64_t evidence_bytes = 0;  ///< what the provider stores: its checkpoints and logs
  uint64_t sent_bytes = 0;      ///< what it sends: the opened intervals' endpoint checkpoints
};

/// Checks the provider's run directory against the boundary of `calibration`.
ToleranceReport check_tolerance(const JobSpec& job, const std::filesystem::path& run_dir,
                                const Calibration& calibration, const ToleranceOptions& options,
                                const Dataset* train = nullptr);

}  // namespace tribunal::verifiers
