// libFuzzer target: the body decoder of every message kind must refuse or accept any bytes without
// crashing, and whatever it accepts must re-encode to exactly the same bytes (one encoding per message).
#include <cstdint>
#include <cstdlib>

#include "protocol/wire.h"

using namespace tribunal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto kind = static_cast<MessageKind>(data[0] % 14 + 1);
  const std::span<const uint8_t> body(data + 1, size - 1);
  try {
    const Body decoded = decode_body(kind, body);
    if (kind_of(decoded) != kind) std::abort();
    const std::vector<uint8_t> again = encode_body(decoded);
    if (again.size() != body.size() || !std::equal(again.begin(), again.end(), body.begin())) std::abort();
  } catch (const WireError&) {
  }
  return 0;
}
