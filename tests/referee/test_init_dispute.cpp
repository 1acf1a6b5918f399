// A dispute about a job that starts from pretrained weights (model.init, engine/init_weights.h), over
// signed envelopes in process: the referee derives state 0 from the weights registered with it, so a
// corrupted node and wrong initial weights are located as for any job; a referee without the weights,
// or with other bytes under their name, refuses the opening; a verdict checks only with the weights.
#include <doctest/doctest.h>

#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dispute/provider_session.h"
#include "engine/model.h"
#include "engine/safetensors.h"
#include "engine/state.h"
#include "referee/local_dispute.h"
#include "referee/referee_dispute.h"
#include "tests/dispute/dispute_fixture.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

using testing::Provider;
using testing::TempDir;
using testing::train_set;

// The short MLP's job text with model.init = "pre".
std::string init_job_text() {
  std::string text = testing::read_text(testing::source_dir() / "scenarios/jobs/short_mlp.toml");
  text.replace(text.find("kind = \"mlp\""), 12, "kind = \"mlp\"\ninit = \"pre\"");
  return text;
}

// Weights "pre": the final parameters of an honest run of the short job, written to `file`.
void write_pretrained(const std::filesystem::path& file) {
  const Provider run(Fault{});
  ThreadPool pool(2);
  const JobSpec& job = run.job;
  const State last =
      load_checkpoint(checkpoint_path(run.store.path, run.result.steps), job, run.result.job_id, pool);
  const std::vector<ParamSpec> params = model_params(job.model);
  std::vector<NamedTensor> named;
  for (size_t p = 0; p < params.size(); ++p) named.push_back({params[p].name, &last.tensors[p]});
  write_safetensors(file, named, {});
}

struct Signed {
  KeyPair key = generate_keypair();
  std::unique_ptr<Provider> provider;
  std::vector<uint8_t> claim;
  Signed(const Fault& f, const JobSpec& job) : provider(std::make_unique<Provider>(f, job)) {
    Claim c = provider->claim();
    c.endpoint = "ws://provider.invalid/";
    claim = seal(key, provider->result.job_id, 1, c);
  }
};

DisputeOpen open_body(const Signed& a, const Signed& b) {
  const DataShape shape = testing::data_shape();
  DisputeOpen d;
  d.job_toml = init_job_text();
  d.dataset_root = train_set().root;
  d.dataset_samples = static_cast<uint64_t>(shape.samples);
  d.features = static_cast<uint64_t>(shape.features);
  d.classes = static_cast<uint64_t>(shape.classes);
  d.claims = {a.claim, b.claim};
  return d;
}

// Plays the dispute between a (party 0) and b (party 1) before a referee holding `weights`.
std::vector<uint8_t> play(const KeyPair& referee_key, const DataRegistry& weights, const JobSpec& job,
                          const Signed& a, const Signed& b) {
  const KeyPair client = generate_keypair();
  const DisputeOpen d = open_body(a, b);
  DisputeOptions options;
  options.weights = weights;
  RefereeDispute referee(referee_key, open_envelope(seal(client, dispute_id(d), 1, d)), options);
  ThreadPool pool(1);
  std::array<std::unique_ptr<ProviderDisputeSession>, 2> sessions;
  const std::array<const Signed*, 2> parties{&a, &b};
  std::array<LocalParty, 2> local;
  for (int p = 0; p < 2; ++p)
    local[static_cast<size_t>(p)] = [&, p](const Envelope& env) -> std::vector<std::vector<uint8_t>> {
      auto& session = sessions[static_cast<size_t>(p)];
      if (env.kind != MessageKind::DisputeOpen) return session->on_envelope(env);
      const Signed& s = *parties[static_cast<size_t>(p)];
      session = std::make_unique<ProviderDisputeSession>(s.key, env, job, train_set(), s.provider->store.path,
                                                         pool, std::vector<PublicKey>{referee_key.public_key},
                                                         fault_policy(s.provider->fault));
      return {};
    };
  const LocalRun run = play_local(referee, local);
  CHECK(run.refused.empty());
  REQUIRE(referee.done());
  return run.verdict;
}

}  // namespace

TEST_CASE("a dispute about a job started from pretrained weights locates the cheat") {
  TempDir dir("initdispute");
  const auto file = dir.path / "pre.safetensors";
  write_pretrained(file);
  DataRegistry weights;
  weights.add_weights("pre", file);
  JobSpec job = parse_job(init_job_text(), "ft.toml");
  locate_data(job, [&] {
    DataRegistry r = DataRegistry::debian();
    r.add_weights("pre", file);
    return r;
  }());
  const KeyPair referee_key = generate_keypair();

  const Signed honest(Fault{}, job);
  CHECK(honest.provider->result.job_id != Provider(Fault{}).result.job_id);
  Fault corrupt;
  corrupt.step = 13;
  corrupt.node = 2;
  corrupt.delta = 10.0f;
  const Signed cheater(corrupt, job);

  SUBCASE("a corrupted node output") {
    const std::vector<uint8_t> bytes = play(referee_key, weights, job, cheater, honest);
    const Verdict v = verify_verdict(bytes, referee_key.public_key, &weights);
    CHECK(v.losers == std::vector<uint8_t>{0});
    CHECK(v.winners == std::vector<uint8_t>{1});
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.step == 13);
    CHECK(v.node == 2);
    // Checking the verdict needs the weights: their hash is in the job id.
    CHECK_THROWS_WITH_AS(verify_verdict(bytes, referee_key.public_key),
                         doctest::Contains("starts from the weights 'pre' (model.init)"), ProtocolError);
  }
  SUBCASE("wrong initial weights lose at the first checkpoint") {
    Fault f;
    f.init_delta = 0.01f;
    const Signed wrong(f, job);
    const Verdict v =
        verify_verdict(play(referee_key, weights, job, honest, wrong), referee_key.public_key, &weights);
    CHECK(v.losers == std::vector<uint8_t>{1});
    CHECK(v.reason == VerdictReason::WrongInitialState);
    CHECK(v.level == Level::Checkpoints);
  }
  SUBCASE("a referee without the weights, or with other bytes under their name, refuses the opening") {
    const KeyPair client = generate_keypair();
    const DisputeOpen d = open_body(cheater, honest);
    const Envelope open = open_envelope(seal(client, dispute_id(d), 1, d));
    CHECK_THROWS_WITH_AS(RefereeDispute(referee_key, open, DisputeOptions{}),
                         doctest::Contains("weights 'pre' (model.init) are not registered at this node"),
                         EngineError);
    std::string bytes = testing::read_text(file);
    bytes[bytes.size() - 1] = static_cast<char>(bytes[bytes.size() - 1] ^ 1);
    testing::write_text(dir.path / "other.safetensors", bytes);
    DisputeOptions other;
    other.weights.add_weights("pre", dir.path / "other.safetensors");
    CHECK_THROWS_WITH_AS(RefereeDispute(referee_key, open, other),
                         doctest::Contains("claim 0 is not for the job and data set the opening describes"),
                         ProtocolError);
  }
}
