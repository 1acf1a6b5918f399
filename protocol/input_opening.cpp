// An OpenInputs round's tensors and samples, checked and reassembled. See input_opening.h;
// docs/protocol.md, "The game".
#include "protocol/input_opening.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"

namespace tribunal {
namespace {

/// Byte length of a tensor of `dtype` and `shape`; nullopt if a dimension is negative or the tensor
/// has more than kMaxOpenedElements elements.
std::optional<uint64_t> byte_length(DType dtype, std::span<const int64_t> shape) {
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && numel > kMaxOpenedElements / static_cast<uint64_t>(d))) return std::nullopt;
    numel *= static_cast<uint64_t>(d);
  }
  return tensor_byte_length(dtype, numel);
}

/// True if `a` and `b` hold the same rows with bit-identical values (the proofs aside: the rows held
/// were proven).
bool same_samples(const Samples& a, const Samples& b) {
  const auto same_bits = [](const std::vector<std::vector<float>>& x, const std::vector<std::vector<float>>& y) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].size() != y[i].size() || (!x[i].empty() && std::memcmp(x[i].data(), y[i].data(), x[i].size() * 4) != 0))
        return false;
    return true;
  };
  return a.indices == b.indices && same_bits(a.inputs, b.inputs) && same_bits(a.labels, b.labels);
}

/// Chunks of a tensor of `bytes` bytes: at least one (an empty tensor has one empty chunk).
uint64_t chunk_count(uint64_t bytes) {
  return std::max<uint64_t>(1, (bytes + kTensorChunkBytes - 1) / kTensorChunkBytes);
}

}  // namespace

InputOpening::InputOpening(std::vector<ExpectedTensor> tensors, ExpectedSamples samples)
    : expected_(std::move(tensors)), expected_samples_(std::move(samples)), received_(expected_.size()) {}

Acceptance InputOpening::accept(const TensorChunk& c, std::string& why) {
  if (c.value < expected_.size() && c.chunk < received_[c.value].chunks) {
    // Already taken: the same bytes again are redundant; other bytes cannot be the committed ones
    // (those are held), so they are refused like any chunk that fails its proof — without hashing.
    const Received& got = received_[c.value];
    const uint64_t offset = uint64_t{c.chunk} * kTensorChunkBytes;
    const uint64_t held = std::min<uint64_t>(kTensorChunkBytes, got.bytes - offset);
    if (c.shape == expected_[c.value].shape && c.chunk_root == got.chunk_root && c.bytes.size() == held &&
        (held == 0 || std::memcmp(got.data() + offset, c.bytes.data(), held) == 0))
      return Acceptance::Redundant;
    why = "tensor chunk " + std::to_string(c.chunk) + " does not match its tensor's chunk root";
    return Acceptance::Refused;
  }
  if (c.value >= expected_.size() || c.chunk != received_[c.value].chunks) {
    why = "tensor chunk out of order";
    return Acceptance::Refused;
  }
  const ExpectedTensor& want = expected_[c.value];
  Received& got = received_[c.value];
  if (c.chunk == 0) {
    // The job's graph fixes every value's shape: a tensor of another shape is refused before any
    // of its bytes is kept (its size, and so the referee's memory, follows from the shape).
    if (c.shape != want.shape) {
      why = "tensor shape is not the shape of the value in the job's graph";
      return Acceptance::Refused;
    }
    const std::optional<uint64_t> bytes = byte_length(want.dtype, c.shape);
    if (!bytes) {
      why = "tensor shape out of range";
      return Acceptance::Refused;
    }
    if (c.chunks != chunk_count(*bytes) ||
        tensor_leaf_from_chunk_root(want.dtype, c.shape, *bytes, c.chunk_root) != want.hash) {
      why = "tensor header does not match the committed tensor hash";
      return Acceptance::Refused;
    }
  } else if (c.chunk_root != got.chunk_root || c.shape != want.shape) {
    why = "tensor chunk header changed";
    return Acceptance::Refused;
  }
  const uint64_t total = *byte_length(want.dtype, want.shape);  // in range: chunk 0 was accepted
  const uint64_t chunks = chunk_count(total), offset = uint64_t{c.chunk} * kTensorChunkBytes;
  const uint64_t expect = std::min<uint64_t>(kTensorChunkBytes, total - std::min(total, offset));
  if (c.chunks != chunks || c.chunk >= chunks || c.bytes.size() != expect || c.proof.index != c.chunk ||
      c.proof.size != chunks ||
      !verify_inclusion(tensor_chunk_hash(want.dtype, std::as_bytes(std::span(c.bytes))), c.proof, c.chunk_root)) {
    why = "tensor chunk " + std::to_string(c.chunk) + " does not match its tensor's chunk root";
    return Acceptance::Refused;
  }
  // The tensor's memory is reserved once, at its first chunk, and each chunk is appended in place:
  // no reallocation, and pages are touched only as bytes arrive, so a stream that stops early costs
  // the referee only what it sent (docs/performance.md, "The light referee").
  const bool f32 = want.dtype == DType::F32;
  if (c.chunk == 0) f32 ? got.values.reserve(total / 4) : got.raw.reserve(total);
  got.chunk_root = c.chunk_root;
  f32 ? got.values.resize(got.values.size() + c.bytes.size() / 4) : got.raw.resize(got.raw.size() + c.bytes.size());
  if (!c.bytes.empty()) std::memcpy(got.data() + offset, c.bytes.data(), c.bytes.size());
  got.bytes += c.bytes.size();
  ++got.chunks;
  return Acceptance::Taken;
}

