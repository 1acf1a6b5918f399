// Node record hashing (protocol/messages.h; docs/protocol.md).
#include "protocol/messages.h"

#include <limits>
#include <string>

namespace tribunal {
namespace {

// Hasher has no u32 helper; the record uses u32 lengths so that its layout matches the wire encoding.
void update_u32(Hasher& h, size_t v, const char* what) {
  if (v > std::numeric_limits<uint32_t>::max()) {
    throw ProtocolError(std::string("node_record_hash: ") + what + " count " + std::to_string(v) +
                        " does not fit in u32");
  }
  uint8_t le[4];
  for (int i = 0; i < 4; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
  h.update(std::span<const uint8_t>(le, 4));
}

}  // namespace

Digest node_record_hash(const NodeRecord& record) {
  Hasher h(HashTag::NodeRecord);
  h.update_u8(record.op);
  update_u32(h, record.attrs.size(), "attrs");
  h.update(std::span<const uint8_t>(record.attrs));
  // The counts make the split between inputs and outputs unambiguous: without them, (2 inputs,
  // 1 output) and (1 input, 2 outputs) with the same digests would hash alike.
  update_u32(h, record.inputs.size(), "inputs");
  for (const Digest& d : record.inputs) h.update(d);
  update_u32(h, record.outputs.size(), "outputs");
  for (const Digest& d : record.outputs) h.update(d);
  return h.final();
}

const char* reason_name(VerdictReason reason) {
  switch (reason) {
    case VerdictReason::WrongOutput:
      return "wrong_output";
    case VerdictReason::InconsistentInput:
      return "inconsistent_input";
    case VerdictReason::BadProof:
      return "bad_proof";
    case VerdictReason::Timeout:
      return "timeout";
    case VerdictReason::Equivocation:
      return "equivocation";
    case VerdictReason::WrongInitialState:
      return "wrong_initial_state";
    case VerdictReason::WrongPostState:
      return "wrong_post_state";
    case VerdictReason::RefereeFault:
      return "referee_fault";
    case VerdictReason::BadRoundingLog:
      return "bad_rounding_log";
    case VerdictReason::BothValid:
      return "both_valid";
  }
  return "unknown";
}

}  // namespace tribunal
