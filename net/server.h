// The WebSocket server: accepts connections and hands out sessions (docs/protocol.md).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "net/session.h"
#include "net/tls.h"

namespace tribunal {

class NetContext;

/// A plain HTTP request that is not a WebSocket upgrade (e.g. a Prometheus scrape of /metrics).
struct HttpRequest {
  std::string method;  ///< "GET", "HEAD", ...
  std::string target;  ///< path and query, as sent (e.g. "/metrics")
  std::string remote;  ///< the peer as "address:port"
  /// Set (from the connection's strand) once the peer has closed or reset the connection before the
  /// answer was written: a handler with slow work checks it before starting or between pieces and
  /// skips what nobody will read (it must still call `respond`). Never null.
  std::shared_ptr<const std::atomic<bool>> peer_gone = std::make_shared<std::atomic<bool>>(false);
};

/// The answer to an HttpRequest; the connection is closed after it (no keep-alive).
struct HttpResponse {
  unsigned status = 200;  ///< an HTTP status code (RFC 9110 §15)
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  /// Extra header fields (name, value), e.g. {"Retry-After", "2"} with a 429.
  std::vector<std::pair<std::string, std::string>> headers = {};
};

/// Answers one plain HTTP request: call `respond` exactly once, from any thread, at once or later (a
/// handler with slow work posts it elsewhere: it runs on the connection's strand and must not block).
/// `respond` holds the connection open until it is called (it must be, also on failure: e.g. a 500).
using HttpHandler = std::function<void(const HttpRequest&, std::function<void(HttpResponse)> respond)>;

/// Server limits. The defaults suit a referee holding hundreds of disputes (each one client
/// connection here); the process needs a file descriptor limit above max_connections plus its own
/// outgoing connections (see raise_fd_limit in net/context.h).
struct ServerOptions {
  /// Open connections (admitted and not yet ended) beyond which new ones are refused with HTTP 503.
  size_t max_connections = 1024;
  /// Open connections from one peer address beyond which its new ones are refused with HTTP 429.
  /// Zero disables the per-address limit.
  size_t max_connections_per_address = 128;
  /// A stranger's connection (any not trusted) that finds a limit reached closes the oldest
  /// evictable stranger connection — from its own address at the per-address limit, from any address
  /// at the total — instead of being refused: connections opened and left idle by a flood cannot
  /// keep out a peer that comes to prove itself (a provider's referee). False: refused (HTTP 429/503).
  bool evict_strangers = false;
  /// Connections that Server::trust moved out of the limits above (a provider's proven referees):
  /// the capacity reserved for them. Beyond it trust() leaves a connection a stranger.
  size_t max_trusted_connections = 256;
  /// Connections being refused at once (each waits up to 5 s for its upgrade request, so that the
  /// peer gets the 503/429 answer); beyond this, new excess connections are closed at once unanswered.
  size_t max_refusing = 64;
  /// The HTTP upgrade request and the WebSocket handshake together must finish within this.
  std::chrono::milliseconds handshake_timeout{10000};
  /// Session limits; a server session must receive its first message within 10 s by default.
  SessionOptions session{.first_message_timeout = std::chrono::milliseconds(10000)};
  /// Plain HTTP requests on the same port (anything but a WebSocket upgrade) go to this handler, after
  /// the same connection limits as WebSocket connections; unset: such a request fails the handshake
  /// (HTTP 400), as before.
  HttpHandler http;
  /// False: an HTTP-only server (a separate metrics address): upgrade requests get HTTP 404.
  bool websocket = true;
  /// Set (TlsContext::server): every connection is TLS first (wss://, and https:// for the plain HTTP
  /// requests); null: plain TCP.
  std::shared_ptr<TlsContext> tls;
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
  /// Moves `session` (one of this server's) out of the per-address and total limits into the
  /// trusted pool (ServerOptions::max_trusted_connections) and makes it never evicted: the
  /// application calls it once the peer proved a key it trusts. Thread-safe; returns false when the
  /// pool is full or the session is not (or no longer) one of this server's.
  bool trust(const Session& session);
  /// Makes a stranger's `session` never evicted (it still counts against the limits): the
  /// application works for it (e.g. trains its job). Thread-safe; no-op for an unknown session.
  void keep(const Session& session);
  /// Connections admitted and not yet ended (handshaking or open), trusted ones included.
  size_t connection_count() const;
  /// Trusted connections open now (trust()).
  size_t trusted_count() const;
  /// Stranger connections closed to make room for newer ones (ServerOptions::evict_strangers).
  size_t evicted_count() const;
  /// Connections refused so far (HTTP 503, HTTP 429, or closed unanswered), since listen.
  size_t refused_count() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tribunal
