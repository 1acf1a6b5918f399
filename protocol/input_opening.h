// The referee's side of an OpenInputs round (docs/protocol.md, "The game", Decision): the located
// node's input tensors arrive as TensorChunk streams (frames of up to kMaxFrameChunks consecutive
// chunks, protocol/tensor_frames.h) and its data-set rows as one Samples message; InputOpening checks
// each piece against what both parties committed to and reassembles the tensors. Sans-I/O like the
// game that owns it (protocol/game.h).
//
// Both parties are asked, and both stream into the one opening: the inputs are the same committed
// bytes whoever sends them, so each chunk is checked and kept once, from whichever party sends it
// first. The same chunks again (from either party) are redundant: compared with the bytes held (no
// hashing), not kept, not held against anyone.
//
// Only a false signed statement is evidence (docs/protocol.md, "Lost frames"): chunks are reassembled
// by their index, in any order, so a frame that never came, came late, twice or out of order is never
// held against anyone — its chunks are missing(), and the game asks for them again. A frame is refused
// (evidence against its sender) only when it fails its own proof under the committed tensor leaf: its
// header (shape, chunk count, chunk root) does not hash to the leaf, its shape is not the value's
// shape in the job's graph (at most kMaxOpenedElements elements), or its bytes are not its run of the
// tensor with a range proof under the chunk root. All of it is checked before any byte is kept, so
// the referee's memory follows from the job's graph, not from the sender.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "protocol/chunk_check.h"
#include "protocol/hash.h"
#include "protocol/messages.h"
#include "protocol/tensor_hash.h"

namespace tribunal {

/// The data-set rows a node reads, and the data set they must be proven against.
struct ExpectedSamples {
  bool needed = false;         ///< the node has a Data input: the opening is complete only with them
  std::vector<uint64_t> rows;  ///< the node's gather indices (NodeSpec.data_rows), in order
  Digest dataset_root{};
  uint64_t dataset_samples = 0;  ///< N, the size of the tree under dataset_root
  uint64_t label_width = 0;      ///< 0: one class id per sample; L: L label values per sample
};

/// A reassembled tensor: its shape and float32 values (row-major, the bytes as sent, little-endian);
/// for a DType::Trits tensor `values` is empty and `bytes` holds its packed trits.
struct OpenedTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::vector<uint8_t> bytes;
  /// The element of the whole tensor that `values` starts at: 0, or for an opening of some chunks
  /// (ExpectedTensor::first_chunk) the first chunk's first element; `values` ends with the last chunk
  /// wanted.
  uint64_t first_element = 0;
};

/// Everything an OpenInputs round delivered.
struct OpenedInputs {
  std::vector<OpenedTensor> tensors;  ///< in the order asked for (the query's `values`)
  std::optional<Samples> samples;     ///< the accepted Samples message, if one came
};

/// What InputOpening::accept did with a piece of the opening.
enum class Acceptance : uint8_t {
  Taken,      ///< checked and kept: a piece the opening still needed
  Redundant,  ///< the very bytes already received (from either party): ignored, no evidence
  Ignored,    ///< names no piece of this opening (a value index beyond the question): no evidence
  Refused,    ///< fails its own proof under the committed tensor leaf or data-set root: evidence
};

/// Receives one OpenInputs round from both parties. accept() refuses (Refused, with the reason in
/// `why`, state unchanged) anything that does not match the commitments; a refusal is evidence against
/// the sender (the game's bad_proof).
class InputOpening {
 public:
  /// Waits for nothing: complete at once.
  InputOpening() = default;
  /// Waits for `tensors` (TensorChunk.value indexes this list) and the rows of `samples`.
  InputOpening(std::vector<ExpectedTensor> tensors, ExpectedSamples samples);

  /// Checks the run of chunks [frame.chunk, frame.chunk + frame.count) of tensor `frame.value` on its
  /// range proof and keeps those not held yet, whatever the order of arrival (see the file comment for
  /// the rules). A frame whose chunks are all held with the same bytes is Redundant; one with no chunk
  /// the tensor's ExpectedTensor wants is Ignored (unchecked: it asks nothing of the opening), and of a
  /// run that overlaps the wanted chunks only those are kept.
  Acceptance accept(const TensorChunk& frame, std::string& why);
  /// Checks and keeps the samples: exactly the rows asked for, in order, each with the data set's
  /// label width and an inclusion proof against dataset_root. Once samples were taken, the same
  /// samples again are redundant and others refused.
  Acceptance accept(const Samples& samples, std::string& why);

  /// True once every tensor has all its chunks and, when needed, the samples have come.
  bool complete() const;
  /// The chunks not received yet that a provider streams before chunk `before_chunk` of value
  /// `before_value` (by default: all), as at most `max_ranges` ranges in (value, chunk) order.
  std::vector<ChunkRange> missing(size_t max_ranges, uint32_t before_value = UINT32_MAX,
                                  uint32_t before_chunk = 0) const;
  /// The number of tensors asked for.
  size_t expected_values() const { return expected_.size(); }
  /// Whether the samples are still wanted.
  bool samples_missing() const { return expected_samples_.needed && !samples_; }
  /// Whether a piece that a provider streams before chunk `chunk` of value `value` is still missing
  /// (providers stream values in order, each chunk 0 to n − 1, then the samples: value = the tensor
  /// count, chunk 0). A party whose stream skipped a piece has lost a frame on the way.
  bool missing_before(uint32_t value, uint32_t chunk) const;
  /// Forgets everything received (the question is asked again and the stream restarts whole).
  void restart();
  /// Tensor bytes accepted so far, across all tensors.
  uint64_t bytes_held() const;
  /// Moves out what was received (call once complete()); the opening then holds no tensor data.
  OpenedInputs take();

 private:
  struct Received {
    bool header = false;      // a chunk was accepted: chunk_root, `taken`, first and end are set
    Digest chunk_root{};      // of the committed tensor (its header hashes to the tensor leaf)
    std::vector<bool> taken;  // per chunk
    uint32_t first = 0;       // the chunks wanted: [first, end) (ExpectedTensor, clamped)
    uint32_t end = 0;
    uint32_t prefix = 0;        // chunks [first, prefix) are in place in values/raw
    uint64_t bytes = 0;         // bytes accepted so far (in place and pending)
    std::vector<float> values;  // F32: reserved at the first chunk from the checked shape, filled in order
    std::vector<uint8_t> raw;   // Trits: the same, as bytes
    std::map<uint32_t, std::vector<uint8_t>>
        pending;  // accepted chunks beyond the prefix, until it reaches them
    uint8_t* data(bool f32) { return f32 ? reinterpret_cast<uint8_t*>(values.data()) : raw.data(); }
    const uint8_t* data(bool f32) const {
      return f32 ? reinterpret_cast<const uint8_t*>(values.data()) : raw.data();
    }
  };
  void append(const ExpectedTensor& want, Received& got, std::span<const uint8_t> bytes);

  std::vector<ExpectedTensor> expected_;
  ExpectedSamples expected_samples_;
  std::vector<Received> received_;
  std::optional<Samples> samples_;
};

}  // namespace tribunal
