// The key an auditor requires of the trainer's logs (nodes/trainer_logs.h, trainer_claim_key): the
// signer of the trainer's claim the client forwarded, only when that claim is the trainer's claim of
// this job (docs/numerics.md, "Trainer and auditors"). The attack it closes runs through the real nodes in
// scenarios/suite/rlog_roles_throwaway_key.toml.
#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "engine/job.h"
#include "nodes/trainer_logs.h"
#include "protocol/envelope.h"

using namespace tribunal;

namespace {

const char* kTrainer = "ws://127.0.0.1:17102/";

JobSpec roles_job() {
  return parse_job(std::string("[model]\nkind = \"mlp\"\nwidths = [784, 32, 10]\n[train]\nsteps = 30\n"
                               "batch_size = 32\nstride = 8\n[optimizer]\nkind = \"adamw\"\nlr = "
                               "0.002\n[numerics]\nmode = \"rounding-log\"\ntrainer = \"") +
                       kTrainer + "\"\n",
                   "roles.toml");
}

Digest dg(uint8_t seed) {
  Digest d;
  d.fill(seed);
  return d;
}

std::string refusal(const std::vector<uint8_t>& claim, const JobSpec& job, const Digest& id) {
  try {
    nodes::trainer_claim_key(claim, job, id);
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("trainer_claim_key: the signer of the trainer's claim of this job, and nothing else") {
  const JobSpec job = roles_job();
  const Digest id = dg(7);
  const KeyPair trainer = generate_keypair();
  const Claim claim{id, 30, dg(1), dg(2), kTrainer};
  CHECK(nodes::trainer_claim_key(seal(trainer, id, 1, claim), job, id) == trainer.public_key);

  CHECK(refusal({}, job, id).find("the trainer's claim the client forwarded is missing") == 0);
  CHECK(refusal({1, 2, 3}, job, id).find("is not a signed envelope") != std::string::npos);
  std::vector<uint8_t> forged = seal(trainer, id, 1, claim);
  forged.back() ^= 1;  // the signature no longer verifies
  CHECK(refusal(forged, job, id).find("is not a signed envelope") != std::string::npos);
  CHECK(refusal(seal(trainer, id, 1, JobSubmit{"x", {}}), job, id).find("is not a Claim") !=
        std::string::npos);
  // Another job: by the envelope's context, or by the claim's job id.
  CHECK(refusal(seal(trainer, dg(8), 1, claim), job, id).find("for another job") != std::string::npos);
  Claim other = claim;
  other.job_id = dg(8);
  CHECK(refusal(seal(trainer, id, 1, other), job, id).find("for another job") != std::string::npos);
  other = claim;
  other.steps = 29;
  CHECK(refusal(seal(trainer, id, 1, other), job, id) ==
        "the trainer's claim the client forwarded is for 29 steps, the job has 30");
  // An auditor's claim (another endpoint) is not the trainer's.
  other = claim;
  other.endpoint = "ws://127.0.0.1:17103/";
  CHECK(refusal(seal(trainer, id, 1, other), job, id) ==
        "the trainer's claim the client forwarded signs the endpoint ws://127.0.0.1:17103/, not the job's "
        "trainer ws://127.0.0.1:17102/");
}
