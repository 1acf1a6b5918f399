// The client side of a connection until its session takes over (net/client_connector.h), in the
// shape of Boost.Beast's websocket_client_async_ssl example: resolve, connect, TLS handshake,
// WebSocket handshake — then the open stream is handed over.
//
// Concurrency: everything but close() runs on the connection's strand (the stream's executor).
#include "net/client_connector.h"

#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "net/context.h"
#include "net/error.h"
#include "net/stream.h"

namespace tribunal::net_detail {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using beast::error_code;

template <bool kTls>
class ClientConnector final : public std::enable_shared_from_this<ClientConnector<kTls>> {
 public:
  ClientConnector(NetContext& ctx, const WsUrl& url, const ClientOptions& options,
                  Client::ConnectCallback done)
      : ctx_(ctx),
        id_(next_session_id()),
        url_(url),
        options_(options),
        strand_(asio::make_strand(ctx.io())),
        ws_(make_ws_stream<kTls>(strand_, options_.tls.get())),
        resolver_(strand_),
        deadline_timer_(strand_),
        done_(std::move(done)),
        remote_(url.host + ":" + std::to_string(url.port)) {}

  asio::any_io_executor executor() const { return strand_; }

  // On the strand.
  void start() {
    closer_id_ = ctx_.add_closer([weak = this->weak_from_this()] {
      if (auto self = weak.lock())
        asio::post(self->strand_, [self] { self->close_on_strand(CloseCode::GoingAway, "shutting down"); });
    });
    // One deadline over resolve, connect and handshake; on expiry the pending step fails with
    // operation_aborted and failed() reports the timeout.
    const auto timeout = options_.connect_timeout;
    deadline_timer_.expires_after(timeout);
    deadline_timer_.async_wait([self = this->shared_from_this(), timeout](error_code ec) {
      if (ec || self->state_ != State::Connecting) return;
      self->abort("timed out after " + std::to_string(timeout.count()) + " ms");
    });
    resolver_.async_resolve(
        url_.host, std::to_string(url_.port),
        [self = this->shared_from_this()](error_code ec, tcp::resolver::results_type results) {
          self->on_resolve(ec, std::move(results));
        });
  }

 private:
  enum class State { Connecting, HandedOver, Closed };

  void log(const std::string& what) const {
    net_log("session " + std::to_string(id_) + " " + remote_ + ": " + what);
  }

  // Shutdown: the session closes with `code` once open when the upgrade is under way (the server may
  // already consider it open); before that the connection is dropped.
  void close_on_strand(CloseCode code, std::string reason) {
    if (state_ == State::HandedOver) {
      if (auto session = session_.lock()) session->close(code, std::move(reason));
      return;
    }
    if (state_ != State::Connecting) return;
    if (upgrading_) {
      if (!pending_close_) pending_close_.emplace(code, std::move(reason));
      return;
    }
    abort("closed during the handshake: " + reason);
  }

  // Ends the handshake early (timeout, shutdown): the pending step then fails and reports `why`.
  void abort(std::string why) {
    if (abort_reason_.empty()) abort_reason_ = std::move(why);
    resolver_.cancel();
    beast::get_lowest_layer(ws_).close();
  }

  void on_resolve(error_code ec, tcp::resolver::results_type results) {
    if (ec) return failed("resolving " + url_.host + ": " + ec.message());
    std::optional<asio::ip::address> local;
    if (!options_.local_address.empty()) {
      local = asio::ip::make_address(options_.local_address, ec);
      if (ec) return failed("bad local address \"" + options_.local_address + "\": " + ec.message());
    }
    std::string refused;  // the first address the policy refused, and why
    for (const auto& entry : results) {
      const asio::ip::address a = entry.endpoint().address();
      if (const std::string why = options_.address_policy.refusal(a.to_string()); !why.empty()) {
        if (refused.empty()) refused = a.to_string() + ": " + why;
        continue;
      }
      if (!local || a.is_v4() == local->is_v4()) endpoints_.push_back(entry.endpoint());
    }
    if (endpoints_.empty() && !refused.empty())
      return failed(url_.host + " resolves only to addresses the address policy refuses (" + refused +
                    "); allow them with --allow-network CIDR");
    if (endpoints_.empty())
      return failed("no address of " + url_.host + " in the family of " + options_.local_address);
    local_ = local;
    connect_next(0, {});
  }

  // Tries the resolved endpoints in order. The socket is opened here rather than by Beast's range
  // connect so that it can be bound to local_address and get SO_REUSEADDR: a client socket may be
  // given, as its own ephemeral port, the port of a server that is down (on loopback it may even
  // connect to itself), and without SO_REUSEADDR its TIME_WAIT would keep that server from binding
  // its port again for a minute.
  void connect_next(size_t i, error_code last) {
    if (i == endpoints_.size()) return failed("connect: " + last.message());
    const tcp::endpoint endpoint = endpoints_[i];
    auto& socket = beast::get_lowest_layer(ws_).socket();
    error_code ec;
    if (socket.is_open()) socket.close(ec);
    socket.open(endpoint.protocol(), ec);
    if (!ec) socket.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && local_) socket.bind(tcp::endpoint(*local_, 0), ec);
    if (ec) return failed("connect: " + ec.message());
    beast::get_lowest_layer(ws_).async_connect(
        endpoint, [self = this->shared_from_this(), endpoint, i](error_code ec) {
          if (ec && ec != asio::error::operation_aborted && self->abort_reason_.empty() &&
              i + 1 < self->endpoints_.size())
            return self->connect_next(i + 1, ec);
          self->on_connect(ec, endpoint);
        });
  }

