// A WebSocket session: a byte pipe of binary messages with limits (docs/protocol.md).
//
// Each message is one binary WebSocket frame holding one signed envelope; this layer never decodes
// it. Server- and client-side sessions are the same type. Every session runs on its own strand, keeps
// at most one write in flight behind a bounded queue, refuses frames over its size limit (1009) and
// text frames (1003), and reports its end exactly once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "protocol/wire.h"

namespace tribunal {

/// RFC 6455 §7.4.1 codes this layer needs beyond protocol/wire.h's CloseCode.
inline constexpr CloseCode kCloseUnsupportedData = static_cast<CloseCode>(1003);  ///< a text frame
/// Reported (never sent) when the peer's close frame carried no code.
inline constexpr CloseCode kCloseNoStatus = static_cast<CloseCode>(1005);
/// Reported (never sent) when the connection ended without a close frame: reset, timeout, EOF.
inline constexpr CloseCode kCloseAbnormal = static_cast<CloseCode>(1006);

/// How a session ended. `code` may hold any value a peer sent, not only the named enumerators.
struct CloseInfo {
  CloseCode code = kCloseAbnormal;
  std::string reason;    ///< the close frame's reason text (≤ 123 bytes)
  bool by_peer = false;  ///< the peer sent the first close frame
  std::string error;     ///< the transport error, empty after a clean close handshake
};

/// One line for logs, e.g. "1009 (message too big) by us: message too big".
std::string to_string(const CloseInfo& info);

/// Limits and timeouts of one session. The WebSocket handshake, keep-alive pings and the transport
/// idle limit follow Beast's websocket::stream_base::timeout::suggested for the session's role.
struct SessionOptions {
  /// Largest message accepted from the peer (larger: close 1009) and the largest one send() takes.
  size_t max_message_bytes = kMaxMessageBytes;
  /// The write queue: sending beyond either bound closes the session with 1008, so a peer that
  /// reads slowly cannot make us buffer without bound.
  size_t max_queued_messages = 64;
  size_t max_queued_bytes = size_t{8} << 20;
  /// Application-level idle limit: no message received for this long closes the session with 1001
  /// "idle timeout". Zero disables it (Beast's keep-alive pings still detect dead peers on the server).
  std::chrono::milliseconds idle_timeout{0};
  /// No complete message within this long after the handshake closes the session with 1001
  /// "no message": a connection that is opened and left silent cannot hold a slot for long. Zero
  /// disables it (the default here; ServerOptions turns it on for servers).
  std::chrono::milliseconds first_message_timeout{0};
  /// A message whose first payload bytes have arrived must be complete within this long, or the
  /// session closes with 1008 "message too slow": a peer trickling a frame byte by byte cannot hold
  /// its buffer (up to max_message_bytes) for long. Zero disables it.
  std::chrono::milliseconds message_timeout{60000};
  /// Time allowed for our close handshake (after flushing queued messages); then the socket is dropped.
  std::chrono::milliseconds close_timeout{5000};
};

class Session;

/// Callbacks of a session; they run on the session's strand, one at a time, and must not block.
/// An exception escaping one is logged and closes the session with 1011.
struct SessionHandlers {
  /// One received binary message, in order.
  std::function<void(Session&, std::vector<uint8_t>)> on_message;
  /// Called exactly once when the session has ended; no on_message follows it.
  std::function<void(Session&, const CloseInfo&)> on_close;
};

/// A session handed out by Server (on_session) or Client (connect); always owned by a shared_ptr.
/// Its NetContext must outlive it.
class Session {
 public:
  virtual ~Session() = default;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Process-unique id, for logs.
  uint64_t id() const { return id_; }
  /// The peer as "address:port" (IPv6 as "[address]:port").
  const std::string& remote_endpoint() const { return remote_; }

  /// Installs the callbacks. Set them inside the on_session / connect callback: reading starts
  /// when that callback returns, so no message is missed. Thread-safe; after on_close they are
  /// dropped (which also releases anything they capture).
  virtual void set_handlers(SessionHandlers handlers) = 0;

  /// Queues one binary message; thread-safe, never blocks. Returns false and sends nothing when the
  /// session is closing or closed (a no-op), when the message exceeds max_message_bytes, or when the
  /// queue limits are exceeded — which closes the session with 1008.
  virtual bool send(std::vector<uint8_t> message) = 0;
  /// send(), and once the message has been written to the connection (handed to the transport),
  /// calls `on_written` on the session's strand; it is never called for a message that is dropped.
  /// The referee starts a party's clock then (docs/protocol.md, "Clocks").
  virtual bool send_and_notify(std::vector<uint8_t> message, std::function<void()> on_written) = 0;

  /// Back-pressure for a producer that streams more than the write queue holds (a provider opening
  /// a tensor of many chunks): blocks the calling thread until a message of `bytes` bytes fits the
  /// queue limits (or the queue is empty), so the following send() cannot overflow it. Returns false
  /// at once when the session is closing or closed. Never call it on the session's I/O thread (a
  /// handler): the writes it waits for run there.
  virtual bool wait_for_room(size_t bytes) = 0;

  /// Starts the close handshake after the messages already queued are written. Thread-safe;
  /// idempotent. `reason` is cut to 123 bytes (the close frame's limit); a code that may not be
  /// sent (e.g. 1006) becomes 1011.
  virtual void close(CloseCode code = CloseCode::Normal, std::string reason = {}) = 0;

  /// True from the handshake until a close starts or the connection fails.
  virtual bool is_open() const = 0;

  /// Flow control for handlers that hand messages to other threads: with `on` false, no further
  /// message is read once the current one is delivered, so a peer sending faster than it is served
  /// is held back by TCP instead of filling a queue; true resumes. Thread-safe. While paused, the
  /// idle and first-message limits do not run, and a close still completes (the close reply is read).
  virtual void set_reading(bool on) = 0;

 protected:
  /// `id`: a fresh process-unique number (the handshake that makes the session takes it).
  explicit Session(uint64_t id) : id_(id) {}
  std::string remote_;  ///< set before the session is handed out, constant afterwards

 private:
  uint64_t id_;
};

}  // namespace tribunal
