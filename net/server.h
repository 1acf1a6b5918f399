// The WebSocket server: accepts connections and hands out sessions (docs/protocol.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/session.h"

namespace tribunal {

class NetContext;

/// Server limits. The defaults suit a referee holding hundreds of disputes (each one client
/// connection here); the process needs a file descriptor limit above max_connections plus its own
/// outgoing connections (see raise_fd_limit in net/context.h).
struct ServerOptions {
  /// Open connections (admitted and not yet ended) beyond which new ones are refused with HTTP 503.
  size_t max_connections = 1024;
  /// Open connections from one peer address beyond which its new ones are refused with HTTP 429.
  /// Zero disables the per-address limit.
  size_t max_connections_per_address = 128;
  /// Connections being refused at once (each waits up to 5 s for its upgrade request, so that the
  /// peer gets the 503/429 answer); beyond this, new excess connections are closed at once unanswered.
  size_t max_refusing = 64;
  /// The HTTP upgrade request and the WebSocket handshake together must finish within this.
  std::chrono::milliseconds handshake_timeout{10000};
  /// Session limits; a server session must receive its first message within 10 s by default.
  SessionOptions session{.first_message_timeout = std::chrono::milliseconds(10000)};
};

/// Accepts WebSocket connections on one address. Each handshake that succeeds yields a Session given
/// to `on_session` (on that session's strand) — install its handlers there. A connection beyond
/// max_connections gets "HTTP 503 Service Unavailable" to its upgrade request and is closed.
class Server {
 public:
  using SessionCallback = std::function<void(std::shared_ptr<Session>)>;

  Server(NetContext& ctx, SessionCallback on_session, ServerOptions options = {});
  /// Stops accepting; sessions already handed out stay open.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds and starts accepting on `host` (an address or a name resolving to one; "0.0.0.0" for all)
  /// and `port` (0 picks a free one). Returns the bound port. Throws NetError naming host and port.
  uint16_t listen(const std::string& host, uint16_t port);
  /// The bound port (0 before listen).
  uint16_t port() const;
  /// Stops accepting (thread-safe, idempotent). Open sessions are not closed; NetContext::shutdown
  /// closes those.
  void stop();
  /// Connections admitted and not yet ended (handshaking or open).
  size_t connection_count() const;
  /// Connections refused so far (HTTP 503, HTTP 429, or closed unanswered), since listen.
  size_t refused_count() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tribunal
