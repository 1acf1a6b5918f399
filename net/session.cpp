// The Beast WebSocket session behind Session, and the server/client handshakes that create it, over TCP
// (ws://) or TLS (wss://: the same session on an Asio SSL stream, net/tls.h). This is the only
// translation unit that compiles Beast (it is slow to build).
//
// Concurrency: the socket, both timers and every field below the "strand only" mark are touched only
// on the session's strand (the socket's executor). send() and close() may come from any thread: they
// check/update atomics and post to the strand, so the posted messages and the close keep their order.
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "net/context.h"
#include "net/detail.h"
#include "net/error.h"
#include "net/tls.h"

namespace tribunal {

namespace {
std::atomic<uint64_t> g_next_session_id{1};
}  // namespace

Session::Session() : id_(g_next_session_id.fetch_add(1)) {}

std::string to_string(const CloseInfo& info) {
  std::string s = std::to_string(static_cast<unsigned>(info.code));
  if (!info.reason.empty()) s += " (" + info.reason + ")";
  if (info.code != kCloseAbnormal) s += info.by_peer ? " by peer" : " by us";
  if (!info.error.empty()) s += ": " + info.error;
  return s;
}

namespace net_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using beast::error_code;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kAgent = "tribunal-net/0.1";
// A connection we are refusing gets this long to send its upgrade request (it is not counted
// against max_connections, so keep it short).
constexpr auto kRefusalTimeout = std::chrono::seconds(5);
constexpr size_t kMaxReasonBytes = 123;
// A receive buffer grown past this by a large message is shrunk after delivering it: the game's
// questions and answers fit, while an opened 64 KiB tensor chunk's buffer is given back, so a session
// does not keep one for its lifetime (docs/performance.md, "The referee under load").
constexpr size_t kKeptBufferBytes = 4 * 1024;

bool is_websocket_error(const error_code& ec) {
  return ec.category() == websocket::make_error_code(websocket::error::closed).category();
}

// RFC 6455 §7.4: codes an endpoint may put in a close frame (1005, 1006, 1015 are report-only).
bool is_sendable(CloseCode code) {
  const auto c = static_cast<unsigned>(code);
  return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

std::string ms_string(std::chrono::milliseconds ms) {
  return std::to_string(ms.count()) + " ms";
}

// kTls: the WebSocket runs over an SSL stream (wss://); the TLS handshake comes first on both sides.
template <bool kTls>
class WsSession final : public Session, public std::enable_shared_from_this<WsSession<kTls>> {
 public:
  enum class Role { Server, Client };
  using Stream = std::conditional_t<kTls, beast::ssl_stream<beast::tcp_stream>, beast::tcp_stream>;

  // Server side: an accepted socket (already on its own strand); `tls` is the TlsContext (kTls only).
  WsSession(NetContext& ctx, tcp::socket socket, const SessionOptions& options,
            std::shared_ptr<TlsContext> tls)
      : ctx_(ctx),
        options_(options),
        role_(Role::Server),
        tls_(std::move(tls)),
        ws_(make_stream(std::move(socket))),
        resolver_(ws_.get_executor()),
        watchdog_(ws_.get_executor()),
        deadline_timer_(ws_.get_executor()) {}

  // Client side: a new socket on a new strand.
  WsSession(NetContext& ctx, const SessionOptions& options, std::shared_ptr<TlsContext> tls)
      : ctx_(ctx),
        options_(options),
        role_(Role::Client),
        tls_(std::move(tls)),
        ws_(make_stream(asio::make_strand(ctx.io()))),
        resolver_(ws_.get_executor()),
        watchdog_(ws_.get_executor()),
        deadline_timer_(ws_.get_executor()) {}

  // ---- Session interface (any thread) ----

  void set_handlers(SessionHandlers handlers) override {
    // dispatch: inline when called from on_session / connect (already on the strand), so the
    // handlers are in place before the first read completes.
    asio::dispatch(ws_.get_executor(), [self = this->shared_from_this(), h = std::move(handlers)]() mutable {
      if (self->state_ != State::Closed) self->handlers_ = std::move(h);
    });
  }

  bool send(std::vector<uint8_t> message) override { return send_and_notify(std::move(message), {}); }

  bool send_and_notify(std::vector<uint8_t> message, std::function<void()> on_written) override {
    if (!accepting_.load()) return false;
    const size_t size = message.size();
    if (size > options_.max_message_bytes) {
      log("refusing to send " + std::to_string(size) + " bytes (limit " +
          std::to_string(options_.max_message_bytes) + ")");
      return false;
    }
    // Counted from here until the write completes (or the message is dropped), so the bound holds
    // for messages still in the strand's post queue too.
    const size_t messages = queued_messages_.fetch_add(1) + 1;
    const size_t bytes = queued_bytes_.fetch_add(size) + size;
    if (messages > options_.max_queued_messages || bytes > options_.max_queued_bytes) {
      release(1, size);
      if (accepting_.exchange(false)) {
        log("write queue full (" + std::to_string(messages) + " messages, " + std::to_string(bytes) +
            " bytes): the peer reads too slowly; closing 1008");
        asio::post(ws_.get_executor(), [self = this->shared_from_this()] {
          self->begin_close(CloseCode::PolicyViolation, "write queue full", /*flush=*/false);
        });
      }
      return false;
    }
    asio::post(ws_.get_executor(),
               [self = this->shared_from_this(), m = std::move(message),
                w = std::move(on_written)]() mutable { self->enqueue(std::move(m), std::move(w)); });
    return true;
  }

  bool wait_for_room(size_t bytes) override {
    std::unique_lock lock(room_mu_);
    while (accepting_.load()) {
      const size_t messages = queued_messages_.load(), queued = queued_bytes_.load();
      if (messages == 0 ||
          (messages + 1 <= options_.max_queued_messages && queued + bytes <= options_.max_queued_bytes))
        return true;
      // Woken by release(); the timed wait also notices a close, which releases nothing.
      room_cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    return false;
  }

  void close(CloseCode code, std::string reason) override {
    accepting_.store(false);
    // post, not dispatch: messages sent before this call are still in the strand's queue and must
    // be queued for writing before the close begins.
    asio::post(ws_.get_executor(), [self = this->shared_from_this(), code, r = std::move(reason)]() mutable {
      self->begin_close(code, std::move(r), /*flush=*/true);
    });
  }

  bool is_open() const override { return accepting_.load(); }

  void set_reading(bool on) override {
    asio::dispatch(ws_.get_executor(), [self = this->shared_from_this(), on] {
      self->reading_ = on;
      if (!on || !self->read_parked_) return;
      self->read_parked_ = false;
      self->last_received_ = Clock::now();  // the idle limit restarts from here
      self->do_read();
    });
  }

  /// The session's strand.
  asio::any_io_executor executor() { return ws_.get_executor(); }

  // ---- server handshake ----

  void start_server(unsigned refuse_status, std::chrono::milliseconds handshake_timeout, HttpHandler http,
                    bool websocket, std::function<void(std::shared_ptr<Session>)> on_ready,
                    std::function<void()> on_end) {
    refuse_status_ = refuse_status;
    handshake_timeout_ = handshake_timeout;
    http_ = std::move(http);
    websocket_ = websocket;
    on_ready_ = std::move(on_ready);
    on_end_ = std::move(on_end);
    error_code ec;
    const auto endpoint = beast::get_lowest_layer(ws_).socket().remote_endpoint(ec);
    remote_ = ec ? "?" : endpoint_string(endpoint);
    register_closer();
    // Beast's websocket timeouts only start with accept; the HTTP request before it is bounded by the
    // tcp_stream's own timer, set to the handshake limit (or shorter when refusing).
    handshake_started_ = Clock::now();
    const auto limit = refuse_status_ == 0 ? std::chrono::duration_cast<Clock::duration>(handshake_timeout_)
                                           : std::chrono::duration_cast<Clock::duration>(kRefusalTimeout);
    beast::get_lowest_layer(ws_).expires_after(limit);
    if constexpr (kTls) {
      ws_.next_layer().async_handshake(ssl::stream_base::server,
                                       [self = this->shared_from_this()](error_code ec) {
                                         if (ec)
                                           return self->handshake_failed("TLS handshake: " + ec.message());
                                         self->read_request();
                                       });
    } else {
      read_request();
    }
  }

  void read_request() {
    http::async_read(ws_.next_layer(), buffer_, request_,
                     [self = this->shared_from_this()](error_code ec, size_t) { self->on_request(ec); });
  }

  // ---- client handshake ----

  void start_client(const WsUrl& url, std::chrono::milliseconds timeout, std::string local_address,
                    AddressPolicy policy, Client::ConnectCallback done) {
    url_ = url;
    local_address_ = std::move(local_address);
    policy_ = std::move(policy);
    connect_done_ = std::move(done);
    remote_ = url.host + ":" + std::to_string(url.port);
    register_closer();
    // One deadline over resolve, connect and handshake; on expiry the pending step fails with
    // operation_aborted and handshake_failed() reports the timeout.
    deadline_timer_.expires_after(timeout);
    deadline_timer_.async_wait([self = this->shared_from_this(), timeout](error_code ec) {
      if (ec || self->state_ != State::Handshake) return;
      self->abort_handshake("timed out after " + ms_string(timeout));
    });
    resolver_.async_resolve(
        url.host, std::to_string(url.port),
        [self = this->shared_from_this()](error_code ec, tcp::resolver::results_type results) {
          self->on_resolve(ec, std::move(results));
        });
  }

 private:
  enum class State { Handshake, Open, Closing, Closed };

  void log(const std::string& what) const {
    net_log("session " + std::to_string(id()) + " " + remote_ + ": " + what);
  }

  void register_closer() {
    closer_id_ = ctx_.add_closer([weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->close(CloseCode::GoingAway, "shutting down");
    });
  }

  void release(size_t messages, size_t bytes) {
    queued_messages_.fetch_sub(messages);
    queued_bytes_.fetch_sub(bytes);
    room_cv_.notify_all();
  }

  // ---- handshakes (strand) ----

  void on_request(error_code ec) {
    if (ec) return handshake_failed("reading the upgrade request: " + ec.message());
    if (refuse_status_ != 0) return refuse();
    if (!websocket::is_upgrade(request_) && http_) return serve_http();
    if (!websocket_) return reply(404, "text/plain; charset=utf-8", "this address serves plain HTTP only\n");
    beast::get_lowest_layer(ws_).expires_never();  // websocket timeouts take over
    // The rest of the handshake limit covers the WebSocket accept.
    auto timeouts = websocket::stream_base::timeout::suggested(beast::role_type::server);
    const auto left = handshake_started_ + handshake_timeout_ - Clock::now();
    timeouts.handshake_timeout = std::max<Clock::duration>(left, std::chrono::milliseconds(1));
    ws_.set_option(timeouts);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, kAgent); }));
    upgrading_ = true;
    ws_.async_accept(request_, [self = this->shared_from_this()](error_code ec) {
      if (ec) return self->handshake_failed("handshake: " + ec.message());
      self->open();
    });
  }

  // Over a connection limit: answer the upgrade request with 503 (server full) or 429 (too many from
  // this address) and hang up. The request is read first so the peer sees the status (closing with
  // unread input would reset the connection instead).
  void refuse() {
    reply(refuse_status_, "text/plain",
          refuse_status_ == 429 ? "too many connections from your address\n" : "too many connections\n");
  }

  // A plain HTTP request (ServerOptions::http): the handler answers once, from any thread; the answer
  // is written on the strand. The tcp_stream's timer (the handshake limit) still bounds the whole.
  void serve_http() {
    auto gone = std::make_shared<std::atomic<bool>>(false);
    HttpRequest request{std::string(request_.method_string()), std::string(request_.target()), remote_, gone};
    auto answered = std::make_shared<std::atomic<bool>>(false);
    // Holds the session: while the handler works elsewhere no operation of it is pending but the
    // watch below.
    auto respond = [self = this->shared_from_this(), answered](HttpResponse r) {
      if (answered->exchange(true)) return;
      asio::post(self->ws_.get_executor(), [self, r = std::move(r)]() mutable {
        if (self->state_ != State::Handshake) return;  // aborted meanwhile (shutdown, timeout)
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
    if (state_ == State::Closed) return;
    state_ = State::Closed;
    ctx_.remove_closer(closer_id_);
    if (on_end_) std::exchange(on_end_, nullptr)();
  }

  void on_resolve(error_code ec, tcp::resolver::results_type results) {
    if (ec) return handshake_failed("resolving " + url_.host + ": " + ec.message());
    std::optional<asio::ip::address> local;
    if (!local_address_.empty()) {
      local = asio::ip::make_address(local_address_, ec);
      if (ec) return handshake_failed("bad local address \"" + local_address_ + "\": " + ec.message());
    }
    std::string refused;  // the first address the policy refused, and why
    for (const auto& entry : results) {
      const asio::ip::address a = entry.endpoint().address();
      if (const std::string why = policy_.refusal(a.to_string()); !why.empty()) {
        if (refused.empty()) refused = a.to_string() + ": " + why;
        continue;
      }
      if (!local || a.is_v4() == local->is_v4()) endpoints_.push_back(entry.endpoint());
    }
    if (endpoints_.empty() && !refused.empty())
      return handshake_failed(url_.host + " resolves only to addresses the address policy refuses (" +
                              refused + "); allow them with --allow-network CIDR");
    if (endpoints_.empty())
      return handshake_failed("no address of " + url_.host + " in the family of " + local_address_);
    local_ = local;
    connect_next(0, {});
  }

  // Tries the resolved endpoints in order. The socket is opened here rather than by Beast's range
  // connect so that it can be bound to local_address and get SO_REUSEADDR: a client socket may be
  // given, as its own ephemeral port, the port of a server that is down (on loopback it may even
  // connect to itself), and without SO_REUSEADDR its TIME_WAIT would keep that server from binding
  // its port again for a minute.
  void connect_next(size_t i, error_code last) {
    if (i == endpoints_.size()) return handshake_failed("connect: " + last.message());
    const tcp::endpoint endpoint = endpoints_[i];
    auto& socket = beast::get_lowest_layer(ws_).socket();
    error_code ec;
    if (socket.is_open()) socket.close(ec);
    socket.open(endpoint.protocol(), ec);
    if (!ec) socket.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && local_) socket.bind(tcp::endpoint(*local_, 0), ec);
    if (ec) return handshake_failed("connect: " + ec.message());
    beast::get_lowest_layer(ws_).async_connect(
        endpoint, [self = this->shared_from_this(), endpoint, i](error_code ec) {
          if (ec && ec != asio::error::operation_aborted && self->abort_reason_.empty() &&
              i + 1 < self->endpoints_.size())
            return self->connect_next(i + 1, ec);
          self->on_connect(ec, endpoint);
        });
  }

  void on_connect(error_code ec, const tcp::endpoint& endpoint) {
    if (ec) return handshake_failed("connect: " + ec.message());
    // With no server on a port of the ephemeral range, a loopback connect can pick that very port as
    // its own and connect to itself (TCP simultaneous open); it would then hold the port a
    // restarting server needs. Drop it at once.
    error_code local_ec;
    if (beast::get_lowest_layer(ws_).socket().local_endpoint(local_ec) == endpoint && !local_ec)
      return handshake_failed("connect: connected to itself (nothing listens on that port)");
    remote_ = endpoint_string(endpoint);
    if constexpr (kTls) {
      // The server's chain must lead to a trusted CA and its certificate name the URL's host (a DNS
      // name or an IP address; boost::asio::ssl::host_name_verification, RFC 6125); SNI for names.
      auto& tls = ws_.next_layer();
      error_code not_ip;
      asio::ip::make_address(url_.host, not_ip);
      if (not_ip && SSL_set_tlsext_host_name(tls.native_handle(), url_.host.c_str()) != 1)
        return handshake_failed("TLS: cannot set the server name " + url_.host);
      tls.set_verify_mode(ssl::verify_peer);
      tls.set_verify_callback(ssl::host_name_verification(url_.host));
      tls.async_handshake(ssl::stream_base::client, [self = this->shared_from_this()](error_code ec) {
        if (ec) return self->handshake_failed("TLS handshake: " + ec.message());
        self->websocket_handshake();
      });
    } else {
      websocket_handshake();
    }
  }

  void websocket_handshake() {
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::request_type& req) { req.set(http::field::user_agent, kAgent); }));
    upgrading_ = true;
    ws_.async_handshake(
        handshake_response_, url_.host + ":" + std::to_string(url_.port), url_.target,
        [self = this->shared_from_this()](error_code ec) {
          if (!ec) return self->open();
          if (ec == websocket::error::upgrade_declined)
            return self->handshake_failed("server declined the upgrade: HTTP " +
                                          std::to_string(self->handshake_response_.result_int()) + " " +
                                          std::string(self->handshake_response_.reason()));
          self->handshake_failed("handshake: " + ec.message());
        });
  }

  // Ends the handshake early (timeout, shutdown): the pending step then fails and reports `why`.
  void abort_handshake(std::string why) {
    if (abort_reason_.empty()) abort_reason_ = std::move(why);
    resolver_.cancel();
    beast::get_lowest_layer(ws_).close();
  }

  void handshake_failed(const std::string& error) {
    if (state_ != State::Handshake) return;
    state_ = State::Closed;
    const std::string why = abort_reason_.empty() ? error : abort_reason_;
    deadline_timer_.cancel();
    beast::get_lowest_layer(ws_).close();
    if (closer_id_) ctx_.remove_closer(closer_id_);
    if (role_ == Role::Client) {
      net_log(std::string("connect to ") + (kTls ? "wss://" : "ws://") + url_.host + ":" +
              std::to_string(url_.port) + url_.target + " failed: " + why);
      auto done = std::move(connect_done_);
      try {
        done(nullptr, why);
      } catch (const std::exception& e) {
        log(std::string("connect callback threw: ") + e.what());
      } catch (...) {
        log("connect callback threw");
      }
    } else {
      log("handshake failed: " + why);
      if (on_end_) std::exchange(on_end_, nullptr)();
    }
  }

  void open() {
    if (state_ != State::Handshake) return;  // aborted meanwhile; the closer sees the socket closed
    if (!abort_reason_.empty()) return handshake_failed(abort_reason_);
    state_ = State::Open;
    deadline_timer_.cancel();
    buffer_.consume(buffer_.size());
    ws_.read_message_max(options_.max_message_bytes);
    ws_.binary(true);
    // One frame per message: the design's unit is one frame = one envelope.
    ws_.auto_fragment(false);
    accepting_.store(true);
    opened_ = last_received_ = Clock::now();
    auto self = this->shared_from_this();
    try {
      if (role_ == Role::Client) {
        std::exchange(connect_done_, nullptr)(self, "");
      } else {
        std::exchange(on_ready_, nullptr)(self);
      }
    } catch (const std::exception& e) {
      log(std::string("session callback threw: ") + e.what());
      begin_close(CloseCode::InternalError, "internal error", false);
    } catch (...) {
      log("session callback threw");
      begin_close(CloseCode::InternalError, "internal error", false);
    }
    do_read();
    arm_watchdog();
    if (pending_close_) begin_close(pending_close_->first, std::move(pending_close_->second), true);
  }

  // ---- reading (strand) ----

  // One message at a time, read in pieces (so that a message's start is seen, for message_timeout)
  // into buffer_, which Beast bounds by max_message_bytes. The next read starts only once the
  // handler has returned: a peer sending faster than we handle is held back by TCP, nothing queues.
  void do_read() {
    ws_.async_read_some(buffer_, 0,
                        [self = this->shared_from_this()](error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(error_code ec) {
    if (ec) {
      read_done_ = true;
      read_error_ = ec;
      return maybe_finish();
    }
    const bool done = ws_.is_message_done();
    if (state_ != State::Open) {
      // Closing: keep reading until the peer's close frame, but deliver nothing more.
      buffer_.consume(buffer_.size());
      return do_read();
    }
    if (!message_started_) {
      if (!ws_.got_binary()) {
        buffer_.consume(buffer_.size());
        log("text frame received (binary only): closing 1003");
        begin_close(kCloseUnsupportedData, "binary frames only", /*flush=*/false);
        return do_read();
      }
      if (!done) {
        message_started_ = Clock::now();
        arm_watchdog();
      }
    }
    if (!done) return do_read();
    message_started_.reset();
    last_received_ = Clock::now();
    received_any_ = true;
    std::vector<uint8_t> message(buffer_.size());
    asio::buffer_copy(asio::buffer(message), buffer_.data());
    buffer_.consume(buffer_.size());
    // Do not keep a large message's capacity for the session's lifetime (hundreds of sessions).
    if (buffer_.capacity() > kKeptBufferBytes) buffer_.shrink_to_fit();
    if (handlers_.on_message) {
      try {
        handlers_.on_message(*this, std::move(message));
      } catch (const std::exception& e) {
        log(std::string("on_message threw: ") + e.what() + "; closing 1011");
        begin_close(CloseCode::InternalError, "internal error", false);
      } catch (...) {
        log("on_message threw; closing 1011");
        begin_close(CloseCode::InternalError, "internal error", false);
      }
    }
    if (!reading_ && state_ == State::Open) {
      read_parked_ = true;  // set_reading(true) or a close resumes
      return;
    }
    do_read();
  }

  // The earliest moment one of the receive limits (idle, first message, message) may be reached.
  std::optional<Clock::time_point> next_deadline() const {
    std::optional<Clock::time_point> next;
    auto consider = [&](Clock::time_point t) {
      if (!next || t < *next) next = t;
    };
    if (options_.idle_timeout.count() > 0) consider(last_received_ + options_.idle_timeout);
    if (options_.first_message_timeout.count() > 0 && !received_any_)
      consider(opened_ + options_.first_message_timeout);
    if (options_.message_timeout.count() > 0 && message_started_)
      consider(*message_started_ + options_.message_timeout);
    return next;
  }

  // One timer for the receive limits, armed for the earliest deadline; when it fires the limits are
  // checked against the current state and it is re-armed (it is not restarted on every message).
  void arm_watchdog() {
    if (state_ != State::Open) return;
    const auto next = next_deadline();
    if (!next || (watchdog_armed_ && watchdog_at_ <= *next)) return;
    watchdog_armed_ = true;
    watchdog_at_ = *next;
    watchdog_.expires_at(*next);  // cancels an earlier wait (its handler sees operation_aborted)
    watchdog_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || self->state_ != State::Open) return;
      self->watchdog_armed_ = false;
      self->check_limits();
    });
  }

  void check_limits() {
    const auto now = Clock::now();
    if (read_parked_) {  // paused by the application: not the peer's silence
      last_received_ = now;
      return arm_watchdog();
    }
    if (options_.message_timeout.count() > 0 && message_started_ &&
        now - *message_started_ >= options_.message_timeout) {
      log("message not complete after " + ms_string(options_.message_timeout) + " (" +
          std::to_string(buffer_.size()) + " bytes so far): closing 1008");
      begin_close(CloseCode::PolicyViolation, "message too slow", /*flush=*/false);
      return;
    }
    if (options_.first_message_timeout.count() > 0 && !received_any_ &&
        now - opened_ >= options_.first_message_timeout) {
      log("no message within " + ms_string(options_.first_message_timeout) + ": closing 1001");
      begin_close(CloseCode::GoingAway, "no message", /*flush=*/false);
      return;
    }
    if (options_.idle_timeout.count() > 0 && now - last_received_ >= options_.idle_timeout) {
      log("idle for " + ms_string(options_.idle_timeout) + ": closing 1001");
      begin_close(CloseCode::GoingAway, "idle timeout", /*flush=*/true);
      return;
    }
    arm_watchdog();
  }

  // ---- writing (strand) ----

  void enqueue(std::vector<uint8_t> message, std::function<void()> on_written) {
    if (state_ != State::Open || write_failed_) {  // closed after send() accepted it: drop
      release(1, message.size());
      return;
    }
    queue_.push_back(std::move(message));
    written_.push_back(std::move(on_written));
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    ws_.async_write(asio::buffer(queue_.front()),
                    [self = this->shared_from_this()](error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(error_code ec) {
    writing_ = false;
    release(1, queue_.front().size());
    queue_.pop_front();
    std::function<void()> written = std::move(written_.front());
    written_.pop_front();
    if (!ec && written) written();
    if (state_ == State::Closed) return drop_queue();
    if (ec) {
      if (state_ == State::Open && !write_failed_) log("write failed: " + ec.message());
      accepting_.store(false);
      drop_queue();
      if (std::exchange(write_failed_, true)) return;
      // The read normally fails right after (and may first pick up the peer's close frame, which says
      // why); the deadline only covers a read that would not end by itself.
      if (state_ == State::Open) {
        deadline_timer_.expires_after(options_.close_timeout);
        deadline_timer_.async_wait([self = this->shared_from_this()](error_code ec) {
          if (!ec && self->state_ != State::Closed) beast::get_lowest_layer(self->ws_).close();
        });
      }
      return;
    }
    if (!queue_.empty()) return do_write();
    if (state_ == State::Closing) start_close_op();
  }

  // Drops queued messages, keeping the one being written (its buffer must outlive the write).
  void drop_queue() {
    const size_t keep = writing_ ? 1 : 0;
    while (queue_.size() > keep) {
      release(1, queue_.back().size());
      queue_.pop_back();
      written_.pop_back();
    }
  }

  // ---- closing (strand) ----

  void begin_close(CloseCode code, std::string reason, bool flush) {
    if (state_ == State::Handshake) {
      // Once the upgrade is under way the peer may already consider the session open: let the
      // handshake finish (it is bounded by its timeout) and close properly, so the peer gets the code.
      if (upgrading_) {
        if (!pending_close_) pending_close_.emplace(code, std::move(reason));
        return;
      }
      return abort_handshake("closed during the handshake: " + reason);
    }
    if (state_ != State::Open) return;
    state_ = State::Closing;
    accepting_.store(false);
    closed_by_us_ = true;
    close_code_ = is_sendable(code) ? code : CloseCode::InternalError;
    if (reason.size() > kMaxReasonBytes) reason.resize(kMaxReasonBytes);
    close_reason_ = std::move(reason);
    if (!flush) drop_queue();
    if (read_parked_) {  // read the peer's close reply
      read_parked_ = false;
      do_read();
    }
    // Bounds the flush and the close handshake together: a peer that stops reading cannot hold us.
    deadline_timer_.expires_after(options_.close_timeout);
    deadline_timer_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || self->state_ == State::Closed) return;
      self->log("close handshake not finished after " + ms_string(self->options_.close_timeout) +
                ": dropping the connection");
      self->close_timed_out_ = true;
      beast::get_lowest_layer(self->ws_).close();
    });
    if (!writing_) start_close_op();
  }

  void start_close_op() {
    if (close_op_started_ || read_done_) return maybe_finish();
    close_op_started_ = true;
    close_op_pending_ = true;
    ws_.async_close(websocket::close_reason(static_cast<websocket::close_code>(close_code_), close_reason_),
                    [self = this->shared_from_this()](error_code) {
                      // Errors here show up in the read as well; the end is reported once, there.
                      self->close_op_pending_ = false;
                      self->maybe_finish();
                    });
  }

  // The session ends when the read loop has stopped and our close handshake (if any) is over.
  void maybe_finish() {
    if (state_ == State::Closed || !read_done_ || close_op_pending_) return;
    state_ = State::Closed;
    accepting_.store(false);
    watchdog_.cancel();
    deadline_timer_.cancel();
    beast::get_lowest_layer(ws_).close();
    drop_queue();

    CloseInfo info;
    const error_code& ec = read_error_;
    const bool clean = ec == websocket::error::closed || ec == asio::error::operation_aborted;
    if (closed_by_us_) {
      info.code = close_code_;
      info.reason = close_reason_;
      if (close_timed_out_) {
        info.error = "close handshake timed out";
      } else if (!clean) {
        info.error = ec.message();
      }
    } else if (ec == websocket::error::closed || ws_.reason().code != websocket::close_code::none) {
      // The peer's close frame was parsed — even when a failed write ended the read afterwards
      // (a peer refusing our message may reset the connection while we are still writing it).
      const auto code = ws_.reason().code;
      info.code = code == websocket::close_code::none ? kCloseNoStatus : static_cast<CloseCode>(code);
      info.reason = std::string(ws_.reason().reason.data(), ws_.reason().reason.size());
      info.by_peer = true;
      if (ec != websocket::error::closed) info.error = ec.message();
    } else if (ec == websocket::error::message_too_big) {
      info.code = CloseCode::TooBig;  // Beast has sent the 1009 close frame
      info.reason = "message too big";
      info.error = "message over " + std::to_string(options_.max_message_bytes) + " bytes";
    } else if (is_websocket_error(ec)) {
      info.code = CloseCode::ProtocolError;  // Beast failed the connection with 1002
      info.error = ec.message();
    } else {
      info.code = kCloseAbnormal;
      info.error = ec == beast::error::timeout ? "timed out (peer silent)" : ec.message();
    }
    log("closed " + to_string(info));

    if (closer_id_) ctx_.remove_closer(closer_id_);
    if (on_end_) std::exchange(on_end_, nullptr)();
    // Moved out first: the handlers often capture this session, and dropping them breaks the cycle.
    auto handlers = std::move(handlers_);
    handlers_ = {};
    if (handlers.on_close) {
      try {
        handlers.on_close(*this, info);
      } catch (const std::exception& e) {
        log(std::string("on_close threw: ") + e.what());
      } catch (...) {
        log("on_close threw");
      }
    }
  }

  template <class Next>
  websocket::stream<Stream> make_stream(Next&& next) {
    if constexpr (kTls)
      return websocket::stream<Stream>(std::forward<Next>(next), tls_->native());
    else
      return websocket::stream<Stream>(std::forward<Next>(next));
  }

  NetContext& ctx_;
  const SessionOptions options_;
  const Role role_;
  const std::shared_ptr<TlsContext> tls_;  // kept alive while the stream uses its context
  websocket::stream<Stream> ws_;
  tcp::resolver resolver_;
  asio::steady_timer watchdog_;        // receive limits: idle, first message, message
  asio::steady_timer deadline_timer_;  // client handshake, then our close handshake

  std::atomic<bool> accepting_{false};  // send() takes messages
  std::atomic<size_t> queued_messages_{0};
  std::atomic<size_t> queued_bytes_{0};
  std::mutex room_mu_;  // wait_for_room() waits here for release()
  std::condition_variable room_cv_;

  // ---- strand only ----
  State state_ = State::Handshake;
  beast::flat_buffer buffer_;
  SessionHandlers handlers_;
  uint64_t closer_id_ = 0;
  std::string abort_reason_;
  bool upgrading_ = false;  // the WebSocket accept / handshake is in flight
  std::optional<std::pair<CloseCode, std::string>> pending_close_;  // close() during the upgrade
  // server handshake
  unsigned refuse_status_ = 0;  // 0: admitted
  std::chrono::milliseconds handshake_timeout_{0};
  Clock::time_point handshake_started_;
  http::request<http::empty_body> request_;
  http::response<http::string_body> reply_;  // a refusal or a plain HTTP answer
  std::array<char, 512> discard_{};          // what a peer sends while its HTTP request is answered
  HttpHandler http_;
  bool websocket_ = true;
  std::function<void(std::shared_ptr<Session>)> on_ready_;
  std::function<void()> on_end_;
  // client handshake
  WsUrl url_;
  std::string local_address_;
  AddressPolicy policy_ = AddressPolicy::any();
  std::optional<asio::ip::address> local_;
  std::vector<tcp::endpoint> endpoints_;
  websocket::response_type handshake_response_;
  Client::ConnectCallback connect_done_;
  // open / closing
  Clock::time_point opened_;
  Clock::time_point last_received_;
  bool received_any_ = false;
  bool reading_ = true;                               // set_reading
  bool read_parked_ = false;                          // no read pending because reading is paused
  std::optional<Clock::time_point> message_started_;  // a message is partly received
  bool watchdog_armed_ = false;
  Clock::time_point watchdog_at_;
  std::deque<std::vector<uint8_t>> queue_;
  std::deque<std::function<void()>> written_;  // queue_'s on_written callbacks, one per message
  bool writing_ = false;
  bool write_failed_ = false;
  bool read_done_ = false;
  error_code read_error_;
  bool closed_by_us_ = false;
  bool close_op_started_ = false;
  bool close_op_pending_ = false;
  bool close_timed_out_ = false;
  CloseCode close_code_ = CloseCode::Normal;
  std::string close_reason_;
};

}  // namespace

