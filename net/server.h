// The WebSocket server: accepts connections and hands out sessions (DESIGN §7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "net/session.h"

namespace tribunal {

class NetContext;

/// Server limits.
struct ServerOptions {
  /// Open connections (admitted and not yet ended) beyond which new ones are refused with HTTP 503.
  size_t max_connections = 256;
  SessionOptions session;
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

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tribunal
