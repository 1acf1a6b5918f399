// Internal to net/: the seam between the accept loop / client and the Beast session in session.cpp,
// so that only session.cpp compiles Beast.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "net/client.h"
#include "net/server.h"
#include "net/session.h"

namespace tribunal {
class NetContext;
}

namespace tribunal::net_detail {

/// "address:port", IPv6 as "[address]:port".
std::string endpoint_string(const boost::asio::ip::tcp::endpoint& endpoint);

/// Runs the server side of an accepted connection (whose socket must use a fresh strand): reads the
/// HTTP upgrade request, then either refuses it with HTTP status `refuse_status` (when non-zero: 503
/// server full, 429 too many from one address), answers a plain HTTP request with `options.http`, or
/// completes the WebSocket handshake within `options.handshake_timeout` and calls `on_ready` with the
/// open session (reading starts when it returns). `on_end` runs exactly once when the connection ends,
/// refused or not, handshake or not. Returns the session (not yet handshaken): Server keeps it to
/// close a stranger's connection it evicts (Session::close works during the handshake too).
std::shared_ptr<Session> serve_connection(NetContext& ctx, boost::asio::ip::tcp::socket socket,
                                          const ServerOptions& options, unsigned refuse_status,
                                          std::function<void(std::shared_ptr<Session>)> on_ready,
                                          std::function<void()> on_end);

/// Resolves, connects and handshakes to `url`; calls `done` exactly once.
void open_connection(NetContext& ctx, const WsUrl& url, const ClientOptions& options,
                     Client::ConnectCallback done);

}  // namespace tribunal::net_detail
