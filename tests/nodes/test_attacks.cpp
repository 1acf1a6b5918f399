// Attacks on the real nodes over loopback WebSockets (docs/protocol.md, "Threat model"), each one
// reproduced as an attacker would run it and shown to fail: reading a provider's files through a job,
// making a provider answer an untrusted "referee", choosing what the game trusts in an opening,
// redirecting a provider's endpoint, forging a verdict, a referee failure that would convict, and
// submitting jobs the operator did not agree to.
#include <doctest/doctest.h>

#include <new>

#include "engine/dataset.h"
#include "engine/error.h"
#include "nodes/key_file.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cli;
using testing::Network;
using testing::RawPeer;
using testing::read_text;

namespace {

Fault corrupt(int64_t step, int64_t node) {
  Fault f;
  f.step = step;
  f.node = node;
  f.delta = 10.0f;
  return f;
}

// The short job's id, as anyone with the public data set computes it.
Digest short_job_id() {
  ThreadPool pool(1);
  const JobSpec job = load_job(testing::kShortJob);
  return job_id(job, *shared_train_set(job, pool));
}

bool contains(const std::vector<std::vector<uint8_t>>& messages, const std::string& needle) {
  for (const auto& m : messages)
    if (std::string(m.begin(), m.end()).find(needle) != std::string::npos) return true;
  return false;
}

// A small GPT job whose data set is given by `data_lines` (the proof of concept).
std::string gpt_job(const std::string& data_lines) {
  return "[model]\nkind = \"gpt\"\ncontext = 8\nlayers = 1\nheads = 1\nd_model = 4\n[data]\ndataset = \"text\"\n" +
         data_lines + "\nvalidation = 0.0\n[train]\nsteps = 1\nbatch_size = 1\nstride = 1\n[optimizer]\n";
}

RefereeOptions answering_within(std::chrono::milliseconds deadline) {
  RefereeOptions o;
  o.answer_timeout_ms = static_cast<uint64_t>(deadline.count());
  return o;
}

RefereeOptions reexecution_failing(std::function<void(int)> hook) {
  RefereeOptions o;
  o.reexecute_hook = std::move(hook);
  return o;
}

}  // namespace

TEST_CASE("attack: a job that names the provider's key file reads nothing") {
  Network net;
  const KeyPair provider_key = generate_keypair();
  const auto key_file = net.dir.path / "provider.key";
  save_keypair(key_file, provider_key);
  const std::string secret_line = read_text(key_file).substr(read_text(key_file).find('\n') + 1, 64);
  const std::string url = net.provider(net.config(), provider_key);
  const KeyPair attacker = generate_keypair();

  // The job's data path pointing at the key, absolute or relative: refused before anything is read.
  for (const std::string& data : {"path = \"" + key_file.string() + "\"", std::string("path = \"provider.key\""),
                                  std::string("dir = \"/root\"")}) {
    CAPTURE(data);
    RawPeer peer(net.ctx, url);
    peer.send(seal(attacker, Digest{}, 1, JobSubmit{gpt_job(data)}));
    const std::string error = peer.error();
    CHECK(error.find("a job names its data set (data.name), never a path") != std::string::npos);
    CHECK_FALSE(contains(peer.until_closed(), secret_line));
  }
  // A name the operator did not register: refused without saying what is registered or where.
  RawPeer peer(net.ctx, url);
  peer.send(seal(attacker, Digest{}, 1, JobSubmit{gpt_job("name = \"provider.key\"")}));
  CHECK(peer.error() == "submitted job: data set 'provider.key' is not registered at this node (its operator registers "
                        "data sets with --dataset NAME=PATH)");
  CHECK_FALSE(contains(peer.until_closed(), secret_line));
}

TEST_CASE("attack: a wrong job id is refused without telling the real one") {
  Network net;
  const std::string url = net.provider(Fault{});
  RawPeer peer(net.ctx, url);
  peer.send(seal(generate_keypair(), Digest{}, 1, JobSubmit{read_text(testing::kShortJob)}));
  CHECK(peer.error() == "the submitted job's id is not the one it was sent under");
  CHECK_FALSE(contains(peer.until_closed(), to_hex(short_job_id())));
}

