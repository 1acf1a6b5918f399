// The WebSocket transport (net/) over real loopback sockets: echo, limits, refusals, timeouts,
// abuse bounds (oversized frames, per-address limits, silent and trickling peers, floods) and
// graceful shutdown. Waits are condition variables with generous deadlines, never sleeps.
#include <doctest/doctest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net/client.h"
#include "net/context.h"
#include "net/error.h"
#include "net/server.h"
#include "net/session.h"
#include "net/testing/raw_websocket.h"
#include "tests/http_get.h"

using namespace tribunal;
using namespace std::chrono_literals;

namespace {

constexpr auto kWait = 10s;  // generous: a failure is a hang cut short, not a timing race

// Captures the transport's log lines (and keeps test output quiet); restores the default sink.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> lines;
  LogCapture() {
    set_net_log_sink([this](std::string_view line) {
      std::lock_guard lock(mutex);
      lines.emplace_back(line);
    });
  }
  ~LogCapture() { set_net_log_sink({}); }
  bool contains(std::string_view text) {
    std::lock_guard lock(mutex);
    for (const auto& line : lines)
      if (line.find(text) != std::string::npos) return true;
    return false;
  }
};

// What one client session received.
struct Inbox {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::vector<uint8_t>> messages;
  std::optional<CloseInfo> closed;

  static SessionHandlers handlers(const std::shared_ptr<Inbox>& box) {
    return SessionHandlers{
        .on_message =
            [box](Session&, std::vector<uint8_t> m) {
              std::lock_guard lock(box->mutex);
              box->messages.push_back(std::move(m));
              box->cv.notify_all();
            },
        .on_close =
            [box](Session&, const CloseInfo& info) {
              std::lock_guard lock(box->mutex);
              box->closed = info;
              box->cv.notify_all();
            },
    };
  }
  bool wait_messages(size_t n) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, kWait, [&] { return messages.size() >= n; });
  }
  bool wait_closed() {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, kWait, [&] { return closed.has_value(); });
  }
};

const std::vector<uint8_t> kFlood = {'f', 'l', 'o', 'o', 'd'};
const std::vector<uint8_t> kThrow = {'t', 'h', 'r', 'o', 'w'};

// What the server saw of its sessions' ends.
struct ServerEvents {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<CloseInfo> closes;
  std::vector<bool> sent_after_close;
  bool wait_closes(size_t n) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, kWait, [&] { return closes.size() >= n; });
  }
};

// Echoes every binary message; "flood" makes it send 100 messages at once (past the queue limit),
// "throw" makes its handler throw.
struct EchoServer {
  NetContext ctx{2, false};
  std::shared_ptr<ServerEvents> events = std::make_shared<ServerEvents>();
  Server server;

  explicit EchoServer(ServerOptions options = {})
      : server(
            ctx,
            [ev = events](std::shared_ptr<Session> s) {
              s->set_handlers(SessionHandlers{
                  .on_message =
                      [](Session& session, std::vector<uint8_t> m) {
                        if (m == kThrow) throw std::runtime_error("handler bug");
                        if (m == kFlood) {
                          for (int i = 0; i < 100; ++i) session.send(std::vector<uint8_t>(1000, 7));
                          return;
                        }
                        session.send(std::move(m));
                      },
                  .on_close =
                      [ev](Session& session, const CloseInfo& info) {
                        const bool sent = session.send({1, 2, 3});
                        std::lock_guard lock(ev->mutex);
                        ev->closes.push_back(info);
                        ev->sent_after_close.push_back(sent);
                        ev->cv.notify_all();
                      },
              });
            },
            options) {
    server.listen("127.0.0.1", 0);
    ctx.start();
  }
  std::string url() const { return "ws://127.0.0.1:" + std::to_string(server.port()) + "/tribunal"; }
};

std::vector<uint8_t> pattern(size_t size, uint32_t seed) {
  // push_back, not v[i]: with v[i], g++ 12 -O3 warns of a write past a [64, 68]-byte buffer (a false
  // -Wstringop-overflow).
  std::vector<uint8_t> v;
  v.reserve(size);
  for (size_t i = 0; i < size; ++i) v.push_back(static_cast<uint8_t>((i * 31 + seed * 17 + (i >> 8)) & 0xff));
  return v;
}

}  // namespace

