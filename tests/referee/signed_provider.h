// A provider of the short job (tests/engine/dispute_fixture.h) with an Ed25519 key and its signed
// Claim envelope, for the referee's tests over signed envelopes.
#pragma once

#include <array>
#include <fstream>
#include <sstream>
#include <string>

#include "protocol/wire.h"
#include "tests/engine/dispute_fixture.h"

namespace tribunal::testing {

struct SignedProvider : Provider {
  KeyPair key = generate_keypair();
  std::vector<uint8_t> signed_claim;  ///< the Claim envelope, signed by `key`
  explicit SignedProvider(const Fault& f) : Provider(f), signed_claim(seal(key, result.job_id, 1, claim())) {}
};

/// The client's DisputeOpen of the short job between `a` (party 0) and `b` (party 1), signed by
/// `client`; `urls` are the providers' addresses the opening names.
inline std::vector<uint8_t> dispute_opening(const KeyPair& client, const SignedProvider& a, const SignedProvider& b,
                                            const std::array<std::string, 2>& urls) {
  const JobSpec job = short_job();
  ThreadPool pool(1);
  std::ifstream in(std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/short_mlp.toml");
  std::stringstream text;
  text << in.rdbuf();
  const DataShape shape = data_shape();
  DisputeOpen d;
  d.job_toml = text.str();
  d.initial_state_hash = state_hash(initial_state(job), pool);
  d.dataset_root = train_set().root;
  d.dataset_samples = static_cast<uint64_t>(shape.samples);
  d.features = static_cast<uint64_t>(shape.features);
  d.classes = static_cast<uint64_t>(shape.classes);
  d.claims = {a.signed_claim, b.signed_claim};
  d.providers = {urls[0], urls[1]};
  return seal(client, dispute_id(a.result.job_id, d.claims), 1, d);
}

}  // namespace tribunal::testing
