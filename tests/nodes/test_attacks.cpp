// Attacks on the real nodes over loopback WebSockets (docs/protocol.md, "Threat model"), each one
// reproduced as an attacker would run it and shown to fail: reading a provider's files through a job,
// making a provider answer an untrusted "referee", choosing what the game trusts in an opening,
// redirecting a provider's endpoint, forging a verdict, a referee failure that would convict, and
// submitting jobs the operator did not agree to.
#include <doctest/doctest.h>

#include <new>
#include <thread>

#include "engine/dataset.h"
#include "engine/error.h"
#include "nodes/key_file.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using testing::corrupt;
using testing::Network;
using testing::RawPeer;
using testing::read_text;
using testing::TempDir;

namespace {

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
  return "[model]\nkind = \"gpt\"\ncontext = 8\nlayers = 1\nheads = 1\nd_model = 4\n[data]\ndataset = "
         "\"text\"\n" +
         data_lines + "\nvalidation = 0.0\n[train]\nsteps = 1\nbatch_size = 1\nstride = 1\n[optimizer]\n";
}

// An attacker's own dispute: two throwaway keys sign claims of `job_text` on Fashion-MNIST, each at a
// loopback port where nothing answers, so the dispute stays live until its answer deadline.
struct ForgedOpening {
  DisputeOpen opening;
  Digest id{};
};
ForgedOpening forged_opening(const std::string& job_text, uint8_t salt) {
  ThreadPool pool(1);
  JobSpec job = parse_job(job_text, "attacker job");
  locate_data(job, DataRegistry::debian());
  const auto train = shared_train_set(job, pool);
  const DataShape shape = data_shape_of(*train);
  const Digest jid = job_id(job, train->root, shape);
  ForgedOpening f;
  f.opening.job_toml = job_text;
  f.opening.dataset_root = train->root;
  f.opening.dataset_samples = static_cast<uint64_t>(shape.samples);
  f.opening.features = static_cast<uint64_t>(shape.features);
  f.opening.classes = static_cast<uint64_t>(shape.classes);
  for (uint8_t p = 0; p < 2; ++p) {
    Digest root{};
    root[0] = salt;
    root[1] = p;
    f.opening.claims.push_back(
        seal(generate_keypair(), jid, 1,
             Claim{jid, static_cast<uint64_t>(job.steps), root, root, "ws://127.0.0.1:9/"}));
  }
  f.id = dispute_id(f.opening);
  return f;
}