std::string endpoint_string(const tcp::endpoint& endpoint) {
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

std::shared_ptr<Session> serve_connection(NetContext& ctx, tcp::socket socket, const ServerOptions& options,
                                          unsigned refuse_status,
                                          std::function<void(std::shared_ptr<Session>)> on_ready,
                                          std::function<void()> on_end) {
  const auto start = [&](auto session) -> std::shared_ptr<Session> {
    // Start on the session's strand: nothing of it may run elsewhere.
    asio::post(session->executor(), [session, refuse_status, timeout = options.handshake_timeout,
                                     http = options.http, websocket = options.websocket,
                                     r = std::move(on_ready), e = std::move(on_end)]() mutable {
      session->start_server(refuse_status, timeout, std::move(http), websocket, std::move(r), std::move(e));
    });
    return session;
  };
  if (options.tls)
    return start(std::make_shared<WsSession<true>>(ctx, std::move(socket), options.session, options.tls));
  return start(std::make_shared<WsSession<false>>(ctx, std::move(socket), options.session, nullptr));
}

void open_connection(NetContext& ctx, const WsUrl& url, const ClientOptions& options,
                     Client::ConnectCallback done) {
  const auto start = [&](auto session) {
    asio::post(session->executor(),
               [session, url, timeout = options.connect_timeout, local = options.local_address,
                policy = options.address_policy, d = std::move(done)]() mutable {
                 session->start_client(url, timeout, std::move(local), std::move(policy), std::move(d));
               });
  };
  if (url.tls)  // the caller (Client::connect) supplies a context for every wss:// URL
    start(std::make_shared<WsSession<true>>(ctx, options.session, options.tls));
  else
    start(std::make_shared<WsSession<false>>(ctx, options.session, nullptr));
}

}  // namespace net_detail
}  // namespace tribunal
