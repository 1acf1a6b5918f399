// A delivered final state, checked piece by piece. See state_delivery.h; docs/protocol.md, "Delivery".
#include "protocol/state_delivery.h"

#include <stdexcept>

#include "protocol/merkle.h"

namespace tribunal {

StateDelivery::StateDelivery(DeliveryTerms terms) : terms_(std::move(terms)) {
  for (const auto& shape : terms_.shapes) {
    const std::optional<uint64_t> bytes = opened_byte_length(DType::F32, shape);
    if (!bytes) throw ProtocolError("delivery: a state tensor's shape is out of range");
    bytes_.push_back(*bytes);
    total_bytes_ += *bytes;
  }
}

bool StateDelivery::accept(const StateHeader& h, std::string& why) {
  if (header_ || failed_) {
    why = header_ ? "a second StateHeader" : "the delivery already failed";
    return false;
  }
  const auto refuse = [&](std::string reason) {
    why = std::move(reason);
    failed_ = true;
    return false;
  };
  if (h.job_id != terms_.job_id) return refuse("the StateHeader is for another job");
  if (h.trajectory_root != terms_.trajectory_root)
    return refuse("the StateHeader is for another trajectory root than the claim that stood");
  if (h.step != terms_.steps)
    return refuse("the StateHeader is of step " + std::to_string(h.step) + ", the job's final step is " +
                  std::to_string(terms_.steps));
  if (terms_.checkpoints == 0 || h.in_trajectory.index != terms_.checkpoints - 1 ||
      h.in_trajectory.size != terms_.checkpoints ||
      !verify_inclusion(h.state_hash, h.in_trajectory, terms_.trajectory_root))
    return refuse("the final state hash is not the last leaf of the claim's trajectory root");
  if (h.tensors.size() != terms_.shapes.size())
    return refuse("the StateHeader has " + std::to_string(h.tensors.size()) +
                  " tensor leaves, the job's state " + std::to_string(terms_.shapes.size()));
  if (merkle_root(h.tensors) != h.state_hash)
    return refuse("the tensor leaves do not hash to the final state hash");
  for (size_t i = 0; i < h.tensors.size(); ++i)
    expected_.push_back({terms_.shapes[i], h.tensors[i], DType::F32});
  state_hash_ = h.state_hash;
  header_ = true;
  return true;
}

bool StateDelivery::accept(const TensorChunk& c, std::string& why) {
  if (failed_ || !header_ || complete()) {
    why = failed_    ? "the delivery already failed"
          : !header_ ? "a TensorChunk before the StateHeader"
                     : "a TensorChunk after the whole state";
    failed_ = true;
    return false;
  }
  const std::string where = "tensor " + std::to_string(value_) + " chunk " + std::to_string(chunk_) + ": ";
  if (c.round != 0 || c.value != value_ || c.chunk != chunk_) {
    why = where + "the stream sent tensor " + std::to_string(c.value) + " chunk " + std::to_string(c.chunk) +
          " (round " + std::to_string(c.round) + ") out of order";
    failed_ = true;
    return false;
  }
  const ExpectedTensor& want = expected_[value_];
  if (c.shape != want.shape) {
    why = where + "its shape is not the shape of the tensor in the job's state layout";
    failed_ = true;
    return false;
  }
  std::string reason;
  const std::optional<uint64_t> total =
      check_chunk_header(want, c, chunk_ == 0 ? nullptr : &chunk_root_, reason);
  if (!total || (chunk_ > 0 && c.chunk_root != chunk_root_)) {
    why = where + (total ? "its chunk root changed within the tensor" : reason);
    failed_ = true;
    return false;
  }
  if (!chunk_bytes_proven(want.dtype, c, *total)) {
    why = where + "its bytes (chunks " + std::to_string(c.chunk) + " to " +
          std::to_string(c.chunk + c.count - 1) + ") do not match the tensor's committed chunk root";
    failed_ = true;
    return false;
  }
  chunk_root_ = c.chunk_root;
  bytes_taken_ += c.bytes.size();
  chunk_ += c.count;  // check_chunk_header bounds the run by the chunk count
  if (chunk_ == c.chunks) {
    ++value_;
    chunk_ = 0;
  }
  return true;
}

}  // namespace tribunal
