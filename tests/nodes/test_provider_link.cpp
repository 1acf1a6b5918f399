// The referee's link to one party (nodes/provider_link.h): the reconnection backoff (100 ms doubling
// to 1 s, starting over after a connection), when a retry is due, which session's end counts, and the
// answer clock. No network: sessions are stand-ins that record what is sent.
#include <doctest/doctest.h>

#include "nodes/provider_link.h"

using namespace tribunal;
using namespace tribunal::nodes;
using namespace std::chrono_literals;

namespace {

// A session that records what it is asked to do; a question's write completes at once.
class FakeSession : public Session {
 public:
  FakeSession() : Session(next_id++) {}
  static inline uint64_t next_id = 1;
  void set_handlers(SessionHandlers) override {}
  bool send(std::vector<uint8_t> message) override {
    sent.push_back(std::move(message));
    return open;
  }
  bool send_and_notify(std::vector<uint8_t> message, std::function<void()> on_written) override {
    sent.push_back(std::move(message));
    if (open) written = std::move(on_written);
    return open;
  }
  bool wait_for_room(size_t) override { return open; }
  void close(CloseCode code, std::string) override {
    closed_with = code;
    open = false;
  }
  bool is_open() const override { return open; }
  void set_reading(bool) override {}

  bool open = true;
  std::vector<std::vector<uint8_t>> sent;
  std::function<void()> written;
  std::optional<CloseCode> closed_with;
};

struct Fixture {
  boost::asio::thread_pool pool{1};
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  ProviderLink link{boost::asio::make_strand(pool), owner, ProviderLinkEvents{}};
};

}  // namespace

TEST_CASE(
    "provider link: reconnection backoff doubles from 100 ms to 1 s and starts over after a connection") {
  Fixture f;
  ProviderLink& link = f.link;
  const GameTime t0 = GameTime{} + 1h;
  CHECK_FALSE(link.retry_at());
  CHECK_FALSE(link.due(t0));
  for (const auto expected : {100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms}) CHECK(link.lost(t0) == expected);
  REQUIRE(link.retry_at());
  CHECK(*link.retry_at() == t0 + 1000ms);
  CHECK_FALSE(link.due(t0 + 999ms));
  CHECK(link.due(t0 + 1000ms));

  auto first = std::make_shared<FakeSession>();
  CHECK_FALSE(link.established(first));  // the first connection is no reconnection
  CHECK_FALSE(link.due(t0 + 1000ms));    // connected: nothing is due
  CHECK(link.session() == first);
  // Only the current session's end counts.
  CHECK_FALSE(link.closed(std::make_shared<FakeSession>()));
  CHECK_FALSE(link.closed(nullptr));
  CHECK(link.closed(first));
  CHECK_FALSE(link.session());
  CHECK(link.lost(t0) == 100ms);  // the backoff started over
  CHECK(link.established(std::make_shared<FakeSession>()));
}

TEST_CASE("provider link: an unwritten question holds the party's timeout until written or lost") {
  Fixture f;
  ProviderLink& link = f.link;
  auto s = std::make_shared<FakeSession>();
  link.established(s);
  CHECK_FALSE(link.holds_timeout());
  CHECK_FALSE(link.answered());

  link.send({1});
  CHECK_FALSE(link.holds_timeout());  // a message that starts no clock
  bool written = false;
  link.ask({2, 3}, [&] { written = true; });
  CHECK(link.holds_timeout());
  REQUIRE(s->written);
  s->written();
  CHECK(written);
  link.written();
  CHECK_FALSE(link.holds_timeout());
  CHECK(s->sent == std::vector<std::vector<uint8_t>>{{1}, {2, 3}});
  CHECK(link.answered());        // owed since the question was asked
  CHECK_FALSE(link.answered());  // once per question

  link.ask({4}, [] {});
  CHECK(link.holds_timeout());
  link.lost(GameTime{} + 1h);  // the question will not be written on the lost connection
  CHECK_FALSE(link.holds_timeout());
  CHECK(link.answered());

  // A question the session refuses to queue starts nothing.
  s->open = false;
  link.ask({5}, [] {});
  CHECK_FALSE(link.holds_timeout());
  CHECK_FALSE(link.answered());

  link.close(CloseCode::GoingAway, "dispute suspended");
  CHECK(s->closed_with == CloseCode::GoingAway);
}