TEST_CASE("parse_ws_url") {
  const WsUrl a = parse_ws_url("ws://127.0.0.1:9000/game?x=1");
  CHECK(a.host == "127.0.0.1");
  CHECK(a.port == 9000);
  CHECK(a.target == "/game?x=1");
  const WsUrl b = parse_ws_url("ws://referee.example");
  CHECK(b.host == "referee.example");
  CHECK(b.port == 80);
  CHECK(b.target == "/");
  const WsUrl c = parse_ws_url("ws://[::1]:7/");
  CHECK(c.host == "::1");
  CHECK(c.port == 7);
  CHECK_FALSE(c.tls);
  const WsUrl d = parse_ws_url("wss://example.org/x");
  CHECK(d.tls);
  CHECK(d.host == "example.org");
  CHECK(d.port == 443);
  CHECK(d.target == "/x");
  for (const char* bad : {"http://x:1/", "ws://:1/", "ws://x:/", "ws://x:0/", "ws://x:65536/", "ws://x:12ab/",
                          "ws://[::1/", "ws://u@x:1/", "ws://"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_ws_url(bad), NetError);
  }
}

TEST_CASE("echo: binary messages come back byte for byte and in order") {
  LogCapture log;
  EchoServer echo;
  NetContext client_ctx(2, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  auto session = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(box));
  REQUIRE(session);
  CHECK(session->is_open());
  CHECK(session->remote_endpoint() == "127.0.0.1:" + std::to_string(echo.server.port()));

  const std::vector<size_t> sizes = {0, 1, 65536, kMaxMessageBytes, 3, 1000};
  std::vector<std::vector<uint8_t>> sent;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(pattern(sizes[i], static_cast<uint32_t>(i)));
    CHECK(session->send(sent.back()));
  }
  REQUIRE(box->wait_messages(sizes.size()));
  std::lock_guard lock(box->mutex);
  REQUIRE(box->messages.size() == sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    CHECK(box->messages[i] == sent[i]);
  }
}

TEST_CASE("a message over kMaxMessageBytes closes with 1009; the server keeps serving") {
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  using tcp = boost::asio::ip::tcp;
  LogCapture log;
  EchoServer echo;
  NetContext client_ctx(2, false);
  client_ctx.start();
  auto bystander_box = std::make_shared<Inbox>();
  auto bystander = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(bystander_box));

  SUBCASE("the peer receives the 1009 close frame") {
    // A plain Beast client sends kMaxMessageBytes + 1 as two fragments, so the server refuses at the
    // last, 1-byte fragment with nothing left unread: it then closes cleanly and the 1009 frame
    // arrives. (Refused mid-frame, Beast's teardown may reset a connection the peer is still writing
    // to, and the peer may see the reset rather than the frame; see the other subcase.)
    boost::asio::io_context io;
    websocket::stream<tcp::socket> ws(io);
    ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), echo.server.port()));
    ws.handshake("127.0.0.1", "/");
    ws.binary(true);
    const auto big = pattern(kMaxMessageBytes + 1, 9);
    ws.write_some(false, boost::asio::buffer(big.data(), kMaxMessageBytes));
    ws.write_some(true, boost::asio::buffer(big.data() + kMaxMessageBytes, 1));
    beast::flat_buffer buffer;
    beast::error_code ec;
    ws.read(buffer, ec);
    CHECK(ec == websocket::error::closed);
    CHECK(ws.reason().code == 1009);
  }
  SUBCASE("a Session client sending one oversized frame is disconnected") {
    // The sending side's own limit is raised so that it lets the oversized message out.
    ClientOptions big;
    big.session.max_message_bytes = 2 * kMaxMessageBytes;
    auto box = std::make_shared<Inbox>();
    auto session = Client(client_ctx, big).connect_sync(echo.url(), Inbox::handlers(box));
    CHECK(session->send(pattern(kMaxMessageBytes + 1, 9)));
    REQUIRE(box->wait_closed());
    CHECK((box->closed->code == CloseCode::TooBig || box->closed->code == kCloseAbnormal));
    CHECK(box->messages.empty());
  }
  REQUIRE(echo.events->wait_closes(1));
  CHECK(echo.events->closes[0].code == CloseCode::TooBig);
  CHECK_FALSE(echo.events->closes[0].by_peer);
  CHECK(log.contains("closed 1009"));

  // Our own limit refuses locally (no close) what the peer would refuse.
  CHECK_FALSE(bystander->send(pattern(kMaxMessageBytes + 1, 1)));
  CHECK(bystander->is_open());

  // Existing and new clients are still served.
  const auto m = pattern(100, 4);
  CHECK(bystander->send(m));
  REQUIRE(bystander_box->wait_messages(1));
  CHECK(bystander_box->messages[0] == m);
  auto fresh_box = std::make_shared<Inbox>();
  auto fresh = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(fresh_box));
  CHECK(fresh->send(m));
  REQUIRE(fresh_box->wait_messages(1));
  CHECK(fresh_box->messages[0] == m);
}

