// The rounding logs of a rounding-log job with roles on the wire (docs/protocol.md, "Rounding-log
// jobs"; docs/numerics.md, "Trainer and auditors"): the trainer answers a LogRequest with its signed
// LogHeader of the step's log leaves and each node's log in proven TensorChunks; an auditor fetches
// every step before it replays them, checking each chunk against the trainer's leaf before a byte of
// it is kept.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/dataset.h"
#include "engine/job.h"
#include "net/context.h"
#include "net/tls.h"
#include "protocol/codec.h"
#include "protocol/envelope.h"

namespace tribunal::nodes {

/// The trainer's answer to a LogRequest for step `step` of job `id` (`job` on data of `shape`), from its
/// run directory `dir` (rounding_log_path(dir, step), written by run_training): the LogHeader of the
/// step's node log leaves, then each node's log as TensorChunks (round 0, value = node, 64 KiB chunks
/// with their inclusion proofs). Throws EngineError when the step is not in the job or its file is
/// missing or not this step graph's.
std::vector<Body> trainer_log_answer(const JobSpec& job, const DataShape& shape, const Digest& id,
                                     const std::filesystem::path& dir, uint64_t step);

/// What an auditor's fetch of the trainer's logs took (docs/performance.md, "Rounding-log mode").
struct LogFetch {
  uint64_t steps = 0;
  uint64_t packed_bytes = 0;  ///< the logs' packed trits (⌈values/5⌉ bytes per node)
  uint64_t wire_bytes = 0;    ///< every envelope received (headers, chunk proofs)
  uint64_t file_bytes = 0;    ///< the gzip files written
  double seconds = 0;         ///< from the connection to the last step written
  PublicKey trainer{};        ///< the key that signed every LogHeader and chunk
};

/// The auditor's fetch: asks the trainer at `url` for every step of job `id` (LogRequest, signed with
/// `key`), keeps each signed LogHeader at log_header_path(dir, t) and writes each step's logs to
/// rounding_log_path(dir, t) (dir: audited_logs_dir of the run directory) once every node's log is complete
/// and proven against the leaf of the trainer's LogHeader; every envelope must be signed by the key
/// that signed the first header. Throws EngineError naming the step when the trainer refuses, closes,
/// stays silent for `timeout`, or sends a header or chunk that does not fit or prove.
LogFetch fetch_trainer_logs(NetContext& ctx, const std::string& url, const KeyPair& key, const JobSpec& job,
                            const DataShape& shape, const Digest& id, const std::filesystem::path& dir,
                            std::shared_ptr<TlsContext> tls = {},
                            std::chrono::seconds timeout = std::chrono::seconds(120));

}  // namespace tribunal::nodes