Acceptance InputOpening::accept(const Samples& s, std::string& why) {
  const ExpectedSamples& want = expected_samples_;
  if (samples_) {
    if (same_samples(s, *samples_)) return Acceptance::Redundant;
    why = "the opened samples are not the ones asked for";
    return Acceptance::Refused;
  }
  if (s.indices != want.rows || s.inputs.size() != s.indices.size() ||
      s.labels.size() != s.indices.size() || s.proofs.size() != s.indices.size()) {
    why = "the opened samples are not the ones asked for";
    return Acceptance::Refused;
  }
  const uint64_t label_values = want.label_width == 0 ? 1 : want.label_width;
  for (size_t i = 0; i < s.indices.size(); ++i)
    if (s.labels[i].size() != label_values) {
      why = "sample " + std::to_string(s.indices[i]) + " has " + std::to_string(s.labels[i].size()) +
            " label values, the job's data set has " + std::to_string(label_values);
      return Acceptance::Refused;
    }
  for (size_t i = 0; i < s.indices.size(); ++i)
    if (s.proofs[i].index != s.indices[i] || s.proofs[i].size != want.dataset_samples ||
        !verify_inclusion(sample_leaf(s.inputs[i], s.labels[i], want.label_width), s.proofs[i], want.dataset_root)) {
      why = "sample " + std::to_string(s.indices[i]) + " is not in the job's data set";
      return Acceptance::Refused;
    }
  samples_ = s;
  return Acceptance::Taken;
}

bool InputOpening::complete() const {
  if (expected_samples_.needed && !samples_) return false;
  for (size_t v = 0; v < expected_.size(); ++v)
    if (received_[v].chunks == 0 || received_[v].bytes != *byte_length(expected_[v].dtype, expected_[v].shape))
      return false;
  return true;
}

void InputOpening::restart() {
  received_.assign(expected_.size(), {});
  samples_.reset();
}

uint64_t InputOpening::bytes_held() const {
  uint64_t n = 0;
  for (const Received& r : received_) n += r.bytes;
  return n;
}

OpenedInputs InputOpening::take() {
  OpenedInputs out;
  for (size_t v = 0; v < expected_.size(); ++v)
    out.tensors.push_back({expected_[v].shape, std::move(received_[v].values), std::move(received_[v].raw)});
  out.samples = std::move(samples_);
  restart();
  return out;
}

}  // namespace tribunal