TEST_CASE("a plain Beast client: binary frames echo, a text frame is refused with 1003") {
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  using tcp = boost::asio::ip::tcp;
  LogCapture log;
  EchoServer echo;
  boost::asio::io_context io;
  websocket::stream<tcp::socket> ws(io);
  ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), echo.server.port()));
  ws.handshake("127.0.0.1", "/");

  ws.binary(true);
  const auto m = pattern(4096, 2);
  ws.write(boost::asio::buffer(m));
  beast::flat_buffer buffer;
  ws.read(buffer);
  CHECK(ws.got_binary());
  REQUIRE(buffer.size() == m.size());
  CHECK(std::memcmp(buffer.data().data(), m.data(), m.size()) == 0);

  ws.text(true);
  ws.write(boost::asio::buffer(std::string("hello")));
  buffer.clear();
  beast::error_code ec;
  ws.read(buffer, ec);
  CHECK(ec == websocket::error::closed);
  CHECK(ws.reason().code == 1003);
  REQUIRE(echo.events->wait_closes(1));
  CHECK(echo.events->closes[0].code == kCloseUnsupportedData);
  CHECK(log.contains("text frame"));

  // A close frame without a status code is reported as 1005.
  websocket::stream<tcp::socket> quiet(io);
  quiet.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), echo.server.port()));
  quiet.handshake("127.0.0.1", "/");
  quiet.close(websocket::close_reason());
  REQUIRE(echo.events->wait_closes(2));
  CHECK(echo.events->closes[1].code == kCloseNoStatus);
  CHECK(echo.events->closes[1].by_peer);
}

TEST_CASE("an exception from on_message closes the session with 1011, not the server") {
  LogCapture log;
  EchoServer echo;
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  auto session = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(box));
  CHECK(session->send(kThrow));
  REQUIRE(box->wait_closed());
  CHECK(box->closed->code == CloseCode::InternalError);
  CHECK(log.contains("handler bug"));
  auto other_box = std::make_shared<Inbox>();
  auto other = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(other_box));
  CHECK(other->send({1}));
  REQUIRE(other_box->wait_messages(1));
}

TEST_CASE("50 concurrent clients each get their own echoes") {
  LogCapture log;
  EchoServer echo;
  NetContext client_ctx(2, false);
  client_ctx.start();
  Client client(client_ctx);
  constexpr int kClients = 50;
  constexpr int kMessages = 5;

  // Connect all at once (asynchronously), then wait for every handshake.
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<std::shared_ptr<Session>> sessions(kClients);
  std::vector<std::shared_ptr<Inbox>> boxes(kClients);
  int done = 0;
  std::vector<std::string> errors;
  for (int c = 0; c < kClients; ++c) {
    boxes[c] = std::make_shared<Inbox>();
    client.connect(echo.url(), [&, c](std::shared_ptr<Session> s, const std::string& error) {
      if (s) s->set_handlers(Inbox::handlers(boxes[c]));
      std::lock_guard lock(mutex);
      sessions[c] = std::move(s);
      if (!error.empty()) errors.push_back(error);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, kWait, [&] { return done == kClients; }));
    REQUIRE(errors.empty());
  }
  for (int c = 0; c < kClients; ++c)
    for (int i = 0; i < kMessages; ++i) CHECK(sessions[c]->send(pattern(64 + i, c * 100 + i)));
  for (int c = 0; c < kClients; ++c) {
    CAPTURE(c);
    REQUIRE(boxes[c]->wait_messages(kMessages));
    std::lock_guard lock(boxes[c]->mutex);
    for (int i = 0; i < kMessages; ++i) CHECK(boxes[c]->messages[i] == pattern(64 + i, c * 100 + i));
  }
  CHECK(echo.server.connection_count() == kClients);
}

