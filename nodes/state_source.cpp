// The final state of a held claim, as a delivery's frames. See state_source.h; docs/protocol.md,
// "Delivery".
#include "nodes/state_source.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/error.h"
#include "protocol/chunk_check.h"
#include "protocol/merkle.h"
#include "protocol/tensor_frames.h"
#include "protocol/tensor_hash.h"
#include "protocol/trajectory.h"

namespace tribunal::nodes {

StateSource::StateSource(const HeldClaim& held, const std::filesystem::path& job_dir, ThreadPool& pool) {
  const Claim& claim = held.claim;
  const std::vector<uint64_t> steps =
      checkpoint_steps(claim.steps, static_cast<uint64_t>(std::max<int64_t>(held.job.stride, 1)));
  std::vector<Digest> hashes = held.checkpoint_hashes;
  if (hashes.size() != steps.size() || trajectory_root(hashes) != claim.trajectory_root) {
    // A run resumed by an earlier process: the checkpoints' recorded hashes.
    hashes.clear();
    for (uint64_t t : steps)
      hashes.push_back(read_checkpoint_header(checkpoint_path(job_dir, static_cast<int64_t>(t))).state_hash);
  }
  if (trajectory_root(hashes) != claim.trajectory_root)
    throw EngineError(
        fmt::format("{}: the stored checkpoints do not reproduce the claim's trajectory root {}",
                    job_dir.string(), to_hex(claim.trajectory_root)));
  const auto final_path = checkpoint_path(job_dir, static_cast<int64_t>(claim.steps));
  state_ = load_checkpoint(final_path, held.job, claim.job_id, pool);
  header_.job_id = claim.job_id;
  header_.trajectory_root = claim.trajectory_root;
  header_.step = claim.steps;
  header_.state_hash = hashes.back();
  header_.in_trajectory = MerkleTree(hashes).prove(hashes.size() - 1);
  for (const Tensor& t : state_.tensors)
    header_.tensors.push_back(tensor_leaf(DType::F32, t.shape().dims(), t.bytes()));
  if (merkle_root(header_.tensors) != header_.state_hash)
    throw EngineError(fmt::format("{}: the checkpoint is not the claim's final state", final_path.string()));
}

size_t StateSource::chunk_count() const {
  size_t n = 0;
  for (const Tensor& t : state_.tensors) n += tensor_chunk_count(t.bytes().size());
  return n;
}

void StateSource::stream(const std::function<bool(TensorChunk&)>& send) const {
  for (size_t v = 0; v < state_.tensors.size(); ++v) {
    const Tensor& t = state_.tensors[v];
    bool more = true;
    for_each_tensor_frame(0, static_cast<uint32_t>(v), DType::F32, t.shape().dims(), t.bytes(), {},
                          [&](TensorChunk&& frame) { return more = send(frame); });
    if (!more) return;
  }
}

}  // namespace tribunal::nodes