TEST_CASE("attack: a provider answers no query from a key it does not trust as a referee") {
  Network net;
  const std::string url = net.provider(Fault{});
  const Digest id = short_job_id();
  const KeyPair attacker = generate_keypair();
  // Anyone may submit the public job and get the provider's signed claim ...
  RawPeer submitter(net.ctx, url);
  submitter.send(seal(attacker, id, 1, JobSubmit{read_text(testing::kShortJob)}));
  const std::vector<uint8_t> honest_claim = submitter.first(MessageKind::Claim);
  // ... and open a dispute of it against a throwaway claim, then ask for the inputs of step 0.
  const Claim c = std::get<Claim>(open_envelope(honest_claim).body);
  DisputeOpen d;
  d.job_toml = read_text(testing::kShortJob);
  ThreadPool pool(1);
  const JobSpec job = load_job(testing::kShortJob);
  const DataShape shape = data_shape_of(*shared_train_set(job, pool));
  d.dataset_root = shared_train_set(job, pool)->root;
  d.dataset_samples = static_cast<uint64_t>(shape.samples);
  d.features = static_cast<uint64_t>(shape.features);
  d.classes = static_cast<uint64_t>(shape.classes);
  d.claims = {honest_claim, seal(attacker, id, 1, Claim{id, c.steps, Digest{}, Digest{}, "ws://attacker.invalid/"})};
  const Digest dispute = dispute_id(d);
  Query q;
  q.round = 1;
  q.kind = QueryKind::OpenInputs;
  q.step = 0;
  q.indices = {0, 1, 2};
  RawPeer peer(net.ctx, url);
  peer.send(seal(attacker, dispute, 1, d));
  peer.send(seal(attacker, dispute, 2, q));
  const CloseInfo closed = peer.close_info();
  CHECK(closed.code == CloseCode::PolicyViolation);
  CHECK(closed.reason == "query signed by a key that is not a trusted referee");
  CHECK(peer.until_closed().empty());  // no Samples, no TensorChunk, nothing
}

TEST_CASE("attack: the opener cannot choose the initial state; a later opening of the same claims gets the same verdict") {
  Network net;
  Fault fake_start;
  fake_start.init_delta = 0.05f;  // its trajectory's leaf 0 is its own state, not the job's
  const std::string attacker = net.provider(fake_start);
  const std::string honest = net.provider(Fault{});
  // The attacker opens the dispute itself: nothing in the opening says what state_hash(0) is.
  const DelegateOutcome o = net.delegate({attacker, honest});
  REQUIRE(o.verdicts.size() == 1);
  const Verdict v = net.verify(o.verdicts[0]);
  CHECK(v.reason == VerdictReason::WrongInitialState);
  CHECK(v.losers == std::vector<uint8_t>{0});
  CHECK(v.winners == std::vector<uint8_t>{1});
  // The honest client opens the same dispute later: it gets that verdict, which is the right one.
  const Envelope again = await_verdict(net.ctx, net.referee_url, net.referee_key.public_key,
                                       seal(generate_keypair(), v.dispute_id, 1, v.opening), [](const std::string&) {});
  CHECK(again.bytes == o.verdicts[0]);
}

TEST_CASE("attack: a provider's endpoint cannot be redirected by the opener") {
  Network net(answering_within(std::chrono::milliseconds(1500)));
  const std::string cheater = net.provider(corrupt(14, 2));
  const std::string honest = net.provider(Fault{});
  const DelegateOutcome o = net.delegate({cheater, honest});
  REQUIRE(o.verdicts.size() == 1);
  const DisputeOpen opening = net.verify(o.verdicts[0]).opening;
  // Pointing the honest claim at an address that never answers breaks the provider's signature.
  DisputeOpen redirected = opening;
  std::vector<uint8_t>& claim = redirected.claims[1];
  const std::string port = honest.substr(honest.rfind(':') + 1, honest.size() - honest.rfind(':') - 2);
  const std::string needle = ":" + port + "/";
  auto at = std::search(claim.begin(), claim.end(), needle.begin(), needle.end());
  REQUIRE(at != claim.end());
  *(at + 1) = *(at + 1) == '1' ? '2' : '1';
  CHECK_THROWS_WITH_AS(await_verdict(net.ctx, net.referee_url, net.referee_key.public_key,
                                     seal(generate_keypair(), dispute_id(redirected), 1, redirected),
                                     [](const std::string&) {}),
                       doctest::Contains("Envelope.signature: does not verify"), EngineError);
  // An endpoint that never answers only hurts the provider that signed it.
  ProviderConfig silent = net.config(corrupt(14, 2));
  silent.endpoint = "ws://127.0.0.1:9/";
  const DelegateOutcome late = net.delegate({net.provider(std::move(silent)), honest});
  REQUIRE(late.verdicts.size() == 1);
  const Verdict v = net.verify(late.verdicts[0]);
  CHECK(v.reason == VerdictReason::Timeout);
  CHECK(v.losers == std::vector<uint8_t>{0});
  CHECK(late.accepted);
  CHECK(late.winner == 1);
}