TEST_CASE("max_connections: the extra client is refused with 503; a freed slot admits again") {
  LogCapture log;
  ServerOptions options;
  options.max_connections = 2;
  EchoServer echo(options);
  NetContext client_ctx(1, false);
  client_ctx.start();
  Client client(client_ctx);
  auto a = client.connect_sync(echo.url(), Inbox::handlers(std::make_shared<Inbox>()));
  auto b = client.connect_sync(echo.url(), Inbox::handlers(std::make_shared<Inbox>()));
  CHECK(echo.server.connection_count() == 2);
  std::string error;
  try {
    client.connect_sync(echo.url());
  } catch (const NetError& e) {
    error = e.what();
  }
  CHECK(error.find("503") != std::string::npos);
  CHECK(log.contains("refusing"));

  a->close();
  REQUIRE(echo.events->wait_closes(1));
  CHECK(echo.server.connection_count() == 1);
  auto box = std::make_shared<Inbox>();
  auto c = client.connect_sync(echo.url(), Inbox::handlers(box));
  CHECK(c->send({42}));
  REQUIRE(box->wait_messages(1));
  CHECK(box->messages[0] == std::vector<uint8_t>{42});
}

TEST_CASE("the application idle timeout closes a silent session with 1001") {
  LogCapture log;
  ServerOptions options;
  options.session.idle_timeout = 200ms;
  EchoServer echo(options);
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  const auto start = std::chrono::steady_clock::now();
  auto session = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(box));
  REQUIRE(box->wait_closed());
  CHECK(std::chrono::steady_clock::now() - start >= 200ms);  // a timer never fires early
  CHECK(box->closed->code == CloseCode::GoingAway);
  CHECK(box->closed->reason == "idle timeout");
  CHECK(box->closed->by_peer);
  CHECK(log.contains("idle"));
}

TEST_CASE("send after close is a no-op; close is idempotent") {
  LogCapture log;
  EchoServer echo;
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  auto session = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(box));
  // Queued before the close: still delivered (close flushes the queue first).
  CHECK(session->send({5}));
  session->close(CloseCode::Normal, "bye");
  CHECK_FALSE(session->is_open());
  CHECK_FALSE(session->send({6}));
  session->close(CloseCode::PolicyViolation, "again");
  REQUIRE(box->wait_closed());
  CHECK(box->closed->code == CloseCode::Normal);
  CHECK(box->closed->reason == "bye");
  CHECK_FALSE(box->closed->by_peer);
  CHECK(box->closed->error.empty());
  CHECK_FALSE(session->send({7}));
  REQUIRE(echo.events->wait_closes(1));
  CHECK(echo.events->closes[0].code == CloseCode::Normal);
  CHECK(echo.events->closes[0].by_peer);
  CHECK_FALSE(echo.events->sent_after_close[0]);  // the server's send inside on_close
}

TEST_CASE("a peer that overflows its write queue is closed with 1008") {
  LogCapture log;
  EchoServer echo;  // answers "flood" with 100 messages sent at once: over the 64-message limit
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  auto session = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(box));
  CHECK(session->send(kFlood));
  REQUIRE(box->wait_closed());
  CHECK(box->closed->code == CloseCode::PolicyViolation);
  CHECK(box->closed->by_peer);
  CHECK(box->messages.size() < 100);
  CHECK(log.contains("write queue full"));
}

TEST_CASE("client errors: refused port, handshake timeout") {
  LogCapture log;
  NetContext ctx(1, false);
  // A listener that accepts TCP but never answers the upgrade request.
  boost::asio::ip::tcp::acceptor mute(ctx.io(), {boost::asio::ip::make_address("127.0.0.1"), 0});
  const uint16_t mute_port = mute.local_endpoint().port();
  uint16_t closed_port = 0;
  {
    boost::asio::ip::tcp::acceptor tmp(ctx.io(), {boost::asio::ip::make_address("127.0.0.1"), 0});
    closed_port = tmp.local_endpoint().port();
  }
  ctx.start();
  CHECK_THROWS_AS(Client(ctx).connect_sync("ws://127.0.0.1:" + std::to_string(closed_port) + "/"), NetError);

  ClientOptions quick;
  quick.connect_timeout = 300ms;
  std::string error;
  try {
    Client(ctx, quick).connect_sync("ws://127.0.0.1:" + std::to_string(mute_port) + "/");
  } catch (const NetError& e) {
    error = e.what();
  }
  CHECK(error.find("timed out") != std::string::npos);
  CHECK(log.contains("failed"));
}

