// The outgoing-address policy (net/address_policy.h): CIDR parsing, the refused ranges, allow-lists,
// and a real Client refused by it before any connection is made.
#include <doctest/doctest.h>

#include "net/address_policy.h"
#include "net/client.h"
#include "net/context.h"
#include "net/error.h"
#include "net/server.h"

using namespace tribunal;

TEST_CASE("address policy: CIDR parsing") {
  const IpNetwork v4 = parse_cidr("10.1.0.0/16");
  CHECK_FALSE(v4.v6);
  CHECK(v4.prefix == 16);
  CHECK(v4.bytes[0] == 10);
  CHECK(v4.bytes[1] == 1);
  CHECK(parse_cidr("::1").prefix == 128);
  CHECK(parse_cidr("192.0.2.7").prefix == 32);
  CHECK_THROWS_WITH_AS(parse_cidr("10.0.0.0/33"),
                       "network \"10.0.0.0/33\": the prefix length must be 0 to 32", NetError);
  CHECK_THROWS_WITH_AS(parse_cidr("fe80::/129"), "network \"fe80::/129\": the prefix length must be 0 to 128",
                       NetError);
  CHECK_THROWS_WITH_AS(parse_cidr("10.0.0.0/x"), "network \"10.0.0.0/x\": the prefix length must be 0 to 32",
                       NetError);
  CHECK_THROWS_WITH_AS(parse_cidr("example.org/8"), "network \"example.org\": not an IP address", NetError);
}

TEST_CASE("address policy: public addresses only, unless allowed") {
  const AddressPolicy any = AddressPolicy::any();
  CHECK(any.allows("127.0.0.1"));
  const AddressPolicy pub = AddressPolicy::public_only();
  // No structured binding: clang 14 cannot capture one in CAPTURE.
  for (const auto& c :
       std::vector<std::pair<std::string, std::string>>{{"0.0.0.0", "unspecified"},
                                                        {"127.0.0.1", "loopback"},
                                                        {"127.255.0.9", "loopback"},
                                                        {"10.2.3.4", "private"},
                                                        {"172.16.0.1", "private"},
                                                        {"172.31.255.255", "private"},
                                                        {"192.168.1.1", "private"},
                                                        {"100.64.0.1", "shared address space"},
                                                        {"169.254.169.254", "link-local"},
                                                        {"224.0.0.1", "multicast"},
                                                        {"255.255.255.255", "reserved or broadcast"},
                                                        {"::", "unspecified"},
                                                        {"::1", "loopback"},
                                                        {"fd00::1", "private"},
                                                        {"fe80::1", "link-local"},
                                                        {"ff02::1", "multicast"},
                                                        {"::ffff:127.0.0.1", "loopback"},
                                                        {"::ffff:10.0.0.1", "private"}}) {
    const std::string& address = c.first;
    CAPTURE(address);
    CHECK(pub.refusal(address) == c.second);
  }
  for (const char* address : {"8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:4860::8888", "::ffff:8.8.8.8"}) {
    CAPTURE(address);
    CHECK(pub.allows(address));
  }
  const AddressPolicy lab =
      AddressPolicy::public_only({parse_cidr("127.0.0.0/8"), parse_cidr("10.9.0.0/16")});
  CHECK(lab.allows("127.0.0.1"));
  CHECK(lab.allows("10.9.1.2"));
  CHECK(lab.refusal("10.8.1.2") == "private");
  CHECK_THROWS_AS(pub.refusal("localhost"), NetError);
}

TEST_CASE("address policy: a client refuses every resolved address its policy refuses") {
  NetContext ctx(1, false);
  Server server(ctx, [](std::shared_ptr<Session>) {});
  const uint16_t port = server.listen("127.0.0.1", 0);
  ctx.start();
  const std::string url = "ws://127.0.0.1:" + std::to_string(port) + "/";
  ClientOptions refusing;
  refusing.address_policy = AddressPolicy::public_only();
  CHECK_THROWS_WITH_AS(
      Client(ctx, refusing).connect_sync(url),
      doctest::Contains("127.0.0.1 resolves only to addresses the address policy refuses (127.0.0.1: "
                        "loopback); allow them with --allow-network CIDR"),
      NetError);
  // A name is judged by what it resolves to.
  CHECK_THROWS_WITH_AS(Client(ctx, refusing).connect_sync("ws://localhost:" + std::to_string(port) + "/"),
                       doctest::Contains("address policy refuses"), NetError);
  ClientOptions allowing;
  allowing.address_policy = AddressPolicy::public_only({parse_cidr("127.0.0.0/8")});
  auto session = Client(ctx, allowing).connect_sync(url);
  CHECK(session->is_open());
  session->close(CloseCode::Normal, "done");
  ctx.stop();
  ctx.join();
}
