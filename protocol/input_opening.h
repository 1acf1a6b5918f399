// The referee's side of an OpenInputs round (docs/protocol.md, "The game", Decision): the located
// node's input tensors arrive as TensorChunk streams and its data-set rows as one Samples message;
// InputOpening checks each piece against what both parties committed to and reassembles the tensors.
// Sans-I/O like the game that owns it (protocol/game.h).
//
// Both parties are asked, and both stream into the one opening: the inputs are the same committed
// bytes whoever sends them, so each chunk is checked and kept once, from whichever party sends it
// first. The same chunk from the other party is redundant: compared with the bytes held (no hashing),
// not kept, not held against anyone; a chunk already taken whose bytes differ is refused, as it could
// not pass its proof. Each party streams in order, 0 to n − 1, so a chunk is the next one the opening
// needs, an earlier one (redundant or refused), or out of order. Chunk 0 carries the header: its shape must be the
// value's shape in the job's graph, at most kMaxOpenedElements elements, and (shape, byte length,
// chunk root) must hash to the committed tensor leaf (docs/commitments.md) — all checked before any byte
// is kept, so the referee's memory follows from the job's graph, not from the sender. Every chunk then
// has exactly its share of kTensorChunkBytes and an inclusion proof under that chunk root.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/hash.h"
#include "protocol/messages.h"
#include "protocol/tensor_hash.h"

namespace tribunal {

/// The most elements an opened tensor may have (2^40: 4 TiB of float32; the job's graph sets the
/// actual size).
inline constexpr uint64_t kMaxOpenedElements = uint64_t{1} << 40;

/// One tensor the referee waits for: the value's shape in the job's graph ([] for a scalar) and the
/// tensor leaf (tensor_hash.h) both parties' records give it. `dtype` Trits: a node's rounding log
/// (shape [count], ⌈count / 5⌉ bytes), opened by one party only (docs/protocol.md, "Rounding-log jobs").
struct ExpectedTensor {
  std::vector<int64_t> shape;
  Digest hash{};
  DType dtype = DType::F32;
};

/// The data-set rows a node reads, and the data set they must be proven against.
struct ExpectedSamples {
  bool needed = false;           ///< the node has a Data input: the opening is complete only with them
  std::vector<uint64_t> rows;    ///< the node's gather indices (NodeSpec.data_rows), in order
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
};

/// Everything an OpenInputs round delivered.
struct OpenedInputs {
  std::vector<OpenedTensor> tensors;  ///< in the order asked for (the query's `values`)
  std::optional<Samples> samples;     ///< the accepted Samples message, if one came
};

/// What InputOpening::accept did with a piece of the opening.
enum class Acceptance : uint8_t {
  Taken,      ///< checked and kept: it was the next piece the opening needed
  Redundant,  ///< the very bytes already received (from either party): ignored, no evidence
  Refused,    ///< does not match the commitments or comes out of order: evidence against its sender
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

  /// Checks and keeps the next chunk of tensor `chunk.value` (see the file comment for the rules).
  Acceptance accept(const TensorChunk& chunk, std::string& why);
  /// Checks and keeps the samples: exactly the rows asked for, in order, each with the data set's
  /// label width and an inclusion proof against dataset_root. Once samples were taken, the same
  /// samples again are redundant and others refused.
  Acceptance accept(const Samples& samples, std::string& why);

  /// True once every tensor has all its chunks and, when needed, the samples have come.
  bool complete() const;
  /// Forgets everything received (the question is asked again and the stream restarts whole).
  void restart();
  /// Tensor bytes accepted so far, across all tensors.
  uint64_t bytes_held() const;
  /// Moves out what was received (call once complete()); the opening then holds no tensor data.
  OpenedInputs take();

 private:
  struct Received {
    uint32_t chunks = 0;    // chunks accepted so far
    uint64_t bytes = 0;     // bytes accepted so far
    Digest chunk_root{};    // from chunk 0
    std::vector<float> values;  // F32: sized at chunk 0 from the checked shape, filled chunk by chunk
    std::vector<uint8_t> raw;   // Trits: the same, as bytes
    uint8_t* data() { return raw.empty() ? reinterpret_cast<uint8_t*>(values.data()) : raw.data(); }
    const uint8_t* data() const { return raw.empty() ? reinterpret_cast<const uint8_t*>(values.data()) : raw.data(); }
  };

  std::vector<ExpectedTensor> expected_;
  ExpectedSamples expected_samples_;
  std::vector<Received> received_;
  std::optional<Samples> samples_;
};

}  // namespace tribunal
