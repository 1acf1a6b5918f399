// No wasted work (issue 30, item 5), through the real nodes over loopback WebSockets: the delegate
// checks the referee — reachable, TLS verified, holding the pinned key, accepting the providers'
// endpoints — before any provider is given the job (nodes/delegate.h check_referee), and a provider
// answers a job submitted again with the claim it holds instead of training it again.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "engine/state.h"
#include "tests/nodes/network.h"
#include "tests/tls_certs.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using testing::corrupt;
using testing::Network;
using testing::RawPeer;

namespace {

Digest short_job_id() {
  ThreadPool pool(1);
  const JobSpec job = load_job(testing::kShortJob);
  return job_id(job, *shared_train_set(job, pool));
}

// Runs the delegation of `request`; returns the RefereeCheckError's text (fails the test without one).
std::string check_failure(Network& net, const DelegateRequest& request) {
  try {
    delegate_job(net.ctx, request, quiet_logger());
  } catch (const RefereeCheckError& e) {
    return e.what();
  }
  FAIL("the delegation ran without a RefereeCheckError");
  return "";
}

// No provider was sent the job: a JobSubmit sent before the error would have arrived by now.
void require_no_job_sent(const Network& net) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const auto& p : net.providers) {
    CHECK(p->jobs_received() == 0);
    CHECK(p->trainings_started() == 0);
  }
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("referee check: a wrong referee port fails before any provider is given the job") {
  Network net;
  DelegateRequest r = net.request({net.provider(Fault{}), net.provider(Fault{})});
  r.referee = "ws://127.0.0.1:1/";  // nothing listens there
  const std::string error = check_failure(net, r);
  CAPTURE(error);
  CHECK(has(error,
            "referee ws://127.0.0.1:1/ failed its check, so no provider was given the job: cannot connect"));
  require_no_job_sent(net);
}

TEST_CASE("referee check: a referee holding another key than --referee-key is named with both keys") {
  Network net;
  DelegateRequest r = net.request({net.provider(Fault{}), net.provider(Fault{})});
  const KeyPair pinned = generate_keypair();
  r.referee_key = pinned.public_key;
  const std::string error = check_failure(net, r);
  CAPTURE(error);
  CHECK(has(error, "referee " + net.referee_url + " failed its check"));
  CHECK(has(error, "it holds the key " + to_hex(Digest(net.referee_key.public_key)) +
                       ", not the --referee-key " + to_hex(Digest(pinned.public_key))));
  require_no_job_sent(net);
}

TEST_CASE("referee check: provider endpoints the referee's address policy refuses fail before training") {
  // The referee connects to public addresses only (no --allow-network for loopback), as a referee on
  // the Internet does; the providers listen on 127.0.0.1.
  Network net({}, AddressPolicy::public_only());
  const std::string a = net.provider(Fault{}), b = net.provider(Fault{});
  const std::string error = check_failure(net, net.request({a, b}));
  CAPTURE(error);
  CHECK(has(error, "it would refuse a dispute naming provider " + a + ": a provider's endpoint " + a +
                       " is a loopback address, which this referee does not connect to (--allow-network)"));
  require_no_job_sent(net);
}

TEST_CASE(
    "referee check: a wss:// referee whose certificate the client does not trust fails before training") {
  testing::TempDir certs("refcheck-tls");
  RefereeNodeOptions options;
  options.tls = testing::self_signed(certs.path, "referee", "IP:127.0.0.1");
  Network net(options);
  DelegateRequest r = net.request({net.provider(Fault{}), net.provider(Fault{})});
  r.referee = "wss://" + net.referee_url.substr(std::string("ws://").size());
  r.tls.ca = testing::self_signed(certs.path, "other", "IP:127.0.0.1").cert;  // not the referee's CA
  const std::string error = check_failure(net, r);
  CAPTURE(error);
  CHECK(has(error,
            "referee " + r.referee + " failed its check, so no provider was given the job: cannot connect"));
  CHECK(has(error, "its certificate must chain to --tls-ca"));
  require_no_job_sent(net);
  // With the referee's own CA the same delegation passes the check and a claim stands.
  r.tls.ca = options.tls.ca;
  const DelegateOutcome out = delegate_job(net.ctx, r, quiet_logger());
  CHECK(out.accepted);
}

