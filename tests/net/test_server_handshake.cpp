// The server handshake (net/server_handshake.h) on its own: what it does with a request (refuse,
// plain HTTP, 404, upgrade), and eviction reaching a connection both before and after its hand-over
// to the session (ServerOptions::evict_strangers).
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "net/client.h"
#include "net/context.h"
#include "net/error.h"
#include "net/server.h"
#include "net/server_handshake.h"
#include "net/session.h"
#include "net/testing/raw_websocket.h"

using namespace tribunal;
using namespace std::chrono_literals;
using net_detail::handshake_action;
using net_detail::HandshakeAction;

namespace {

// Keeps the transport's log lines, and the test output quiet.
struct QuietLog {
  std::mutex mutex;
  std::vector<std::string> lines;
  QuietLog() {
    set_net_log_sink([this](std::string_view line) {
      std::lock_guard lock(mutex);
      lines.emplace_back(line);
    });
  }
  ~QuietLog() { set_net_log_sink({}); }
  bool contains(std::string_view text) {
    std::lock_guard lock(mutex);
    for (const auto& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
};

// How a client session ended, and what it received.
struct Ending {
  std::mutex mutex;
  std::condition_variable cv;
  std::optional<CloseInfo> info;
  std::vector<std::vector<uint8_t>> messages;

  static SessionHandlers handlers(const std::shared_ptr<Ending>& e) {
    return {.on_message =
                [e](Session&, std::vector<uint8_t> m) {
                  std::lock_guard lock(e->mutex);
                  e->messages.push_back(std::move(m));
                  e->cv.notify_all();
                },
            .on_close =
                [e](Session&, const CloseInfo& c) {
                  std::lock_guard lock(e->mutex);
                  e->info = c;
                  e->cv.notify_all();
                }};
  }
  bool wait_closed() {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, 10s, [&] { return info.has_value(); });
  }
  bool wait_messages(size_t n) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, 10s, [&] { return messages.size() >= n; });
  }
};

}  // namespace

TEST_CASE("handshake_action: a refusal wins, then plain HTTP, then 404 without WebSocket, else upgrade") {
  for (const unsigned status : {503u, 429u})
    for (const bool upgrade : {false, true})
      for (const bool http : {false, true})
        for (const bool websocket : {false, true})
          CHECK(handshake_action(status, upgrade, http, websocket) == HandshakeAction::Refuse);
  // Not an upgrade: the HTTP handler answers it when there is one, also on an HTTP-only server.
  CHECK(handshake_action(0, false, true, true) == HandshakeAction::Http);
  CHECK(handshake_action(0, false, true, false) == HandshakeAction::Http);
  // Not an upgrade and no HTTP handler: the upgrade fails (Beast answers 400), or 404 HTTP-only.
  CHECK(handshake_action(0, false, false, true) == HandshakeAction::Upgrade);
  CHECK(handshake_action(0, false, false, false) == HandshakeAction::NotFound);
  // An upgrade request: upgraded, or 404 on an HTTP-only server, whatever the HTTP handler.
  CHECK(handshake_action(0, true, true, true) == HandshakeAction::Upgrade);
  CHECK(handshake_action(0, true, false, true) == HandshakeAction::Upgrade);
  CHECK(handshake_action(0, true, true, false) == HandshakeAction::NotFound);
  CHECK(handshake_action(0, true, false, false) == HandshakeAction::NotFound);

  CHECK(net_detail::refusal_body(429) == "too many connections from your address\n");
  CHECK(net_detail::refusal_body(503) == "too many connections\n");
}

TEST_CASE("evict_strangers: a silent connection in its handshake, then an open session, make room") {
  QuietLog log;
  NetContext ctx(2, false);
  ServerOptions options;
  options.max_connections = 1;
  options.evict_strangers = true;
  Server server(
      ctx,
      [](std::shared_ptr<Session> s) {
        s->set_handlers(
            {.on_message = [](Session& session, std::vector<uint8_t> m) { session.send(std::move(m)); },
             .on_close = [](Session&, const CloseInfo&) {}});
      },
      options);
  server.listen("127.0.0.1", 0);
  ctx.start();
  const std::string url = "ws://127.0.0.1:" + std::to_string(server.port()) + "/";
  NetContext client_ctx(1, false);
  client_ctx.start();
  Client client(client_ctx);

  // A connection that never sends its upgrade request holds the one slot, in its handshake.
  testing::RawWebSocket mute(server.port(), 10s);
  REQUIRE(mute.connected());
  for (int i = 0; i < 500 && server.connection_count() < 1; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(server.connection_count() == 1);

  // The next connection evicts it (dropped unanswered: it never upgraded) and is admitted.
  auto first = std::make_shared<Ending>();
  auto a = client.connect_sync(url, Ending::handlers(first));
  CHECK(mute.at_eof());
  CHECK(server.evicted_count() == 1);
  CHECK(log.contains("handshake failed: closed during the handshake: evicted"));
  CHECK(a->send({1}));
  REQUIRE(first->wait_messages(1));

  // Now an open session holds the slot: it is closed with 1001 for the next one.
  auto second = std::make_shared<Ending>();
  auto b = client.connect_sync(url, Ending::handlers(second));
  REQUIRE(first->wait_closed());
  CHECK(first->info->code == CloseCode::GoingAway);
  CHECK(first->info->reason == "evicted: newer connections need the room");
  CHECK(first->info->by_peer);
  CHECK(server.evicted_count() == 2);
  CHECK(server.refused_count() == 0);
  CHECK(b->send({2}));
  REQUIRE(second->wait_messages(1));
  CHECK(second->messages[0] == std::vector<uint8_t>{2});
  CHECK(server.connection_count() == 1);
}
