// The provider's side of a delivery (docs/protocol.md, "Delivery"): the final state of a claim it
// made, as one StateHeader and then every tensor in TensorChunks with their chunk proofs — the same
// chunks a dispute opens (protocol/chunk_check.h) — for the client to check against the claim.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <vector>

#include "engine/job.h"
#include "engine/state.h"
#include "ops/thread_pool.h"
#include "protocol/wire.h"

namespace tribunal::nodes {

/// A claim the provider signed, kept so it can deliver the claimed final state: the job, the claim and
/// the state hashes of its checkpoints (TrainResult::checkpoint_hashes; empty: read from the files).
struct HeldClaim {
  JobSpec job;
  Claim claim;
  std::vector<Digest> checkpoint_hashes;
};

/// The final checkpoint of a held claim, loaded from the provider's own store and checked before a
/// byte of it is offered: its job id, layout and state hash (load_checkpoint), and that its state hash
/// is the last leaf of the claim's trajectory root. Holds one state in memory.
class StateSource {
 public:
  /// Loads `job_dir`'s checkpoint of step claim.steps. Throws EngineError (local files: the caller
  /// logs the details) when it is missing or does not reproduce the claim.
  StateSource(const HeldClaim& held, const std::filesystem::path& job_dir, ThreadPool& pool);

  /// The first message of the delivery.
  const StateHeader& header() const { return header_; }
  /// Chunks of every tensor, in layout order, each chunk 0 to n − 1 (round 0).
  size_t chunk_count() const;
  /// Calls `send` with each TensorChunk in stream order until it returns false (the client left).
  /// Builds one tensor's chunk tree at a time.
  void stream(const std::function<bool(TensorChunk&)>& send) const;

 private:
  State state_;
  StateHeader header_;
};

}  // namespace tribunal::nodes
