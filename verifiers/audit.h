// Cheap audits of a provider's run (Lab Apex, "Ensuring Verifiable and Secure Outsourced Training of
// Deep Neural Networks", 2023; docs/verifiers.md "Audits"): four checks on what the run directory
// holds — the loss log, the resource samples and the stride checkpoints — that recompute only a
// sampled loss per checkpoint and the k intervals of largest weight change per epoch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/dataset.h"
#include "engine/job.h"
#include "engine/trainer.h"

namespace tribunal::verifiers {

struct AuditOptions {
  double alpha = 0.4;          ///< resource check: the fraction of samples above their mean needed
  double pev_percent = 1.0;    ///< PEV: % of the training samples the loss is recomputed on, per checkpoint
  double pev_tolerance = 0.3;  ///< PEV: allowed |recomputed − logged| / logged
  int64_t pev_window = 8;      ///< PEV: the logged losses averaged around a checkpoint (steps)
  int64_t top_k = 1;           ///< VMO: intervals replayed per epoch (those of largest weight change)
  double vmo_delta = 0.0;      ///< VMO: allowed L2 distance of a replay from the checkpoint (0: bitwise)
  uint64_t seed = 1;           ///< the auditor's sampling seed (the provider must not know it)
  int threads = 1;
  FastOptions fast;  ///< the auditor's kernels when replaying a fast-mode job
};

/// One check's outcome with its figures (name → value, in the units the name says).
struct CheckResult {
  std::string name;  ///< "loss_count", "resource_utilisation", "pev", "vmo"
  bool passed = false;
  std::string detail;  ///< one line: what was compared, what failed
  std::vector<std::pair<std::string, double>> figures;
};

struct AuditReport {
  std::vector<CheckResult> checks;
  double cpu_seconds = 0;       ///< process CPU time of the audit (loading the data set included)
  uint64_t evidence_bytes = 0;  ///< bytes the provider stores for it (checkpoints and logs)
  uint64_t read_bytes = 0;      ///< bytes the audit read of them (logs and the checkpoints it opened)
  bool passed() const;
};

/// Runs the four checks on `run_dir` for `job` (its data located):
///  1. loss_count: the loss log holds exactly one loss for each step 0..T−1 (N = E × I = T, I the
///     iterations per epoch ⌈samples / B⌉, E = T / I epochs);
///  2. resource_utilisation: of the resource samples, a fraction ≥ alpha lies above their mean (and
///     there is one per step);
///  3. pev (Probabilistic Epoch Validation): at every checkpoint c, the loss of its parameters on a
///     random pev_percent % of the training samples, against the mean logged loss of the pev_window
///     steps around c; fails beyond pev_tolerance (relative);
///  4. vmo (Verifiable Model Ownership, after Proof-of-Learning): per epoch, the top_k checkpoint
///     intervals of largest weight change are replayed from their first checkpoint and compared with
///     their last; fails beyond vmo_delta.
/// A missing or unreadable checkpoint fails the check that needs it (the detail says which). Throws
/// EngineError when the directory or the data set cannot be read.
AuditReport run_audit(const JobSpec& job, const std::filesystem::path& run_dir, const AuditOptions& options,
                      const Dataset* train = nullptr);

}  // namespace tribunal::verifiers
