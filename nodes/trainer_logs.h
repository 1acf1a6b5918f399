// The rounding logs of a rounding-log job with roles on the wire (docs/protocol.md, "Rounding-log
// jobs"; docs/numerics.md, "Trainer and auditors"): the trainer answers a LogRequest with its signed
// LogHeader of the step's log leaves and each node's log in proven TensorChunks; an auditor fetches
// every step before it replays them, checking each chunk against the trainer's leaf before a byte of
// it is kept.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/dataset.h"
#include "engine/job.h"
#include "engine/rounding_logs.h"
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
/// `alter` (tests and scenarios: a trainer serving other logs than its records commit to) changes the
/// step's logs after they are read and before they are leaved and chunked.
std::vector<Body> trainer_log_answer(const JobSpec& job, const DataShape& shape, const Digest& id,
                                     const std::filesystem::path& dir, uint64_t step,
                                     const std::function<void(StepRoundingLog&)>& alter = {});

/// What an auditor's fetch of the trainer's logs took (docs/performance.md, "Rounding-log mode").
struct LogFetch {
  uint64_t steps = 0;
  uint64_t packed_bytes = 0;  ///< the logs' packed trits (⌈values/5⌉ bytes per node)
  uint64_t wire_bytes = 0;    ///< every envelope received (headers, chunk proofs)
  uint64_t file_bytes = 0;    ///< the zstd files written
  double seconds = 0;         ///< from the connection to the last step written
  uint64_t reasks = 0;        ///< requests sent again after a silence (a frame lost on the way)
  uint64_t reconnects = 0;    ///< connections made again after the trainer's connection was lost
};

/// The key of the trainer an auditor replays: the signer of the trainer's Claim envelope
/// `trainer_claim` that the client forwarded in its JobSubmit — the claim the client holds and a referee
/// would hold the trainer to. Throws EngineError when it is missing, not a signed Claim, or not the
/// trainer's claim of job `id` (`job`: its steps, and the endpoint the job names as its trainer).
PublicKey trainer_claim_key(std::span<const uint8_t> trainer_claim, const JobSpec& job, const Digest& id);

/// The auditor's fetch: asks the trainer at `url` for every step of job `id` (LogRequest, signed with
/// `key`), keeps each signed LogHeader at log_header_path(dir, t) and writes each step's logs to
/// rounding_log_path(dir, t) (dir: audited_logs_dir of the run directory) once every node's log is complete
/// and proven against the leaf of the trainer's LogHeader. Every envelope must be signed by `trainer`,
/// the key of the trainer's claim (trainer_claim_key): a header signed by any other key would be no
/// evidence against the trainer (docs/numerics.md, "Trainer and auditors"). A lost frame is not the
/// trainer's fault: while the trainer is silent the step's request is sent again (after 1 s, then
/// twice as long each time, at most 16 s apart), and a lost connection is made again; chunks already
/// proven are kept. Throws EngineError naming the step when the trainer refuses, sends nothing useful
/// for `timeout` (connections included), or sends a header or chunk that another key signed, that
/// does not fit or prove, or a second header of the step with other leaves.
LogFetch fetch_trainer_logs(NetContext& ctx, const std::string& url, const KeyPair& key,
                            const PublicKey& trainer, const JobSpec& job, const DataShape& shape,
                            const Digest& id, const std::filesystem::path& dir,
                            std::shared_ptr<TlsContext> tls = {},
                            std::chrono::seconds timeout = std::chrono::seconds(120));

}  // namespace tribunal::nodes
