// Delivery, verified (docs/protocol.md, "Delivery"; docs/running.md, "What delegate --out writes"):
// after a claim stood, the client fetches the final state of that claim from a provider that holds it,
// checks every byte against the claim as it streams (protocol/state_delivery.h), and writes the model
// and the optimizer state into its output folder with a result.json that says what was accepted.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/job.h"
#include "net/context.h"
#include "nodes/delegate.h"
#include "nodes/log.h"

namespace tribunal::nodes {

/// No holder of the accepted claim delivered a final state that checks out: what each one did.
class DeliveryFailed : public EngineError {
 public:
  using EngineError::EngineError;
};

/// A final state received and checked against the accepted claim: a checkpoint file in the format of
/// the providers' own (engine/state.h: "tribunal-checkpoint-1" metadata with job_id, step and
/// state_hash; the state's tensors under their layout names, in layout order), every byte proven
/// under the claim's trajectory root.
struct VerifiedState {
  std::filesystem::path file;
  Digest job_id{};
  Digest trajectory_root{};
  Digest state_hash{};  ///< the trajectory's last leaf, as proven
  uint64_t step = 0;
  size_t provider = 0;                ///< index into the request's providers of the one that served it
  std::vector<std::string> failures;  ///< "URL: why" of each holder tried before, in order
};

/// Progress of a delivery: bytes received and checked, of `total`, at `bytes_per_second` so far.
using DeliveryProgress = std::function<void(uint64_t received, uint64_t total, double bytes_per_second)>;

struct DeliveryOptions {
  /// The longest wait for one message of the stream (the provider loads its checkpoint first).
  std::chrono::seconds message_timeout{120};
  /// Called at most once per `progress_every` while the state streams, and once at its end; only for
  /// states of at least `progress_from_bytes`.
  DeliveryProgress progress;
  std::chrono::milliseconds progress_every{1000};
  uint64_t progress_from_bytes = uint64_t{64} << 20;
};

/// Fetches the final state of the accepted claim (outcome.accepted must hold) into `file`: asks the
/// provider of the standing claim first, then every other provider whose valid claim has the same
/// trajectory root, over the connection kind a JobSubmit uses (a StateRequest signed by
/// request.client_key). Each stream is checked piece by piece and written to "<file>.tmp" as it
/// comes, so memory does not grow with the model; the first piece that fails ends that provider's
/// try. Throws DeliveryFailed naming every holder and why when none delivers; EngineError for local
/// failures (the output folder).
VerifiedState fetch_final_state(NetContext& ctx, const DelegateRequest& request,
                                const DelegateOutcome& outcome, const JobSpec& job,
                                const std::filesystem::path& file, const Logger& log,
                                const DeliveryOptions& options = {});

/// The files written from a verified state, relative to the output folder.
struct DeliveredFiles {
  std::filesystem::path model;      ///< "model.safetensors"
  std::filesystem::path optimizer;  ///< "optimizer.safetensors"
};

/// The seam between verification and the user's files: writes `dir`/model.safetensors (the weights)
/// and `dir`/optimizer.safetensors (the optimizer's slots and an I64 `step`, what resuming needs) from
/// the verified checkpoint `state.file`, in the reference PyTorch modules' names and layouts
/// (engine/pytorch_export.h, docs/parity.md "Exported weights"), each with the job id, step and state
/// hash of the committed form in its metadata. Loads the state once (one state in memory). Throws
/// EngineError naming the file.
DeliveredFiles write_delivery(const std::filesystem::path& dir, const JobSpec& job,
                              const VerifiedState& state);

/// What deliver() did.
struct Delivery {
  VerifiedState state;
  DeliveredFiles files;
  std::filesystem::path result;  ///< dir/result.json
};

/// After delegate_job accepted a claim: fetch_final_state into request.out_dir, write_delivery, and
/// result.json (job id, trajectory root, final state hash, the accepted claim with its provider and
/// signed envelope, the provider that served the state, every claim and every verdict with its
/// file). The verified checkpoint is removed once the files are written. Throws DeliveryFailed or
/// EngineError as fetch_final_state.
Delivery deliver(NetContext& ctx, const DelegateRequest& request, const DelegateOutcome& outcome,
                 const Logger& log, const DeliveryOptions& options = {});

}  // namespace tribunal::nodes
