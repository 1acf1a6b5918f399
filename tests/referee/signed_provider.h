// A provider of the short job (tests/dispute/dispute_fixture.h) with an Ed25519 key and its signed
// Claim envelope, for the referee's tests over signed envelopes.
#pragma once

#include <array>
#include <fstream>
#include <sstream>
#include <string>

#include "protocol/wire.h"
#include "tests/dispute/dispute_fixture.h"
#include "tests/source_dir.h"

namespace tribunal::testing {

struct SignedProvider : Provider {
  KeyPair key = generate_keypair();
  std::string job_file;               ///< the job, relative to the source tree
  std::vector<uint8_t> signed_claim;  ///< the Claim envelope, signed by `key`, naming `endpoint`
  /// Trains `job_file` (the short job unless given; it must use the short job's data set).
  explicit SignedProvider(const cheats::Fault& f, const std::string& endpoint = "ws://provider.invalid/",
                          const std::string& job = "scenarios/jobs/short_mlp.toml")
      : Provider(f, load_job(tribunal::testing::source_dir() / job)),
        job_file(job),
        signed_claim(seal(key, result.job_id, 1, with_endpoint(claim(), endpoint))) {}

 private:
  static Claim with_endpoint(Claim c, const std::string& endpoint) {
    c.endpoint = endpoint;
    return c;
  }
};

/// The DisputeOpen body of `a`'s job between `a` (party 0) and `b` (party 1).
inline DisputeOpen dispute_open_body(const SignedProvider& a, const SignedProvider& b) {
  std::ifstream in(tribunal::testing::source_dir() / a.job_file);
  std::stringstream text;
  text << in.rdbuf();
  const DataShape shape = data_shape();
  DisputeOpen d;
  d.job_toml = text.str();
  d.dataset_root = train_set().root;
  d.dataset_samples = static_cast<uint64_t>(shape.samples);
  d.features = static_cast<uint64_t>(shape.features);
  d.classes = static_cast<uint64_t>(shape.classes);
  d.claims = {a.signed_claim, b.signed_claim};
  return d;
}

/// That opening, signed by `client` and addressed to its dispute id.
inline std::vector<uint8_t> dispute_opening(const KeyPair& client, const SignedProvider& a,
                                            const SignedProvider& b) {
  const DisputeOpen d = dispute_open_body(a, b);
  return seal(client, dispute_id(d), 1, d);
}

}  // namespace tribunal::testing