TEST_CASE("graceful shutdown closes every session with 1001 and run returns") {
  LogCapture log;
  auto events = std::make_shared<ServerEvents>();
  NetContext server_ctx(2, false);
  Server server(server_ctx, [events](std::shared_ptr<Session> s) {
    s->set_handlers({.on_message = {}, .on_close = [events](Session&, const CloseInfo& info) {
                       std::lock_guard lock(events->mutex);
                       events->closes.push_back(info);
                       events->cv.notify_all();
                     }});
  });
  const uint16_t port = server.listen("127.0.0.1", 0);
  server_ctx.start();
  const std::string url = "ws://127.0.0.1:" + std::to_string(port) + "/";

  NetContext client_ctx(1, false);
  client_ctx.start();
  std::vector<std::shared_ptr<Inbox>> boxes;
  std::vector<std::shared_ptr<Session>> sessions;
  for (int i = 0; i < 3; ++i) {
    boxes.push_back(std::make_shared<Inbox>());
    sessions.push_back(Client(client_ctx).connect_sync(url, Inbox::handlers(boxes.back())));
  }

  server_ctx.shutdown();
  server_ctx.join();  // returns once every session has finished its close handshake
  for (auto& box : boxes) {
    REQUIRE(box->wait_closed());
    CHECK(box->closed->code == CloseCode::GoingAway);
    CHECK(box->closed->by_peer);
  }
  REQUIRE(events->wait_closes(3));
  for (const auto& info : events->closes) {
    CHECK(info.code == CloseCode::GoingAway);
    CHECK_FALSE(info.by_peer);
    CHECK(info.error.empty());
  }
  CHECK(server_ctx.shutting_down());
  CHECK_THROWS_AS(Client(client_ctx).connect_sync(url), NetError);  // no longer accepting
}

TEST_CASE("SIGTERM triggers the graceful shutdown") {
  LogCapture log;
  NetContext server_ctx(1, true);
  Server server(server_ctx, [](std::shared_ptr<Session>) {});
  const uint16_t port = server.listen("127.0.0.1", 0);
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  std::thread runner([&] { server_ctx.run(); });
  auto session =
      Client(client_ctx).connect_sync("ws://127.0.0.1:" + std::to_string(port) + "/", Inbox::handlers(box));
  std::raise(SIGTERM);
  REQUIRE(box->wait_closed());
  CHECK(box->closed->code == CloseCode::GoingAway);
  runner.join();  // run() returned
  CHECK(log.contains("signal 15"));
}

// ---- abuse bounds ------------------------------------------------------------------------------

