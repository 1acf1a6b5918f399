// Internal to net/: the Beast stream types a connection runs on (plain TCP for ws://, TLS for wss://)
// and the hand-over from a handshake (net/server_handshake.cpp, net/client_connector.cpp) to the
// session that moves frames (net/session.cpp). Only those three translation units include this
// header: it pulls in Beast, which is slow to compile, so the public headers stay Beast-free.
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "net/endpoint.h"
#include "net/session.h"
#include "net/tls.h"

namespace tribunal {
class NetContext;
}

namespace tribunal::net_detail {

/// A WebSocket over TCP (ws://) or over TLS over TCP (wss://: the TLS handshake comes first on both
/// sides). Each stream's executor is the connection's own strand.
template <bool kTls>
using WsStream = boost::beast::websocket::stream<
    std::conditional_t<kTls, boost::beast::ssl_stream<boost::beast::tcp_stream>, boost::beast::tcp_stream>>;

/// Makes a stream over `next` (an accepted socket, or an executor for a client's new socket); `tls`
/// must be set for kTls (the Asio SSL context the stream refers to; the caller keeps it alive).
template <bool kTls, class Next>
WsStream<kTls> make_ws_stream(Next&& next, TlsContext* tls) {
  if constexpr (kTls)
    return WsStream<kTls>(std::forward<Next>(next), tls->native());
  else
    return WsStream<kTls>(std::forward<Next>(next));
}

/// The Server and User-Agent header of our handshakes and HTTP answers.
inline constexpr const char* kAgent = "tribunal-net/0.1";

/// A fresh process-unique session id (Session::id). A handshake takes it when it starts, so that its
/// log lines and the server's bookkeeping name the connection as its session will.
uint64_t next_session_id();

/// A close asked for while the WebSocket upgrade was in flight: the session sends it once open, so
/// the peer, which may already consider the connection open, gets the code.
using PendingClose = std::optional<std::pair<CloseCode, std::string>>;

/// What a handshake hands to the session along with the open stream.
struct SessionStart {
  uint64_t id = 0;     ///< from next_session_id()
  std::string remote;  ///< the peer as endpoint_string() gives it
  /// Called on the strand with the open session; reading starts when it returns (so handlers set
  /// here miss nothing). An exception from it is logged and closes the session with 1011.
  std::function<void(std::shared_ptr<Session>)> on_open;
  /// Called exactly once when the session has ended, before the on_close handler (may be empty).
  std::function<void()> on_end;
  PendingClose pending_close;
};

/// Starts the frame pump on a stream whose WebSocket handshake has just completed; call it on the
/// stream's strand. `tls` keeps the SSL context alive for a TLS stream (null for plain). Registers
/// with `ctx` for graceful shutdown, runs `start.on_open`, starts reading and returns the session.
std::shared_ptr<Session> start_session(NetContext& ctx, WsStream<false> ws, const SessionOptions& options,
                                       SessionStart start);
std::shared_ptr<Session> start_session(NetContext& ctx, WsStream<true> ws, const SessionOptions& options,
                                       std::shared_ptr<TlsContext> tls, SessionStart start);

}  // namespace tribunal::net_detail
