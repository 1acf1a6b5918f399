// The referee's admission (nodes/admission.h; docs/protocol.md, "Threat model"): the global cap, the
// slots reserved for trusted clients, the cap per client network or key, each source's CPU budget for
// openings at its edge, the clients waiting for one verdict and the provider endpoints' addresses —
// each refusal with the reason the client is sent.
#include <doctest/doctest.h>

#include <stdexcept>

#include "net/error.h"
#include "nodes/admission.h"

using namespace tribunal;
using namespace tribunal::nodes;
using namespace std::chrono_literals;

namespace {

using Clock = Admission::Clock;

PublicKey key(uint8_t a, uint8_t b) {
  PublicKey k{};
  k[0] = a;
  k[1] = b;
  return k;
}

AdmissionLimits caps(size_t live, size_t per_client) {
  AdmissionLimits l;
  l.max_live_disputes = live;
  l.max_disputes_per_client = per_client;
  return l;
}

}  // namespace

TEST_CASE("admission: the global cap admits up to max_live_disputes held and refuses at it") {
  Admission a(caps(3, 10));
  a.hold("10.0.0.0/24", false);
  a.hold("10.0.1.0/24", false);
  CHECK(a.live() == 2);
  CHECK(a.admit("10.0.2.0/24", false).admitted());
  a.hold("10.0.2.0/24", false);
  const AdmissionDecision full = a.admit("10.0.3.0/24", false);
  CHECK(full.refusal == AdmissionRefusal::LiveDisputes);
  CHECK(full.reason == "the referee holds 3 live disputes, its limit; try again later");
  CHECK_FALSE(full.retry_in);
  a.release("10.0.1.0/24", false);
  CHECK(a.live() == 2);
  CHECK(a.admit("10.0.3.0/24", false).admitted());
}

TEST_CASE("admission: reserved slots are taken only by trusted keys, and only when there are any") {
  AdmissionLimits l = caps(4, 10);
  l.reserved_disputes = 2;
  l.trusted_clients = {key(0xab, 0xcd)};
  Admission a(l);
  a.hold("10.0.0.0/24", false);
  CHECK(a.admit("10.0.1.0/24", false).admitted());  // 1 stranger + 2 reserved < 4
  a.hold("10.0.1.0/24", false);
  const AdmissionDecision stranger = a.admit("10.0.2.0/24", false);
  CHECK(stranger.refusal == AdmissionRefusal::StrangerSlots);
  CHECK(stranger.reason ==
        "the referee holds 2 live disputes of clients it does not know, its limit for them (2 more are kept "
        "for its trusted clients); try again later");
  const std::string trusted_group = a.group(key(0xab, 0xcd), "10.0.9.9");
  CHECK(a.admit(trusted_group, true).admitted());
  a.hold(trusted_group, true);
  a.hold(trusted_group, true);
  CHECK(a.trusted_live() == 2);
  // Full: the global cap comes first, for trusted keys too.
  CHECK(a.admit(trusted_group, true).refusal == AdmissionRefusal::LiveDisputes);
  a.release(trusted_group, true);
  CHECK(a.admit(trusted_group, true).admitted());
  CHECK(a.admit("10.0.2.0/24", false).refusal == AdmissionRefusal::StrangerSlots);
  a.release("10.0.0.0/24", false);
  CHECK(a.admit("10.0.2.0/24", false).admitted());  // 1 stranger + 2 reserved < 4

  // Without trusted keys nothing is reserved: strangers may fill every slot.
  AdmissionLimits open = caps(4, 10);
  open.reserved_disputes = 2;
  Admission b(open);
  for (int i = 0; i < 3; ++i) b.hold("10.0.0.0/24", false);
  CHECK(b.admit("10.0.1.0/24", false).admitted());
  b.hold("10.0.1.0/24", false);
  CHECK(b.admit("10.0.1.0/24", false).refusal == AdmissionRefusal::LiveDisputes);
}

TEST_CASE("admission: the cap per client network or key refuses its group only") {
  Admission a(caps(100, 2));
  a.hold("10.0.0.0/24", false);
  CHECK(a.admit("10.0.0.0/24", false).admitted());
  a.hold("10.0.0.0/24", false);
  CHECK(a.live_of("10.0.0.0/24") == 2);
  const AdmissionDecision mine = a.admit("10.0.0.0/24", false);
  CHECK(mine.refusal == AdmissionRefusal::ClientDisputes);
  CHECK(mine.reason == "10.0.0.0/24 has 2 live disputes, the limit per client");
  CHECK(a.admit("10.0.1.0/24", false).admitted());
  a.release("10.0.0.0/24", false);
  CHECK(a.admit("10.0.0.0/24", false).admitted());
  a.release("10.0.0.0/24", false);
  CHECK(a.live_of("10.0.0.0/24") == 0);
  CHECK(a.live() == 0);
}

