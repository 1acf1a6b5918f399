// The server side of an accepted connection until its session takes over (net/server_handshake.h),
// in the shape of Boost.Beast's advanced_server example: the HTTP request is read first, then
// answered (a refusal, a plain HTTP answer) or upgraded, and the upgraded stream is handed over.
//
// Concurrency: everything but close() runs on the connection's strand (the socket's executor).
#include "net/server_handshake.h"

#include <array>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <utility>

#include "net/context.h"
#include "net/error.h"
#include "net/stream.h"

namespace tribunal::net_detail {

HandshakeAction handshake_action(unsigned refuse_status, bool is_upgrade, bool has_http_handler,
                                 bool websocket) {
  if (refuse_status != 0) return HandshakeAction::Refuse;
  if (!is_upgrade && has_http_handler) return HandshakeAction::Http;
  if (!websocket) return HandshakeAction::NotFound;
  return HandshakeAction::Upgrade;
}

std::string_view refusal_body(unsigned refuse_status) {
  return refuse_status == 429 ? "too many connections from your address\n" : "too many connections\n";
}

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using beast::error_code;
using Clock = std::chrono::steady_clock;

// A connection we are refusing gets this long to send its upgrade request (it is not counted
// against max_connections, so keep it short).
constexpr auto kRefusalTimeout = std::chrono::seconds(5);

template <bool kTls>
class ServerHandshake final : public ServerConnection,
                              public std::enable_shared_from_this<ServerHandshake<kTls>> {
 public:
  ServerHandshake(NetContext& ctx, tcp::socket socket, const ServerOptions& options, unsigned refuse_status,
                  std::function<void(std::shared_ptr<Session>)> on_ready, std::function<void()> on_end)
      : ctx_(ctx),
        id_(next_session_id()),
        strand_(socket.get_executor()),
        session_options_(options.session),
        tls_(kTls ? options.tls : nullptr),
        ws_(make_ws_stream<kTls>(std::move(socket), tls_.get())),
        refuse_status_(refuse_status),
        handshake_timeout_(options.handshake_timeout),
        http_(options.http),
        websocket_(options.websocket),
        on_ready_(std::move(on_ready)),
        on_end_(std::move(on_end)) {}

  uint64_t id() const override { return id_; }

  void close(CloseCode code, std::string reason) override {
    // The strand is kept apart from ws_, which the session owns after the hand-over.
    asio::post(strand_, [self = this->shared_from_this(), code, r = std::move(reason)]() mutable {
      self->close_on_strand(code, std::move(r));
    });
  }

  asio::any_io_executor executor() const { return strand_; }

  // On the strand: the TLS handshake (wss://), then the HTTP request.
  void start() {
    error_code ec;
    const auto endpoint = beast::get_lowest_layer(ws_).socket().remote_endpoint(ec);
    remote_ = ec ? "?" : endpoint_string(endpoint);
    closer_id_ = ctx_.add_closer([weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->close(CloseCode::GoingAway, "shutting down");
    });
    // Beast's websocket timeouts only start with accept; the HTTP request before it is bounded by the
    // tcp_stream's own timer, set to the handshake limit (or shorter when refusing).
    started_ = Clock::now();
    const auto limit = refuse_status_ == 0 ? std::chrono::duration_cast<Clock::duration>(handshake_timeout_)
                                           : std::chrono::duration_cast<Clock::duration>(kRefusalTimeout);
    beast::get_lowest_layer(ws_).expires_after(limit);
    if constexpr (kTls) {
      ws_.next_layer().async_handshake(ssl::stream_base::server,
                                       [self = this->shared_from_this()](error_code ec) {
                                         if (ec) return self->failed("TLS handshake: " + ec.message());
                                         self->read_request();
                                       });
    } else {
      read_request();
    }
  }

 private:
  enum class State { Handshake, HandedOver, Closed };

  void log(const std::string& what) const {
    net_log("session " + std::to_string(id_) + " " + remote_ + ": " + what);
  }

  void close_on_strand(CloseCode code, std::string reason) {
    if (state_ == State::HandedOver) {
      if (auto session = session_.lock()) session->close(code, std::move(reason));
      return;
    }
    if (state_ != State::Handshake) return;
    // Once the upgrade is under way the peer may already consider the session open: let the
    // handshake finish (it is bounded by its timeout) and close properly, so the peer gets the code.
    if (upgrading_) {
      if (!pending_close_) pending_close_.emplace(code, std::move(reason));
      return;
    }
    // The pending step then fails and reports this.
    if (abort_reason_.empty()) abort_reason_ = "closed during the handshake: " + reason;
    beast::get_lowest_layer(ws_).close();
  }

  void read_request() {
    http::async_read(ws_.next_layer(), buffer_, request_,
                     [self = this->shared_from_this()](error_code ec, size_t) { self->on_request(ec); });
  }

  void on_request(error_code ec) {
    if (ec) return failed("reading the upgrade request: " + ec.message());
    switch (handshake_action(refuse_status_, websocket::is_upgrade(request_), static_cast<bool>(http_),
                             websocket_)) {
      case HandshakeAction::Refuse:
        // The request was read first so that the peer sees the status (closing with unread input
        // would reset the connection instead).
        return reply(refuse_status_, "text/plain", std::string(refusal_body(refuse_status_)));
      case HandshakeAction::Http:
        return serve_http();
      case HandshakeAction::NotFound:
        return reply(404, "text/plain; charset=utf-8", "this address serves plain HTTP only\n");
      case HandshakeAction::Upgrade:
        break;
    }
    beast::get_lowest_layer(ws_).expires_never();  // websocket timeouts take over
    // The rest of the handshake limit covers the WebSocket accept.
    auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
    const auto left = started_ + handshake_timeout_ - Clock::now();
    timeouts.handshake_timeout = std::max<Clock::duration>(left, std::chrono::milliseconds(1));
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, kAgent); }));
    upgrading_ = true;
    ws_.async_accept(request_, [self = this->shared_from_this()](error_code ec) {
      if (ec) return self->failed("handshake: " + ec.message());
      self->hand_over();
    });
  }

  // A plain HTTP request (ServerOptions::http): the handler answers once, from any thread; the answer
  // is written on the strand. The tcp_stream's timer (the handshake limit) still bounds the whole.
  void serve_http() {
    auto gone = std::make_shared<std::atomic<bool>>(false);
    HttpRequest request{std::string(request_.method_string()), std::string(request_.target()), remote_, gone};
    auto answered = std::make_shared<std::atomic<bool>>(false);
    // Holds the connection: while the handler works elsewhere no operation of it is pending but the
    // watch below.
    auto respond = [self = this->shared_from_this(), answered](HttpResponse r) {
      if (answered->exchange(true)) return;
      asio::post(self->strand_, [self, r = std::move(r)]() mutable {
        if (self->state_ != State::Handshake) return;  // ended meanwhile (shutdown, timeout)
        self->reply(r.status, r.content_type, std::move(r.body), r.headers);
      });
    };
    watch_peer(gone);
    try {
      http_(request, respond);
    } catch (const std::exception& e) {
      log(std::string("HTTP handler threw: ") + e.what());
      respond(HttpResponse{500, "text/plain; charset=utf-8", "internal error\n"});
    }
  }

  // While a plain HTTP request is answered elsewhere: a read that ends (EOF, reset) tells the handler
  // the peer is gone (HttpRequest::peer_gone); bytes sent meanwhile (nothing is pipelined: the
  // connection closes after the answer) are discarded. Writing the answer closes the socket, which
  // ends this read too.
  void watch_peer(const std::shared_ptr<std::atomic<bool>>& gone) {
    ws_.next_layer().async_read_some(asio::buffer(discard_),
                                     [self = this->shared_from_this(), gone](error_code ec, size_t) {
                                       if (ec) {
                                         gone->store(true);
                                         return;
                                       }
                                       if (self->state_ == State::Handshake) self->watch_peer(gone);
                                     });
  }

  // Writes one HTTP response to the request read and ends the connection.
  void reply(unsigned status, const std::string& content_type, std::string body,
             const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    reply_.result(static_cast<http::status>(status));
    reply_.version(request_.version());
    reply_.set(http::field::server, kAgent);
    reply_.set(http::field::content_type, content_type);
    for (const auto& [name, value] : headers) reply_.set(name, value);
    reply_.keep_alive(false);
    reply_.body() = request_.method() == http::verb::head ? std::string() : std::move(body);
    reply_.prepare_payload();
    http::async_write(ws_.next_layer(), reply_,
                      [self = this->shared_from_this()](error_code, size_t) { self->end_reply(); });
  }

  void end_reply() {
    error_code ignored;
    beast::get_lowest_layer(ws_).socket().shutdown(tcp::socket::shutdown_send, ignored);
    beast::get_lowest_layer(ws_).close();
    if (state_ != State::Handshake) return;
    end();
  }

  void failed(const std::string& error) {
    if (state_ != State::Handshake) return;
    beast::get_lowest_layer(ws_).close();
    log("handshake failed: " + (abort_reason_.empty() ? error : abort_reason_));
    end();
  }

  // The connection ended without a session.
  void end() {
    state_ = State::Closed;
    ctx_.remove_closer(closer_id_);
    if (on_end_) std::exchange(on_end_, nullptr)();
  }

  // The WebSocket handshake is done: the session takes the stream, and with it the rest of the
  // connection's life (its end, a close asked for during the upgrade, shutdown).
  void hand_over() {
    if (state_ != State::Handshake) return;
    if (!abort_reason_.empty()) return failed(abort_reason_);
    state_ = State::HandedOver;
    SessionStart start{id_, remote_, std::move(on_ready_), std::move(on_end_), std::move(pending_close_)};
    if constexpr (kTls)
      session_ = start_session(ctx_, std::move(ws_), session_options_, tls_, std::move(start));
    else
      session_ = start_session(ctx_, std::move(ws_), session_options_, std::move(start));
    ctx_.remove_closer(closer_id_);  // the session has registered its own
  }

  NetContext& ctx_;
  const uint64_t id_;
  const asio::any_io_executor strand_;
  const SessionOptions session_options_;
  const std::shared_ptr<TlsContext> tls_;  // kept alive while the stream uses its context
  WsStream<kTls> ws_;
  const unsigned refuse_status_;  // 0: admitted
  const std::chrono::milliseconds handshake_timeout_;
  const HttpHandler http_;
  const bool websocket_;

  // ---- strand only ----
  std::function<void(std::shared_ptr<Session>)> on_ready_;
  std::function<void()> on_end_;
  State state_ = State::Handshake;
  std::string remote_;
  uint64_t closer_id_ = 0;
  Clock::time_point started_;
  std::string abort_reason_;
  bool upgrading_ = false;  // the WebSocket accept is in flight
  PendingClose pending_close_;
  beast::flat_buffer buffer_;
  http::request<http::empty_body> request_;
  http::response<http::string_body> reply_;  // a refusal or a plain HTTP answer
  std::array<char, 512> discard_{};          // what a peer sends while its HTTP request is answered
  std::weak_ptr<Session> session_;           // after the hand-over
};

}  // namespace

std::shared_ptr<ServerConnection> serve_connection(NetContext& ctx, tcp::socket socket,
                                                   const ServerOptions& options, unsigned refuse_status,
                                                   std::function<void(std::shared_ptr<Session>)> on_ready,
                                                   std::function<void()> on_end) {
  const auto start = [](auto connection) -> std::shared_ptr<ServerConnection> {
    // Start on the connection's strand: nothing of it may run elsewhere.
    asio::post(connection->executor(), [connection] { connection->start(); });
    return connection;
  };
  if (options.tls)
    return start(std::make_shared<ServerHandshake<true>>(ctx, std::move(socket), options, refuse_status,
                                                         std::move(on_ready), std::move(on_end)));
  return start(std::make_shared<ServerHandshake<false>>(ctx, std::move(socket), options, refuse_status,
                                                        std::move(on_ready), std::move(on_end)));
}

}  // namespace tribunal::net_detail
