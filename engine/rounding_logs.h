// The rounding logs of a rounding-log job's steps (docs/numerics.md "Rounding-log mode"): what each
// node's record commits to, and the files a trainer writes so that another trainer — or itself, when
// it answers a dispute — replays its float32 trajectory exactly with other float64 kernels.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "ops/rounding_log.h"
#include "protocol/hash.h"

namespace tribunal {

class ThreadPool;

/// The logs of one step: one per node of its step graph, in node order.
struct StepRoundingLog {
  int64_t step = -1;
  std::vector<RoundingLog> nodes;
};

/// The commitment to one node's log, the last output hash of its record in rounding-log mode: the
/// tensor leaf of its packed trits, tensor_leaf(DType::Trits, [count], packed) (protocol/tensor_hash.h),
/// so a dispute opens it in TensorChunks of 64 KiB like any tensor (docs/protocol.md, "Rounding-log
/// jobs"). Throws ProtocolError if packed is not ⌈count / 5⌉ bytes.
Digest rounding_log_leaf(const RoundingLog& log);

/// dir/rounding_logs/step_<t>.rlog.zst, beside the checkpoints of a run directory.
std::filesystem::path rounding_log_path(const std::filesystem::path& dir, int64_t step);

/// dir/trainer_logs: where an auditor of a job with roles keeps the trainer's logs it fetched
/// (rounding_log_path under it) and the trainer's signed LogHeader of each step (log_header_path), beside
/// its own checkpoints in run directory `dir` (docs/numerics.md, "Trainer and auditors").
inline std::filesystem::path audited_logs_dir(const std::filesystem::path& dir) {
  return dir / "trainer_logs";
}

/// dir/log_headers/step_<t>.bin: the LogHeader envelope a trainer signed for step t, as received.
std::filesystem::path log_header_path(const std::filesystem::path& dir, int64_t step);

/// Writes a step's logs zstd-compressed (most decisions are "nearest", so the packed trits shrink many
/// times): "tribunal rounding log 1\n" ‖ u64 LE step ‖ u64 LE nodes ‖ per node u64 LE count ‖ packed,
/// as zstd frames (level 1, with checksums) of 1 MiB of that stream each, compressed side by side on
/// `pool` when given; the file reads as one stream (RFC 8878 §3.1, `zstd -d`). Written to a temporary name
/// and renamed, so a reader never sees half a file. Returns the bytes written. Throws EngineError naming the
/// file when it cannot be written.
uint64_t write_rounding_log(const std::filesystem::path& path, const StepRoundingLog& log,
                            ThreadPool* pool = nullptr);

/// Reads the logs of step `step` of a graph whose node n has counts[n] output values. Throws
/// EngineError naming the file and what is wrong (missing, not a rounding log, another step, node
/// count or decision count, truncated, trailing bytes); the trits themselves are checked when replayed
/// (round_outputs_replayed).
StepRoundingLog read_rounding_log(const std::filesystem::path& path, int64_t step,
                                  std::span<const uint64_t> counts);

}  // namespace tribunal