namespace {

using testing::close_code_of;
using testing::masked_binary_header;

// A raw peer of the echo server (net/testing/raw_websocket.h); a failed connection fails the test.
struct RawPeer : testing::RawWebSocket {
  explicit RawPeer(uint16_t port) : RawWebSocket(port, kWait) { REQUIRE(connected()); }
};

std::string connect_error(Client& client, const std::string& url) {
  try {
    client.connect_sync(url);
  } catch (const NetError& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("a frame header announcing 1 GiB is refused with 1009 before any payload") {
  LogCapture log;
  EchoServer echo;
  {
    RawPeer peer(echo.server.port());
    REQUIRE(peer.handshake());
    // FIN + binary, masked, 64-bit length 2^30, mask key; no payload follows.
    const uint8_t header[] = {0x82, 0x80 | 127, 0, 0, 0, 0, 0x40, 0, 0, 0, 1, 2, 3, 4};
    REQUIRE(peer.write(header, sizeof header));
    CHECK(close_code_of(peer.read_some(kWait)) == 1009);
  }  // hangs up instead of answering the close frame
  REQUIRE(echo.events->wait_closes(1));
  CHECK(echo.events->closes[0].code == CloseCode::TooBig);
}

TEST_CASE("per-address limit: a fourth connection from one address gets 429, another address is admitted") {
  LogCapture log;
  ServerOptions options;
  options.max_connections_per_address = 3;
  EchoServer echo(options);
  NetContext client_ctx(1, false);
  client_ctx.start();
  Client client(client_ctx);
  std::vector<std::shared_ptr<Session>> held;
  for (int i = 0; i < 3; ++i)
    held.push_back(client.connect_sync(echo.url(), Inbox::handlers(std::make_shared<Inbox>())));
  const std::string error = connect_error(client, echo.url());
  CHECK(error.find("429") != std::string::npos);
  CHECK(echo.server.refused_count() == 1);
  CHECK(log.contains("from this address"));

  ClientOptions other;
  other.local_address = "127.0.0.2";
  auto box = std::make_shared<Inbox>();
  auto elsewhere = Client(client_ctx, other).connect_sync(echo.url(), Inbox::handlers(box));
  CHECK(elsewhere->send({9}));
  REQUIRE(box->wait_messages(1));
  CHECK(echo.server.connection_count() == 4);

  held[0]->close();  // frees a slot of 127.0.0.1
  REQUIRE(echo.events->wait_closes(1));
  auto again_box = std::make_shared<Inbox>();
  auto again = client.connect_sync(echo.url(), Inbox::handlers(again_box));
  CHECK(again->send({8}));
  REQUIRE(again_box->wait_messages(1));
}

TEST_CASE("refusals in progress are bounded: beyond max_refusing, excess connections are closed unanswered") {
  LogCapture log;
  ServerOptions options;
  options.max_connections = 1;
  options.max_refusing = 1;
  EchoServer echo(options);
  NetContext client_ctx(1, false);
  client_ctx.start();
  Client client(client_ctx);
  auto admitted = client.connect_sync(echo.url(), Inbox::handlers(std::make_shared<Inbox>()));
  std::string error;
  {
    RawPeer mute(echo.server.port());  // refused, but its refusal waits for an upgrade request
    // The mute peer must hold the one refusal slot before the client comes (else the client takes it).
    for (int i = 0; i < 500 && echo.server.refused_count() < 1; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(echo.server.refused_count() == 1);
    error = connect_error(client, echo.url());
    CHECK_FALSE(error.empty());
    CHECK(error.find("503") == std::string::npos);  // not answered: closed at once
    CHECK(log.contains("unanswered"));
  }
  // The mute peer has gone, so its refusal slot is free again: the next one is answered with 503.
  std::string answered;
  for (int i = 0; i < 100 && answered.find("503") == std::string::npos; ++i)
    answered = connect_error(client, echo.url());
  CHECK(answered.find("503") != std::string::npos);
  CHECK(echo.server.refused_count() >= 3);
}

TEST_CASE("handshake timeout: a connection that never sends its upgrade request is dropped") {
  LogCapture log;
  ServerOptions options;
  options.handshake_timeout = 200ms;
  EchoServer echo(options);
  RawPeer mute(echo.server.port());
  CHECK(mute.at_eof());  // the server hung up (SO_RCVTIMEO would make this fail after kWait)
}

TEST_CASE("first-message timeout: a silent session is closed with 1001, a talking one is not") {
  LogCapture log;
  ServerOptions options;
  options.session.first_message_timeout = 200ms;
  EchoServer echo(options);
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto silent_box = std::make_shared<Inbox>();
  auto talking_box = std::make_shared<Inbox>();
  auto silent = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(silent_box));
  auto talking = Client(client_ctx).connect_sync(echo.url(), Inbox::handlers(talking_box));
  CHECK(talking->send({1}));
  REQUIRE(silent_box->wait_closed());
  CHECK(silent_box->closed->code == CloseCode::GoingAway);
  CHECK(silent_box->closed->reason == "no message");
  // Well past the limit, the session that spoke in time is still served.
  REQUIRE(talking_box->wait_messages(1));
  CHECK(talking->send({2}));
  REQUIRE(talking_box->wait_messages(2));
  CHECK(talking->is_open());
  CHECK(log.contains("no message within 200 ms"));
}

TEST_CASE("message timeout: a frame trickled byte by byte is cut off with 1008") {
  LogCapture log;
  ServerOptions options;
  options.session.first_message_timeout = 0ms;  // only the message timeout here
  options.session.message_timeout = 300ms;
  EchoServer echo(options);
  RawPeer peer(echo.server.port());
  REQUIRE(peer.handshake());
  const auto header = masked_binary_header(1000);  // 1000 bytes announced
  REQUIRE(peer.write(header.data(), header.size()));
  unsigned code = 0;
  int sent = 0;
  // One byte every 20 ms: bytes keep flowing (Beast's own idle timer never fires), the frame never ends.
  while (sent < 999 && code == 0) {
    const uint8_t byte = 0x55;
    if (!peer.write(&byte, 1)) break;
    ++sent;
    code = close_code_of(peer.read_some(20ms));
  }
  CHECK(code == 1008);
  CHECK(sent < 999);
  REQUIRE(echo.events->wait_closes(1));
  CHECK(echo.events->closes[0].code == CloseCode::PolicyViolation);
  CHECK(echo.events->closes[0].reason == "message too slow");
  CHECK(log.contains("message not complete"));
}

TEST_CASE("a flooding peer is held back by TCP while its handler is busy; other sessions are served") {
  namespace beast = boost::beast;
  namespace websocket = beast::websocket;
  using tcp = boost::asio::ip::tcp;
  LogCapture log;
  constexpr int kFlood = 1000;               // 64 MiB in all: far beyond the socket buffers
  const std::vector<uint8_t> big(65536, 3);  // flood messages; small ones are echoed
  std::mutex mutex;
  std::condition_variable cv;
  bool gate_open = false;
  int received = 0;
  bool in_order = true;
  NetContext server_ctx(2, false);
  Server server(server_ctx, [&](std::shared_ptr<Session> s) {
    s->set_handlers({.on_message =
                         [&](Session& session, std::vector<uint8_t> m) {
                           if (m.size() < 100) return (void)session.send(std::move(m));
                           std::unique_lock lock(mutex);
                           // A handler stuck on the first flood message (tests only: handlers must not
                           // block).
                           cv.wait(lock, [&] { return gate_open; });
                           in_order = in_order && m[0] == static_cast<uint8_t>(received % 251);
                           ++received;
                           cv.notify_all();
                         },
                     .on_close = {}});
  });
  const uint16_t port = server.listen("127.0.0.1", 0);
  server_ctx.start();

  std::atomic<int> written{0};
  std::thread flooder([&] {
    boost::asio::io_context io;
    websocket::stream<tcp::socket> ws(io);
    ws.next_layer().connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    ws.handshake("127.0.0.1", "/");
    ws.binary(true);
    for (int i = 0; i < kFlood; ++i) {
      std::vector<uint8_t> m = big;
      m[0] = static_cast<uint8_t>(i % 251);
      ws.write(boost::asio::buffer(m));  // blocks once the socket buffers are full
      ++written;
    }
  });
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  auto bystander =
      Client(client_ctx).connect_sync("ws://127.0.0.1:" + std::to_string(port) + "/", Inbox::handlers(box));
  for (size_t i = 0; i < 20; ++i) {
    CHECK(bystander->send({static_cast<uint8_t>(i)}));
    REQUIRE(box->wait_messages(i + 1));
  }
  const int written_while_stuck = written;
  CHECK(written_while_stuck < kFlood);  // nothing read on the server's side: the peer is blocked
  {
    std::lock_guard lock(mutex);
    CHECK(received == 0);
    gate_open = true;
    cv.notify_all();
  }
  flooder.join();
  {
    std::unique_lock lock(mutex);
    REQUIRE(cv.wait_for(lock, kWait, [&] { return received == kFlood; }));
    CHECK(in_order);
  }
  server_ctx.stop();
}

TEST_CASE("set_reading(false) holds a flooding peer back: a handler's queue never exceeds one message") {
  LogCapture log;
  constexpr int kMessages = 300;
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<std::shared_ptr<Session>, std::vector<uint8_t>>> queue;
  size_t max_queued = 0;
  int handled = 0;
  bool in_order = true;
  NetContext server_ctx(2, false);
  Server server(server_ctx, [&](std::shared_ptr<Session> s) {
    std::weak_ptr<Session> weak = s;
    s->set_handlers({.on_message =
                         [&, weak](Session& session, std::vector<uint8_t> m) {
                           session.set_reading(false);  // until the worker has taken it
                           std::lock_guard lock(mutex);
                           queue.emplace_back(weak.lock(), std::move(m));
                           max_queued = std::max(max_queued, queue.size());
                           cv.notify_all();
                         },
                     .on_close = {}});
  });
  const uint16_t port = server.listen("127.0.0.1", 0);
  server_ctx.start();
  std::thread worker([&] {
    for (int i = 0; i < kMessages; ++i) {
      std::unique_lock lock(mutex);
      if (!cv.wait_for(lock, kWait, [&] { return !queue.empty(); })) return;
      auto [session, m] = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      in_order = in_order && m.size() == 1000 && m[0] == static_cast<uint8_t>(i);
      ++handled;
      session->set_reading(true);
    }
  });
  NetContext client_ctx(1, false);
  client_ctx.start();
  ClientOptions roomy;
  roomy.session.max_queued_messages = kMessages;
  auto flooder = Client(client_ctx, roomy).connect_sync("ws://127.0.0.1:" + std::to_string(port) + "/");
  for (int i = 0; i < kMessages; ++i)
    CHECK(flooder->send(std::vector<uint8_t>(1000, static_cast<uint8_t>(i))));
  worker.join();
  CHECK(handled == kMessages);
  CHECK(in_order);
  CHECK(max_queued == 1);
  CHECK(flooder->is_open());
  server_ctx.stop();
}

TEST_CASE("wait_for_room: a producer streaming far more than the write queue holds is paced, not closed") {
  // The provider's opening of a large tensor (issue 14): 200 messages of 64 KiB, more than the
  // socket buffers take while the peer reads nothing, through a queue of 4 messages.
  constexpr int kMessages = 200;
  std::mutex mutex;
  std::condition_variable cv;
  int received = 0;
  bool in_order = true;
  std::shared_ptr<Session> reader;
  NetContext server_ctx(1, false);
  Server server(server_ctx, [&](std::shared_ptr<Session> s) {
    s->set_reading(false);  // the peer is slow: it reads nothing at first
    std::lock_guard lock(mutex);
    reader = s;
    s->set_handlers({.on_message =
                         [&](Session&, std::vector<uint8_t> m) {
                           std::lock_guard lock(mutex);
                           in_order = in_order && m.size() == 65536 && m[0] == static_cast<uint8_t>(received);
                           ++received;
                           cv.notify_all();
                         },
                     .on_close = {}});
    cv.notify_all();
  });
  const uint16_t port = server.listen("127.0.0.1", 0);
  server_ctx.start();
  NetContext client_ctx(1, false);
  client_ctx.start();
  ClientOptions small;
  small.session.max_queued_messages = 4;
  auto producer = Client(client_ctx, small).connect_sync("ws://127.0.0.1:" + std::to_string(port) + "/");
  std::thread resume([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the queue is full by now
    std::lock_guard lock(mutex);
    if (reader) reader->set_reading(true);
  });
  bool all_sent = true;
  for (int i = 0; i < kMessages; ++i) {
    REQUIRE(producer->wait_for_room(65536));
    all_sent = producer->send(std::vector<uint8_t>(65536, static_cast<uint8_t>(i))) && all_sent;
  }
  resume.join();
  std::unique_lock lock(mutex);
  cv.wait_for(lock, kWait, [&] { return received == kMessages; });
  CHECK(all_sent);
  CHECK(received == kMessages);
  CHECK(in_order);
  CHECK(producer->is_open());
  lock.unlock();
  producer->close();
  CHECK_FALSE(producer->wait_for_room(1));  // closing: returns at once
  {
    std::lock_guard hold(mutex);
    reader.reset();  // the session must not outlive its context
  }
  server_ctx.stop();
}

TEST_CASE("plain HTTP on the WebSocket port: the handler answers GETs; limits refuse and count as before") {
  LogCapture log;
  ServerOptions options;
  std::atomic<int> requests{0};
  options.http = [&](const HttpRequest& r, std::function<void(HttpResponse)> respond) {
    ++requests;
    if (r.target == "/later") {  // answered from another thread
      std::thread([respond] { respond({200, "text/plain", "late\n"}); }).detach();
      return;
    }
    respond({r.target == "/hello" ? 200u : 404u, "text/plain", r.method + " " + r.target + "\n"});
  };
  EchoServer echo(options);
  const uint16_t port = echo.server.port();
  auto reply = testing::http_get(port, "/hello");
  CHECK(reply.status == 200);
  CHECK(reply.body == "GET /hello\n");
  CHECK(reply.headers.find("Content-Type: text/plain") != std::string::npos);
  CHECK(testing::http_get(port, "/other").status == 404);
  CHECK(testing::http_get(port, "/later").body == "late\n");
  CHECK(testing::http_get(port, "/hello", "HEAD").body.empty());
  CHECK(requests == 4);
  CHECK(echo.server.refused_count() == 0);

  // A server whose one connection slot a WebSocket session takes: the HTTP request is refused with 503
  // and counted, and never reaches the handler.
  options.max_connections = 1;
  EchoServer full(options);
  NetContext client_ctx(1, false);
  client_ctx.start();
  auto box = std::make_shared<Inbox>();
  auto ws = Client(client_ctx).connect_sync(full.url(), Inbox::handlers(box));
  CHECK(testing::http_get(full.server.port(), "/hello").status == 503);
  CHECK(full.server.refused_count() == 1);
  CHECK(requests == 4);
  // The WebSocket session still echoes.
  CHECK(ws->send({7}));
  REQUIRE(box->wait_messages(1));
}

TEST_CASE("an HTTP-only server (websocket = false) answers upgrade requests with 404") {
  LogCapture log;
  ServerOptions options;
  options.websocket = false;
  options.http = [](const HttpRequest&, std::function<void(HttpResponse)> respond) {
    respond({200, "text/plain", "ok\n"});
  };
  EchoServer echo(options);
  CHECK(testing::http_get(echo.server.port(), "/healthz").body == "ok\n");
  NetContext client_ctx(1, false);
  client_ctx.start();
  std::string error;
  try {
    Client(client_ctx).connect_sync(echo.url());
  } catch (const NetError& e) {
    error = e.what();
  }
  CHECK(error.find("HTTP 404") != std::string::npos);
}
