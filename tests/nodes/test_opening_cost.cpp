// Cost before work at the referee (issue 28, hole 2; docs/protocol.md, "Bounds on a dispute's cost"
// and "Threat model"): a stranger's small openings of a many-shard job, alone or pipelined on one
// connection, are refused from the job text in microseconds and cannot stall a running dispute; a
// source that spends its CPU budget for openings is told when to retry.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using testing::corrupt;
using testing::Network;
using testing::RawPeer;

namespace {

// The opening: a 10-parameter MLP (widths [1, 5] on a data set the opener declares: 16384
// samples of 1 feature, 5 classes) with train.shards = 16384, its two claims signed by throwaway
// keys. Nothing about it is checked against a real data set: the referee never loads one.
std::vector<uint8_t> many_shard_opening(uint8_t salt) {
  const std::string toml =
      "[model]\nkind = \"mlp\"\nwidths = [1, 5]\n[train]\nsteps = 30\nbatch_size = 16384\n"
      "shards = 16384\nstride = 8\n[optimizer]\n";
  const JobSpec job = parse_job(toml, "stranger's job");
  Digest root{};
  root[0] = salt;
  const DataShape shape{16384, 1, 5, 0};
  const Digest jid = job_id(job, root, shape);
  DisputeOpen d;
  d.job_toml = toml;
  d.dataset_root = root;
  d.dataset_samples = 16384;
  d.features = 1;
  d.classes = 5;
  for (uint8_t p = 0; p < 2; ++p) {
    Digest claimed{};
    claimed[0] = p;
    d.claims.push_back(
        seal(generate_keypair(), jid, 1,
             Claim{jid, static_cast<uint64_t>(job.steps), claimed, claimed, "ws://127.0.0.1:9/"}));
  }
  return seal(generate_keypair(), dispute_id(d), 1, d);
}

size_t errors_in(const std::vector<std::vector<uint8_t>>& messages) {
  size_t n = 0;
  for (const auto& m : messages) n += open_envelope(m).kind == MessageKind::Error ? 1 : 0;
  return n;
}

constexpr const char* kNodeLimit =
    "the job's step graph node count is 163840, beyond this referee's limit of 65536";

}  // namespace

TEST_CASE(
    "attack: a stranger's 16384-shard openings are refused from the job text and cannot stall a running "
    "dispute") {
  Network net;
  net.use_terms("base_seconds = 3\nstep_seconds = 1");  // a dispute that a stalled referee would lose on time
  const std::vector<std::string> urls{net.provider(corrupt(12, 13)), net.provider(Fault{})};
  auto delegation = std::async(std::launch::async, [&] { return net.delegate(urls); });
  // The stranger strikes while the dispute runs.
  for (int i = 0; i < 600 && net.referee.live_disputes() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(net.referee.live_disputes() == 1);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<RawPeer>> openers;
  for (uint8_t i = 0; i < 2; ++i) {  // two small openings, each on its own connection
    const std::vector<uint8_t> opening = many_shard_opening(i);
    CHECK(opening.size() < 1024);
    openers.push_back(std::make_unique<RawPeer>(net.ctx, net.referee_url));
    openers.back()->send(opening);
  }
  RawPeer pipelined(net.ctx, net.referee_url);  // and 20 of them pipelined on one connection
  for (uint8_t i = 0; i < 20; ++i) pipelined.send(many_shard_opening(static_cast<uint8_t>(10 + i)));

  for (auto& o : openers) CHECK(o->error().find(kNodeLimit) != std::string::npos);
  const std::vector<std::vector<uint8_t>> answers = pipelined.until_closed();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("22 many-shard openings refused in " << took << " s");
  CHECK(took < 2.0);
  // The first opening is refused and the connection closed: the 19 frames queued behind it are dropped.
  CHECK(errors_in(answers) == 1);
  CHECK(pipelined.close_info().code == CloseCode::PolicyViolation);
  CHECK(net.referee.live_disputes() <= 1);

  // The running dispute goes on and convicts the cheater (provider 0) at the corrupted node.
  const DelegateOutcome out = delegation.get();
  REQUIRE(out.verdicts.size() == 1);
  const Verdict v = net.verify(out.verdicts[0]);
  CHECK(v.reason == VerdictReason::WrongOutput);
  CHECK(v.step == 12);
  CHECK(v.node == 13);
  REQUIRE(v.losers.size() == 1);
  const Claim loser = std::get<Claim>(open_envelope(v.opening.claims.at(v.losers[0])).body);
  CHECK(loser.trajectory_root == out.claims.at(0).trajectory_root);
  CHECK(out.accepted);
  CHECK(out.winner == 1);
}

TEST_CASE(
    "attack: a source past its CPU budget for openings is told when to retry; a trusted client keeps its "
    "own") {
  const KeyPair client = generate_keypair();
  RefereeNodeOptions o;
  o.opening_cpu.burst = std::chrono::milliseconds(1);
  o.opening_cpu.refill_per_second = 0.0001;  // 0.1 ms of CPU per second
  o.trusted_clients = {client.public_key};
  Network net(o);
  // A stranger (127.0.0.0/24) sends openings until its 1 ms is spent; each costs its checks.
  std::string refusal;
  for (uint8_t i = 0; i < 100 && refusal.find("CPU budget") == std::string::npos; ++i) {
    RawPeer peer(net.ctx, net.referee_url);
    peer.send(many_shard_opening(i));
    refusal = peer.error();
  }
  CHECK(refusal.find(
            "the openings from 127.0.0.0/24 have used their CPU budget at this referee (0.001 CPU-s at once, "
            "refilled at 0.0001 CPU-s per second); retry in ") != std::string::npos);
  // The trusted client's opening is charged to its key, not to its network: its dispute is decided.
  DelegateRequest r = net.request({net.provider(corrupt(14, 2)), net.provider(Fault{})});
  r.client_key = client;
  const DelegateOutcome out = delegate_job(net.ctx, r, quiet_logger());
  REQUIRE(out.verdicts.size() == 1);
  CHECK(net.verify(out.verdicts[0]).reason == VerdictReason::WrongOutput);
  CHECK(out.winner == 1);
}
