// The client's side of a delivery (docs/protocol.md, "Delivery"): after a claim stood, the final state
// of its trajectory arrives as one StateHeader and then every tensor as TensorChunk messages, and
// StateDelivery checks each piece against the accepted claim before the caller keeps a byte of it:
//
//   trajectory_root (the claim that stood) → state_hash, the trajectory's last leaf (inclusion proof)
//   state_hash → the tensor leaves (their RFC 6962 Merkle root)
//   each tensor leaf → its header (shape from the job, chunk count, chunk root) → each chunk's bytes
//                      (a range proof of each frame's run under the chunk root; chunk_check.h, as in
//                      a dispute)
//
// The stream is in order (tensors in layout order, each chunk 0 to n − 1, over one connection), so
// nothing is held here beyond the tensor leaves: the caller writes each accepted chunk out and the
// memory of a delivery does not grow with the model. The first piece that fails is the provider's
// fault (it signed what it sent); the caller then asks another holder of the same claim. Sans-I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/chunk_check.h"
#include "protocol/hash.h"
#include "protocol/messages.h"

namespace tribunal {

/// What the client knows before the delivery: the claim that stood and the job's state layout.
struct DeliveryTerms {
  Digest job_id{};
  Digest trajectory_root{};                  ///< of the accepted claim
  uint64_t steps = 0;                        ///< the job's T: the final state's step
  uint64_t checkpoints = 0;                  ///< leaves of the trajectory tree: |checkpoint_steps(T, s)|
  std::vector<std::vector<int64_t>> shapes;  ///< the state layout's shapes (float32), layout order
};

/// Checks one delivery, piece by piece, in stream order.
class StateDelivery {
 public:
  explicit StateDelivery(DeliveryTerms terms);

  /// Checks the header: for this job and trajectory root, at step T, `state_hash` the last leaf of the
  /// trajectory tree, and the Merkle root over one tensor leaf per layout tensor. False with the reason
  /// in `why` (and nothing taken) otherwise; a second header is refused.
  bool accept(const StateHeader& header, std::string& why);

  /// Checks the next frame of the stream (tensor next_value(), a run of chunks from next_chunk())
  /// against its tensor leaf. True: c.bytes are proven and the caller may keep them (they are the next
  /// bytes of the state in layout order). False with the reason in `why`: refused, and so is anything after
  /// it.
  bool accept(const TensorChunk& chunk, std::string& why);

  bool header_taken() const { return header_; }
  /// True once every chunk of every tensor was accepted.
  bool complete() const { return header_ && value_ == terms_.shapes.size(); }
  /// The proven final state hash (once the header was accepted).
  const Digest& state_hash() const { return state_hash_; }
  /// Bytes of the whole state (every tensor, float32) and bytes accepted so far.
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t bytes_taken() const { return bytes_taken_; }
  /// Where the stream stands: the tensor and chunk the next TensorChunk must be.
  uint32_t next_value() const { return value_; }
  uint32_t next_chunk() const { return chunk_; }

 private:
  DeliveryTerms terms_;
  std::vector<ExpectedTensor> expected_;
  std::vector<uint64_t> bytes_;  // per tensor
  bool header_ = false;
  bool failed_ = false;
  Digest state_hash_{};
  Digest chunk_root_{};  // of the current tensor, once its first chunk passed
  uint32_t value_ = 0, chunk_ = 0;
  uint64_t total_bytes_ = 0, bytes_taken_ = 0;
};

}  // namespace tribunal
