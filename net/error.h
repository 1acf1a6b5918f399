// Errors and log lines of the WebSocket transport (docs/protocol.md).
//
// Handlers never throw: every failure on an I/O path ends in one log line through the sink below and,
// for an open session, a close code. Only calls made directly by the application (Server::listen,
// parse_ws_url, Client::connect_sync, ...) throw NetError.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tribunal {

/// A transport failure reported to the caller: bad URL, cannot listen, cannot connect, refused.
class NetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Receives one log line (no trailing newline) per event: refusals, failed handshakes, errors, closes.
/// Called from I/O threads, serialized by the library.
using NetLogSink = std::function<void(std::string_view line)>;

/// Replaces the sink; an empty function restores the default (stderr, each line prefixed "[net] ").
/// Thread-safe.
void set_net_log_sink(NetLogSink sink);

/// Writes one line through the current sink. Never throws.
void net_log(std::string_view line) noexcept;

}  // namespace tribunal