  void on_connect(error_code ec, const tcp::endpoint& endpoint) {
    if (ec) return failed("connect: " + ec.message());
    // With no server on a port of the ephemeral range, a loopback connect can pick that very port as
    // its own and connect to itself (TCP simultaneous open); it would then hold the port a
    // restarting server needs. Drop it at once.
    error_code local_ec;
    if (beast::get_lowest_layer(ws_).socket().local_endpoint(local_ec) == endpoint && !local_ec)
      return failed("connect: connected to itself (nothing listens on that port)");
    remote_ = endpoint_string(endpoint);
    if constexpr (kTls) {
      // The server's chain must lead to a trusted CA and its certificate name the URL's host (a DNS
      // name or an IP address; boost::asio::ssl::host_name_verification, RFC 6125); SNI for names.
      auto& tls = ws_.next_layer();
      error_code not_ip;
      asio::ip::make_address(url_.host, not_ip);
      if (not_ip && SSL_set_tlsext_host_name(tls.native_handle(), url_.host.c_str()) != 1)
        return failed("TLS: cannot set the server name " + url_.host);
      tls.set_verify_mode(ssl::verify_peer);
      tls.set_verify_callback(ssl::host_name_verification(url_.host));
      tls.async_handshake(ssl::stream_base::client, [self = this->shared_from_this()](error_code ec) {
        if (ec) return self->failed("TLS handshake: " + ec.message());
        self->upgrade();
      });
    } else {
      upgrade();
    }
  }

  void upgrade() {
    ws_.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::request_type& req) { req.set(http::field::user_agent, kAgent); }));
    upgrading_ = true;
    ws_.async_handshake(response_, url_.host + ":" + std::to_string(url_.port), url_.target,
                        [self = this->shared_from_this()](error_code ec) {
                          if (!ec) return self->hand_over();
                          if (ec == websocket::error::upgrade_declined)
                            return self->failed("server declined the upgrade: HTTP " +
                                                std::to_string(self->response_.result_int()) + " " +
                                                std::string(self->response_.reason()));
                          self->failed("handshake: " + ec.message());
                        });
  }

  void failed(const std::string& error) {
    if (state_ != State::Connecting) return;
    state_ = State::Closed;
    const std::string why = abort_reason_.empty() ? error : abort_reason_;
    deadline_timer_.cancel();
    beast::get_lowest_layer(ws_).close();
    ctx_.remove_closer(closer_id_);
    net_log(std::string("connect to ") + (kTls ? "wss://" : "ws://") + url_.host + ":" +
            std::to_string(url_.port) + url_.target + " failed: " + why);
    auto done = std::move(done_);
    try {
      done(nullptr, why);
    } catch (const std::exception& e) {
      log(std::string("connect callback threw: ") + e.what());
    } catch (...) {
      log("connect callback threw");
    }
  }

  // The WebSocket handshake is done: the session takes the stream and calls `done` with itself.
  void hand_over() {
    if (state_ != State::Connecting) return;
    if (!abort_reason_.empty()) return failed(abort_reason_);
    state_ = State::HandedOver;
    deadline_timer_.cancel();
    SessionStart start{id_, remote_,
                       [done = std::move(done_)](std::shared_ptr<Session> session) { done(session, ""); },
                       nullptr, std::move(pending_close_)};
    if constexpr (kTls)
      session_ = start_session(ctx_, std::move(ws_), options_.session, options_.tls, std::move(start));
    else
      session_ = start_session(ctx_, std::move(ws_), options_.session, std::move(start));
    ctx_.remove_closer(closer_id_);  // the session has registered its own
  }

  NetContext& ctx_;
  const uint64_t id_;
  const WsUrl url_;
  const ClientOptions options_;  // options_.tls is kept alive while the stream uses its context
  const asio::strand<asio::io_context::executor_type> strand_;
  WsStream<kTls> ws_;
  tcp::resolver resolver_;
  asio::steady_timer deadline_timer_;  // resolve, connect and handshake together

  // ---- strand only ----
  Client::ConnectCallback done_;
  State state_ = State::Connecting;
  std::string remote_;
  uint64_t closer_id_ = 0;
  std::string abort_reason_;
  bool upgrading_ = false;  // the WebSocket handshake is in flight
  PendingClose pending_close_;
  std::optional<asio::ip::address> local_;
  std::vector<tcp::endpoint> endpoints_;
  websocket::response_type response_;
  std::weak_ptr<Session> session_;  // after the hand-over
};

}  // namespace

void open_connection(NetContext& ctx, const WsUrl& url, const ClientOptions& options,
                     Client::ConnectCallback done) {
  const auto start = [](auto connector) {
    asio::post(connector->executor(), [connector] { connector->start(); });
  };
  if (url.tls)  // the caller (Client::connect) supplies a context for every wss:// URL
    start(std::make_shared<ClientConnector<true>>(ctx, url, options, std::move(done)));
  else
    start(std::make_shared<ClientConnector<false>>(ctx, url, options, std::move(done)));
}

}  // namespace tribunal::net_detail
