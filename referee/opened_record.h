// What a durable referee records in place of a located node's opened inputs (docs/protocol.md,
// "Resuming"): the re-execution's outcome, which replays to the same verdict without the opened bytes,
// and a summary of the opened tensors for the dispute's report. An opening is most of the bytes a
// dispute receives (38 MB for an AdamW update at GPT-2-small dimensions), and journaling it cost more
// than the referee's own work on it (docs/performance.md, "A durable referee's journal"); once the node
// is re-executed the bytes decide nothing more.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "protocol/game.h"

namespace tribunal {

/// What the report shows of the located node's opened inputs, derived by the referee.
struct OpenedSummary {
  uint64_t node = 0;  ///< the located node (step graph index)
  /// The first elements of an opened tensor, from its first chunk, and the party that sent that chunk
  /// (the inputs are agreed, so each chunk is taken from whichever party sends it first).
  struct First {
    int party = 0;
    uint32_t value = 0;  ///< index in the OpenInputs question's `values`
    std::vector<int64_t> shape;
    std::vector<float> values;  ///< at most kFirstElements
    bool operator==(const First&) const = default;
  };
  std::vector<First> first;  ///< in the order the chunks were taken
  /// One tensor input of the node, whole, as it was re-executed: its finite elements' minimum, maximum
  /// and mean (NaN when none is finite) and how many are not finite.
  struct Whole {
    uint32_t input = 0;  ///< the node's input index (Data and Constant inputs have none)
    std::vector<int64_t> shape;
    uint64_t elements = 0;
    double min = 0, max = 0, mean = 0;
    uint64_t non_finite = 0;
    bool operator==(const Whole&) const = default;
  };
  std::vector<Whole> whole;
  bool operator==(const OpenedSummary&) const = default;

  static constexpr size_t kFirstElements = 6;
};

/// The Whole entry of every tensor input of `rx` (one pass over its values).
std::vector<OpenedSummary::Whole> whole_inputs(const Reexecute& rx);

/// The first elements of an opened chunk's float32 little-endian bytes (docs/commitments.md).
std::vector<float> first_elements(std::span<const uint8_t> bytes);

/// How the referee's re-execution of the located node ended: what the game was told and the events it
/// emitted, so that replaying them decides the same verdict (RefereeDispute::replay).
struct ReexecutionOutcome {
  enum class Kind : uint8_t {
    Outputs = 1,  ///< Game::on_reexecuted(outputs)
    Refused = 2,  ///< the op refused the committed inputs: Game::on_reexecuted with no outputs
    Failed = 3,   ///< the referee's own failure: Game::on_reexecution_failed(failure)
  };
  Kind kind = Kind::Outputs;
  std::array<PartyReexecution, 2> outputs;  ///< Outputs only
  std::string failure;                      ///< Failed only
  std::vector<std::string> events;          ///< the event texts, in order
};

/// The record of a re-executed opening: DisputeInput::Kind::Opened's bytes.
struct OpenedRecord {
  OpenedSummary summary;
  ReexecutionOutcome outcome;
};

/// Canonical bytes: the fields in declaration order in the encoding of protocol/codec.h (f32 and f64
/// as their bits, a string as u32 length + bytes, a vector as u32 count + elements).
std::vector<uint8_t> encode_opened_record(const OpenedRecord& record);
/// Strict inverse of encode_opened_record; throws WireError naming the field and offset.
OpenedRecord decode_opened_record(std::span<const uint8_t> bytes);

}  // namespace tribunal
