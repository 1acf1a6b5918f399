// A blocking HTTP/1.1 GET of a node's plain HTTP routes (docs/running.md, "Monitoring": /metrics,
// /disputes.json) at the host and port of its ws:// or wss:// URL: what the delegate reads its
// providers' training progress and its referee's disputes from (nodes/delegate.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "net/tls.h"

namespace tribunal {

/// How a GET may go.
struct HttpGetOptions {
  /// Resolve, connect, TLS handshake, request and the whole answer together.
  std::chrono::milliseconds timeout{5000};
  /// The answer's body at most; a longer one fails the GET.
  size_t max_body_bytes = size_t{1} << 20;
  /// For wss:// URLs: the CAs the server's certificate must chain to (null: the system's).
  std::shared_ptr<TlsContext> tls;
};

/// What a GET answered.
struct HttpGetReply {
  int status = 0;  ///< the status code, e.g. 200
  std::string body;
};

/// GETs `target` (a path, e.g. "/metrics") from the host and port of `url`, a ws:// or wss:// URL
/// (parse_ws_url): plain HTTP for ws://, HTTPS for wss:// (the certificate checked as for the
/// WebSocket, net/tls.h). "Connection: close". Throws NetError naming the URL and what failed (bad URL,
/// unreachable, timeout, TLS, a malformed or too large answer); any status is returned.
HttpGetReply http_get(const std::string& url, const std::string& target, const HttpGetOptions& options = {});

}  // namespace tribunal
