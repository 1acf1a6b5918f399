// The referee's dispute pages through the real node (docs/running.md, "Dispute reports"): a decided
// dispute's page is rendered from the store — its verdict and the rounds stored with it — and never
// by replaying or re-executing the dispute per request; HTTP requests are rate-limited per source.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <atomic>
#include <chrono>

#include "referee/report.h"
#include "tests/http_get.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using tribunal::testing::corrupt;
using tribunal::testing::Network;

namespace {

uint16_t port_of(const std::string& url) {  // "ws://127.0.0.1:PORT/"
  return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

// The value of an unlabelled sample in Prometheus text, or -1 when absent.
double sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE(
    "dispute pages: rendered from the store, never re-executed per request; a burst beyond the rate limit "
    "gets 429") {
  testing::TempDir store("pages");
  std::atomic<int> reexecutions{0};
  RefereeNodeOptions options;
  options.data_dir = store.path;
  options.dispute.reexecute_hook = [&](int) { ++reexecutions; };  // before each re-execution attempt
  options.http_rate = {.burst = 40, .refill = std::chrono::seconds(2)};
  Network net(options);
  const uint16_t port = port_of(net.referee_url);

  const std::string honest = net.provider(Fault{});
  const std::string cheater = net.provider(corrupt(3, 4));
  const DelegateOutcome o = net.delegate({cheater, honest});
  REQUIRE(o.verdicts.size() == 1);
  const Verdict v = net.verify(o.verdicts[0]);
  REQUIRE(v.reason == VerdictReason::WrongOutput);
  CHECK(reexecutions == 1);  // the dispute's own re-execution of the located node

  // 30 GETs of the page (and one of the list): each shows the verdict and the rounds as played.
  const std::string id = to_hex(v.dispute_id);
  const auto first = std::chrono::steady_clock::now();  // the bucket of 127.0.0.1 is full until here
  CHECK(testing::http_get(port, "/disputes").body.find("/disputes/" + id) != std::string::npos);
  for (int i = 0; i < 30; ++i) {
    const testing::HttpReply page = testing::http_get(port, "/disputes/" + id);
    REQUIRE(page.status == 200);
    CHECK(is_self_contained(page.body));
    CHECK(page.body.find(R"(id="reason">wrong_output<)") != std::string::npos);
    CHECK(page.body.find(R"(id="located-step">3<)") != std::string::npos);
    CHECK(page.body.find(R"(id="located-node">4<)") != std::string::npos);
    CHECK(page.body.find(R"(<span class="ok">valid</span>)") != std::string::npos);
    CHECK(page.body.find(R"(<ol class="rounds">)") != std::string::npos);
    CHECK(page.body.find("level 2: step 3 is the first whose next state differs") != std::string::npos);
    CHECK(page.body.find("re-executing node 4") != std::string::npos);
    CHECK(page.body.find("verdict: provider 1 wins (wrong_output)") != std::string::npos);
    CHECK(page.body.find(R"(id="no-rounds")") == std::string::npos);
  }
  CHECK(reexecutions == 1);  // no request re-executed anything
  const std::string metrics = testing::http_get(port, "/metrics").body;
  CHECK(sample(metrics, "tribunal_referee_pages_rendered_total") == 1);  // rendered once, then kept

  // 32 requests so far from 127.0.0.1, within its bucket of 40; a burst of 20 more runs it dry.
  int ok = 0, limited = 0;
  std::string retry_after;
  for (int i = 0; i < 20; ++i) {
    const testing::HttpReply r = testing::http_get(port, "/disputes/" + id);
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      const size_t at = r.headers.find("Retry-After: ");
      if (at != std::string::npos)
        retry_after = r.headers.substr(at + 13, r.headers.find("\r\n", at) - at - 13);
    }
  }
  const auto refilled = (std::chrono::steady_clock::now() - first) / std::chrono::seconds(2);  // tokens back
  CHECK(ok + limited == 20);
  CHECK(ok <= 8 + static_cast<int>(refilled) + 1);
  CHECK(limited >= 20 - 8 - static_cast<int>(refilled) - 1);
  CHECK(limited > 0);
  CHECK((retry_after == "1" || retry_after == "2"));
  // Another source address has its own bucket.
  CHECK(testing::http_get(port, "/healthz", "GET", "127.0.0.2").status == 200);
  CHECK(reexecutions == 1);
}
