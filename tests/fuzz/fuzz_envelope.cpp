// libFuzzer target: open_envelope on arbitrary bytes never crashes (without a valid Ed25519
// signature nothing can open, so this exercises every check before and around the signature).
#include <cstdint>

#include "protocol/wire.h"

using namespace tribunal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const Envelope env = open_envelope(std::span<const uint8_t>(data, size));
    (void)env;
  } catch (const ProtocolError&) {
  }
  return 0;
}