TEST_CASE("attack: a verdict signed by another key than the pinned referee's is refused") {
  Network net;
  RefereeNode impostor(net.ctx, generate_keypair(), answering_within(std::chrono::milliseconds(500)), [](const std::string&) {},
                       loopback_policy());
  const std::string impostor_url = "ws://127.0.0.1:" + std::to_string(impostor.listen("127.0.0.1", 0)) + "/";
  DelegateRequest r = net.request({net.provider(corrupt(3, 2)), net.provider(Fault{})});
  r.referee = impostor_url;  // an on-path attacker answering for the referee
  CHECK_THROWS_WITH_AS(delegate_job(net.ctx, r, [](const std::string&) {}),
                       doctest::Contains("not by the referee's key"), ProtocolError);
}

TEST_CASE("attack: a failure inside re-execution convicts no one") {
  SUBCASE("every attempt fails: undecided") {
    Network net(reexecution_failing([](int) { throw std::bad_alloc(); }));
    const DelegateOutcome o = net.delegate({net.provider(corrupt(14, 2)), net.provider(Fault{})});
    REQUIRE(o.verdicts.size() == 1);
    const Verdict v = net.verify(o.verdicts[0]);
    CHECK(v.reason == VerdictReason::RefereeFault);
    CHECK(v.winners.empty());
    CHECK(v.losers.empty());
    CHECK(v.detail.find("std::bad_alloc") != std::string::npos);
    CHECK_FALSE(o.accepted);
    CHECK_FALSE(o.undecided.empty());
  }
  SUBCASE("a failed attempt is retried") {
    Network net(reexecution_failing([](int attempt) {
      if (attempt == 1) throw std::bad_alloc();
    }));
    const DelegateOutcome o = net.delegate({net.provider(corrupt(14, 2)), net.provider(Fault{})});
    REQUIRE(o.verdicts.size() == 1);
    const Verdict v = net.verify(o.verdicts[0]);
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.losers == std::vector<uint8_t>{0});
    CHECK(o.accepted);
    CHECK(o.winner == 1);
  }
}

TEST_CASE("attack: the referee connects to no address its policy refuses") {
  Network net(RefereeOptions{}, AddressPolicy::public_only());
  CHECK_THROWS_WITH_AS(net.delegate({net.provider(corrupt(3, 2)), net.provider(Fault{})}),
                       doctest::Contains("is a loopback address, which this referee does not connect to"), EngineError);
}

TEST_CASE("attack: a provider trains only for allowed clients and within its operator's limits") {
  Network net;
  const KeyPair client = generate_keypair();
  ProviderConfig c = net.config();
  c.clients = {client.public_key};
  c.limits.max_steps = 10;
  const std::string url = net.provider(std::move(c));
  const Digest id = short_job_id();
  {
    RawPeer stranger(net.ctx, url);
    stranger.send(seal(generate_keypair(), id, 1, JobSubmit{read_text(testing::kShortJob)}));
    CHECK(stranger.error() == "this provider does not train jobs for the client key that signed the JobSubmit");
  }
  RawPeer allowed(net.ctx, url);
  allowed.send(seal(client, id, 1, JobSubmit{read_text(testing::kShortJob)}));
  CHECK(allowed.error() == "the job has 30 steps; this provider trains at most 10");
}
