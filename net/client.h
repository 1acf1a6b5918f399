// The WebSocket client: connects to "ws://host:port/path" and yields a session (docs/protocol.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "net/address_policy.h"
#include "net/session.h"
#include "net/tls.h"

namespace tribunal {

class NetContext;

/// A parsed "ws://host[:port][/path]" or "wss://host[:port][/path]" URL.
struct WsUrl {
  std::string host;          ///< without brackets for IPv6
  uint16_t port = 80;        ///< default 80 for ws://, 443 for wss://
  std::string target = "/";  ///< path and query
  bool tls = false;          ///< wss://
};

/// Parses a ws:// or wss:// URL (IPv6 hosts in brackets). Throws NetError saying what is wrong.
WsUrl parse_ws_url(std::string_view url);

/// Client limits.
struct ClientOptions {
  /// Name resolution, TCP connect and WebSocket handshake together.
  std::chrono::milliseconds connect_timeout{10000};
  /// Local address to bind before connecting (e.g. "127.0.0.2" to connect to a loopback server
  /// from another source address); empty: the system picks.
  std::string local_address;
  /// Which resolved addresses may be connected to (default: any). A URL whose every address is
  /// refused fails with an error naming the address and why.
  AddressPolicy address_policy = AddressPolicy::any();
  SessionOptions session;
  /// For wss:// URLs (TlsContext::client: the CAs the server's certificate must chain to); null: the
  /// system's CAs. ws:// URLs ignore it.
  std::shared_ptr<TlsContext> tls;
};

/// Opens client sessions on a NetContext. Cheap; holds no connections itself.
class Client {
 public:
  /// On success `session` is open and `error` empty; on failure `session` is null and `error` says
  /// why (including "HTTP 503" when the server is full). Runs on the session's strand; install the
  /// session's handlers here — reading starts when the callback returns.
  using ConnectCallback = std::function<void(std::shared_ptr<Session> session, const std::string& error)>;

  explicit Client(NetContext& ctx, ClientOptions options = {});

  /// Starts connecting; `done` is called exactly once. Thread-safe. Throws NetError for a bad URL.
  void connect(std::string_view url, ConnectCallback done);

  /// Connects and waits: the context must be running on other threads (NetContext::start), never
  /// call this from one of them. `handlers` are installed before reading starts. Throws NetError
  /// on failure (or when no answer comes within connect_timeout + 5 s: the context is not running).
  std::shared_ptr<Session> connect_sync(std::string_view url, SessionHandlers handlers = {});

 private:
  NetContext& ctx_;
  ClientOptions options_;
  std::string system_tls_error_;  // why options_.tls is null
};

}  // namespace tribunal
