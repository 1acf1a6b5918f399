// A provider of the short job (tests/engine/dispute_fixture.h) with an Ed25519 key and its signed
// Claim envelope, for the referee's tests over signed envelopes.
#pragma once

#include "protocol/wire.h"
#include "tests/engine/dispute_fixture.h"

namespace tribunal::testing {

struct SignedProvider : Provider {
  KeyPair key = generate_keypair();
  std::vector<uint8_t> signed_claim;  ///< the Claim envelope, signed by `key`
  explicit SignedProvider(const Fault& f) : Provider(f), signed_claim(seal(key, result.job_id, 1, claim())) {}
};

}  // namespace tribunal::testing
