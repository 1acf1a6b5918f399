// Internal to net/: the server side of an accepted connection up to its WebSocket session — the TLS
// handshake (wss://), the HTTP request, and then a refusal, a plain HTTP answer or the upgrade, after
// which the open stream goes to the session (net/stream.h). Beast stays in server_handshake.cpp.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "net/server.h"
#include "net/session.h"

namespace tribunal {
class NetContext;
}

namespace tribunal::net_detail {

/// What the server does with a connection's HTTP request.
enum class HandshakeAction {
  Refuse,    ///< over a connection limit: answer the refusal status (503 or 429) and hang up
  Http,      ///< a plain HTTP request: ServerOptions::http answers it
  NotFound,  ///< an HTTP-only server (ServerOptions::websocket false): 404
  Upgrade,   ///< the WebSocket handshake (which answers 400 to a request that is no valid upgrade)
};

/// The decision for one request: `refuse_status` non-zero (a limit was reached at accept) refuses
/// whatever was asked; otherwise a request that is not an upgrade goes to the HTTP handler when there
/// is one; a server without WebSocket answers anything else 404; the rest is upgraded.
HandshakeAction handshake_action(unsigned refuse_status, bool is_upgrade, bool has_http_handler,
                                 bool websocket);

/// The body of a refusal's answer: 429 names the peer's address as the cause, 503 the server.
std::string_view refusal_body(unsigned refuse_status);

/// A server connection from accept until its session ends, as Server sees it to evict it.
class ServerConnection {
 public:
  virtual ~ServerConnection() = default;
  /// The id its session has (Session::id), also in the handshake's log lines.
  virtual uint64_t id() const = 0;
  /// Thread-safe. Before the upgrade: drops the connection. During the upgrade: the session closes
  /// with `code` once open (the peer may already consider it open). After the hand-over: the same as
  /// Session::close.
  virtual void close(CloseCode code, std::string reason) = 0;
};

/// Runs the server side of an accepted connection (whose socket must use a fresh strand): reads the
/// HTTP request, then refuses it with HTTP status `refuse_status` (when non-zero: 503 server full,
/// 429 too many from one address), answers a plain HTTP request with `options.http`, or completes the
/// WebSocket handshake within `options.handshake_timeout` and calls `on_ready` with the open session
/// (reading starts when it returns). `on_end` runs exactly once when the connection ends, refused or
/// not, handshake or not.
std::shared_ptr<ServerConnection> serve_connection(NetContext& ctx, boost::asio::ip::tcp::socket socket,
                                                   const ServerOptions& options, unsigned refuse_status,
                                                   std::function<void(std::shared_ptr<Session>)> on_ready,
                                                   std::function<void()> on_end);

}  // namespace tribunal::net_detail