TEST_CASE("admission: openings are counted by trusted key, else by client network (/24, /48)") {
  AdmissionLimits l;
  l.trusted_clients = {key(0xab, 0xcd)};
  const Admission a(l);
  CHECK(a.trusted(key(0xab, 0xcd)));
  CHECK_FALSE(a.trusted(key(0xab, 0xce)));
  CHECK(a.group(key(0xab, 0xcd), "203.0.113.7") == "client key abcd000000000000");
  CHECK(a.group(key(0xab, 0xce), "203.0.113.7") == "203.0.113.0/24");
  CHECK(a.group(key(0xab, 0xce), "2001:db8:1:2::5") == "2001:db8:1::/48");
  CHECK(a.group(key(0xab, 0xce), "?") == "?");  // not an IP address: counted by itself
}

TEST_CASE("admission: a source's CPU budget refuses at a zero balance and admits once it is positive") {
  AdmissionLimits l;
  l.opening_cpu.burst = 1000ms;
  l.opening_cpu.refill_per_second = 0.25;
  Admission a(l);
  const Clock::time_point t0 = Clock::time_point{} + 1h;
  CHECK(a.budget("10.0.0.0/24", t0).admitted());  // never charged: a full bucket

  // Charged exactly its burst: balance 0, not positive.
  a.charge("10.0.0.0/24", 1000ms, t0);
  const AdmissionDecision spent = a.budget("10.0.0.0/24", t0);
  CHECK(spent.refusal == AdmissionRefusal::CpuBudget);
  REQUIRE(spent.retry_in);
  CHECK(*spent.retry_in == 1ms);
  CHECK(spent.reason ==
        "the openings from 10.0.0.0/24 have used their CPU budget at this referee (1 CPU-s at once, "
        "refilled at 0.25 CPU-s per second); retry in 0.001 s");
  CHECK(a.budget("10.0.0.0/24", t0 + 1ms).admitted());
  CHECK(a.budget("10.0.1.0/24", t0).admitted());  // another source keeps its own

  // In debt by 0.5 CPU-s: back at zero after 2 s (still refused), positive 1 ms later.
  a.charge("10.0.2.0/24", 1500ms, t0);
  const AdmissionDecision debt = a.budget("10.0.2.0/24", t0);
  REQUIRE(debt.retry_in);
  CHECK(*debt.retry_in == 2001ms);
  CHECK(a.budget("10.0.2.0/24", t0 + 2000ms).refusal == AdmissionRefusal::CpuBudget);
  CHECK(a.budget("10.0.2.0/24", t0 + 2001ms).admitted());

  // A zero burst turns the budget off.
  AdmissionLimits off;
  off.opening_cpu.burst = 0ms;
  Admission b(off);
  b.charge("10.0.0.0/24", 10s, t0);
  CHECK(b.budget("10.0.0.0/24", t0).admitted());

  AdmissionLimits bad;
  bad.opening_cpu.refill_per_second = 0;
  CHECK_THROWS_AS(Admission{bad}, std::invalid_argument);
}

TEST_CASE("admission: at most max_waiting_per_address connections of one address wait for a verdict") {
  const Admission a{AdmissionLimits{}};
  CHECK(a.attach("10.1.2.3", 3).admitted());
  const AdmissionDecision d = a.attach("10.1.2.3", 4);
  CHECK(d.refusal == AdmissionRefusal::WaitingClients);
  CHECK(d.reason == "4 connections from 10.1.2.3 already wait for this dispute's verdict");
}

TEST_CASE("admission: a provider endpoint at a literal address the policy refuses is refused") {
  const AdmissionDecision d =
      provider_endpoints({"ws://203.0.113.5:9000/", "ws://127.0.0.1:9001/"}, AddressPolicy::public_only());
  CHECK(d.refusal == AdmissionRefusal::ProviderAddress);
  CHECK(d.reason ==
        "a provider's endpoint ws://127.0.0.1:9001/ is a loopback address, which this referee does not "
        "connect to (--allow-network)");
  CHECK(provider_endpoints({"ws://127.0.0.1:9001/"}, AddressPolicy::public_only({parse_cidr("127.0.0.0/8")}))
            .admitted());
  // A name is judged when it resolves, not here.
  CHECK(provider_endpoints({"ws://provider.example:9000/"}, AddressPolicy::public_only()).admitted());
  CHECK_THROWS_AS(provider_endpoints({"http://203.0.113.5/"}, AddressPolicy::public_only()), NetError);
}