TEST_CASE("referee check: the referee's answer is signed over the client's nonce, so it proves its key") {
  Network net;
  RawPeer peer(net.ctx, net.referee_url);
  RefereeCheck check;
  check.nonce[0] = 7;
  check.endpoints = {"ws://127.0.0.1:9/", "ws://10.1.2.3:9/", "http://x/"};
  peer.send(seal(generate_keypair(), check.nonce, 1, check));
  const Envelope env = open_envelope(peer.first(MessageKind::RefereeAnswer));
  CHECK(env.sender == net.referee_key.public_key);
  CHECK(env.context == check.nonce);
  const RefereeAnswer& answer = std::get<RefereeAnswer>(env.body);
  CHECK(answer.nonce == check.nonce);
  REQUIRE(answer.refusals.size() == 3);
  CHECK(answer.refusals[0].empty());  // loopback_policy: loopback allowed
  CHECK(has(answer.refusals[1], "is a private address"));
  CHECK(has(answer.refusals[2], "http://x/"));
  // A check whose nonce is not its envelope's context gets no signed answer.
  RawPeer bad(net.ctx, net.referee_url);
  bad.send(seal(generate_keypair(), Digest{}, 1, check));
  CHECK(bad.close_info().code == CloseCode::PolicyViolation);
  for (const auto& m : bad.until_closed()) CHECK(open_envelope(m).kind != MessageKind::RefereeAnswer);
}

TEST_CASE("a job submitted again is answered with the claim held, not trained again") {
  Network net;
  const std::string url = net.provider(Fault{});
  ProviderNode& provider = *net.providers[0];
  const Digest id = short_job_id();
  const KeyPair client = generate_keypair();
  const auto submit = [&] {
    RawPeer peer(net.ctx, url);
    peer.send(seal(client, id, 1, JobSubmit{testing::read_text(testing::kShortJob)}));
    return peer.first(MessageKind::Claim);
  };
  const std::vector<uint8_t> first = submit();
  const std::vector<uint8_t> second = submit();
  CHECK(second == first);  // the same signed claim, byte for byte
  const Envelope env = open_envelope(second);
  CHECK(env.sender == provider.public_key());
  CHECK(std::get<Claim>(env.body).job_id == id);
  CHECK(provider.jobs_received() == 2);
  CHECK(provider.trainings_started() == 1);

  // A held claim whose final checkpoint is gone could not be defended in a dispute: the job is
  // trained again, to the same claim (training is deterministic).
  const JobSpec job = load_job(testing::kShortJob);
  const auto store = net.dir.path / "store0" / to_hex(id);
  REQUIRE(std::filesystem::remove(checkpoint_path(store, job.steps)));
  CHECK(submit() == first);
  CHECK(provider.trainings_started() == 2);
}

TEST_CASE("delegating the same job twice: the providers answer the second time with their claims") {
  Network net;
  const std::string a = net.provider(Fault{}), b = net.provider(corrupt(2, 3));
  const DelegateOutcome first = net.delegate({a, b});
  REQUIRE(first.accepted);
  CHECK(first.winner == 0);
  const DelegateOutcome second = net.delegate({a, b});
  REQUIRE(second.accepted);
  CHECK(second.winner == 0);
  REQUIRE(second.claims.size() == 2);
  for (size_t p = 0; p < 2; ++p) {
    CHECK(second.claims[p].trajectory_root == first.claims[p].trajectory_root);
    CHECK(second.claims[p].final_state_hash == first.claims[p].final_state_hash);
    CHECK(net.providers[p]->jobs_received() == 2);
    CHECK(net.providers[p]->trainings_started() == 1);
  }
}