RefereeNodeOptions reexecution_failing(std::function<void(int)> hook) {
  RefereeNodeOptions o;
  o.dispute.reexecute_hook = std::move(hook);
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
  for (const std::string& data : {"path = \"" + key_file.string() + "\"",
                                  std::string("path = \"provider.key\""), std::string("dir = \"/root\"")}) {
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
  CHECK(peer.error() ==
        "submitted job: data set 'provider.key' is not registered at this node (its operator registers "
        "data sets with --dataset NAME=PATH)");
  CHECK_FALSE(contains(peer.until_closed(), secret_line));
}

TEST_CASE("a job starting from weights the provider does not hold is refused, naming them") {
  Network net;
  const std::string url = net.provider(Fault{});
  std::string job = read_text(testing::kShortJob);
  job.replace(job.find("kind = \"mlp\""), 12, "kind = \"mlp\"\ninit = \"pretrained-v1\"");
  RawPeer peer(net.ctx, url);
  peer.send(seal(generate_keypair(), Digest{}, 1, JobSubmit{job}));
  CHECK(peer.error() ==
        "submitted job: weights 'pretrained-v1' (model.init) are not registered at this node (its operator "
        "registers weights with --weights NAME=PATH)");
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
  d.claims = {honest_claim,
              seal(attacker, id, 1, Claim{id, c.steps, Digest{}, Digest{}, "ws://attacker.invalid/"})};
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

TEST_CASE(
    "attack: the opener cannot choose the initial state; a later opening of the same claims gets the same "
    "verdict") {
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
  // The honest client opens the same dispute later: it gets the same outcome, the right one (this
  // referee keeps no store, so the game is played again: only the clocks in the verdict differ).
  const Envelope again = await_verdict(net.ctx, net.referee_url, net.referee_key.public_key,
                                       seal(generate_keypair(), v.dispute_id, 1, v.opening), quiet_logger());
  const Verdict w = std::get<Verdict>(again.body);
  CHECK(w.dispute_id == v.dispute_id);
  CHECK(w.reason == v.reason);
  CHECK(w.losers == v.losers);
  CHECK(w.winners == v.winners);
}

TEST_CASE("attack: a provider's endpoint cannot be redirected by the opener") {
  Network net;
  net.use_terms("base_seconds = 1.5");
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
  CHECK_THROWS_WITH_AS(
      await_verdict(net.ctx, net.referee_url, net.referee_key.public_key,
                    seal(generate_keypair(), dispute_id(redirected), 1, redirected), quiet_logger()),
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
  net.use_terms("base_seconds = 0.5");
  RefereeNode impostor(net.ctx, generate_keypair(), RefereeNodeOptions{}, quiet_logger(), loopback_policy());
  const std::string impostor_url = "ws://127.0.0.1:" + std::to_string(impostor.listen("127.0.0.1", 0)) + "/";
  DelegateRequest r = net.request({net.provider(corrupt(3, 2)), net.provider(Fault{})});
  r.referee = impostor_url;  // an on-path attacker answering for the referee
  // The check before training finds it (nodes/delegate.h check_referee): it cannot sign the nonce
  // with the referee's key.
  const std::string pinned = "not the --referee-key " + to_hex(Digest(net.referee_key.public_key));
  CHECK_THROWS_WITH_AS(delegate_job(net.ctx, r, quiet_logger()), doctest::Contains(pinned.c_str()),
                       RefereeCheckError);
  // An attacker on the path of plain ws:// who lets the check through to the real referee and answers
  // the dispute itself: its verdict is refused too (await_verdict).
  r.referee = net.referee_url;
  const DelegateOutcome real = delegate_job(net.ctx, r, quiet_logger());
  REQUIRE(real.verdicts.size() == 1);
  const DisputeOpen opening = net.verify(real.verdicts[0]).opening;
  CHECK_THROWS_WITH_AS(await_verdict(net.ctx, impostor_url, net.referee_key.public_key,
                                     seal(r.client_key, dispute_id(opening), 1, opening), quiet_logger()),
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
  Network net(RefereeNodeOptions{}, AddressPolicy::public_only());
  CHECK_THROWS_WITH_AS(net.delegate({net.provider(corrupt(3, 2)), net.provider(Fault{})}),
                       doctest::Contains("is a loopback address, which this referee does not connect to"),
                       EngineError);
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
    CHECK(stranger.error() ==
          "this provider does not train jobs for the client key that signed the JobSubmit");
  }
  RawPeer allowed(net.ctx, url);
  allowed.send(seal(client, id, 1, JobSubmit{read_text(testing::kShortJob)}));
  CHECK(allowed.error() == "the job has 30 steps; this provider trains at most 10");
}

TEST_CASE(
    "attack: a fast-mode job, which no referee can settle, is neither trained for a client nor disputed") {
  // Fast mode's float32 kernels may differ between machines (docs/verifiers.md): a claim over such a
  // job could not be checked, and a referee re-executing it would convict an honest provider whose
  // kernel differs from its own.
  const std::string fast = read_text(testing::kShortJob) + "\n[numerics]\nmode = \"fast\"\n";
  Network net;
  const ForgedOpening f = forged_opening(fast, 1);
  {
    RawPeer client(net.ctx, net.provider(net.config()));
    client.send(seal(generate_keypair(), f.id, 1, JobSubmit{fast}));
    CHECK(client.error().find("submitted job: the job is in fast numerics mode") != std::string::npos);
  }
  RawPeer peer(net.ctx, net.referee_url);
  peer.send(seal(generate_keypair(), f.id, 1, f.opening));
  CHECK(peer.error().find("dispute job: the job is in fast numerics mode") != std::string::npos);
  CHECK(net.referee.live_disputes() == 0);
}

TEST_CASE("attack: an opening whose job would cost the referee too much is refused before anything is held") {
  Network net;
  // The chosen CNN: one re-execution of its first convolution takes seconds per 32 samples.
  const std::string heavy =
      "[model]\nkind = \"cnn\"\nchannels = [4096]\nkernel = 31\n[train]\nsteps = 1\n"
      "batch_size = 32\nstride = 1\n[optimizer]\n";
  const ForgedOpening f = forged_opening(heavy, 1);
  RawPeer peer(net.ctx, net.referee_url);
  peer.send(seal(generate_keypair(), f.id, 1, f.opening));
  const std::string error = peer.error();
  CHECK(error.find("re-execution work (conv2d") != std::string::npos);
  CHECK(error.find("beyond this referee's limit of 17179869184") != std::string::npos);
  CHECK(net.referee.live_disputes() == 0);
  // The shipped jobs stay within the default limits: their disputes are served.
  const DelegateOutcome o = net.delegate({net.provider(corrupt(14, 2)), net.provider(Fault{})});
  REQUIRE(o.verdicts.size() == 1);
  CHECK(net.verify(o.verdicts[0]).reason == VerdictReason::WrongOutput);
}

TEST_CASE("attack: strangers who fill the referee cannot lock out a trusted client") {
  const KeyPair client = generate_keypair();
  RefereeNodeOptions o;
  o.max_live_disputes = 3;
  o.reserved_disputes = 1;
  o.trusted_clients = {client.public_key};
  Network net(o);
  // The strangers' disputes stay live throughout the test.
  const std::string job = Network::short_job_with_terms("base_seconds = 60");
  // Strangers open disputes until the referee refuses them: two slots, then "clients it does not know".
  std::vector<std::unique_ptr<RawPeer>> strangers;
  for (uint8_t i = 0; i < 2; ++i) {
    const ForgedOpening f = forged_opening(job, i);
    strangers.push_back(std::make_unique<RawPeer>(net.ctx, net.referee_url));
    strangers.back()->send(seal(generate_keypair(), f.id, 1, f.opening));
  }
  for (int i = 0; i < 100 && net.referee.live_disputes() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(net.referee.live_disputes() == 2);
  const ForgedOpening third = forged_opening(job, 7);
  RawPeer refused(net.ctx, net.referee_url);
  refused.send(seal(generate_keypair(), third.id, 1, third.opening));
  CHECK(refused.error().find(
            "live disputes of clients it does not know, its limit for them (1 more are kept for its "
            "trusted clients)") != std::string::npos);
  // The trusted client's dispute takes the reserved slot and is decided.
  DelegateRequest r = net.request({net.provider(corrupt(14, 2)), net.provider(Fault{})});
  r.client_key = client;
  const DelegateOutcome out = delegate_job(net.ctx, r, quiet_logger());
  REQUIRE(out.verdicts.size() == 1);
  CHECK(net.verify(out.verdicts[0]).reason == VerdictReason::WrongOutput);
  CHECK(out.accepted);
  CHECK(out.winner == 1);
  // The decided dispute leaves the live set just after its verdict went out; the strangers' stay.
  for (int i = 0; i < 100 && net.referee.live_disputes() > 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(net.referee.live_disputes() == 2);
}

TEST_CASE("a decided dispute's record is pruned after the retention period; its verdict is still served") {
  TempDir data("pruned");
  RefereeNodeOptions o;
  o.data_dir = data.path;
  o.retention = std::chrono::seconds(0);
  o.prune_interval = std::chrono::seconds(0);
  Network net(o);
  const DelegateOutcome out = net.delegate({net.provider(corrupt(14, 2)), net.provider(Fault{})});
  REQUIRE(out.verdicts.size() == 1);
  const Verdict v = net.verify(out.verdicts[0]);
  RefereeStore store(data.path, net.referee_key.public_key);  // a second connection to the node's store
  CHECK(store.contains(v.dispute_id));
  size_t inputs = store.stored_inputs(v.dispute_id);
  for (int i = 0; i < 100 && inputs != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    inputs = store.stored_inputs(v.dispute_id);
  }
  CHECK(inputs == 0);
  REQUIRE(store.verdict(v.dispute_id).has_value());
  CHECK(*store.verdict(v.dispute_id) == out.verdicts[0]);
  // Opening it again gets the stored verdict, not a new dispute.
  const Envelope again = await_verdict(net.ctx, net.referee_url, net.referee_key.public_key,
                                       seal(generate_keypair(), v.dispute_id, 1, v.opening), quiet_logger());
  CHECK(again.bytes == out.verdicts[0]);
  CHECK(net.referee.live_disputes() == 0);
}
