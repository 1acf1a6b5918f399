// Internal to net/: the receive limits of an open session (SessionOptions::idle_timeout,
// first_message_timeout, message_timeout) as clocks, apart from any I/O so that they can be tested
// alone. The session (net/session.cpp) feeds them what it reads and arms one timer at next_deadline().
#pragma once

#include <chrono>
#include <optional>

#include "net/session.h"

namespace tribunal::net_detail {

/// Which receive limit a session has run past, checked in this order.
enum class ReceiveBreach {
  None,
  MessageTooSlow,  ///< a message's first payload bytes came message_timeout ago and it is not complete (1008)
  NoMessage,       ///< no complete message within first_message_timeout of the handshake (1001)
  Idle,            ///< no complete message for idle_timeout (1001)
};

/// The clocks of one session; a zero timeout in SessionOptions disables its limit.
class ReceiveLimits {
 public:
  using Clock = std::chrono::steady_clock;

  /// `opened`: the end of the WebSocket handshake (both the first-message and the idle clock start).
  ReceiveLimits(const SessionOptions& options, Clock::time_point opened)
      : options_(options), opened_(opened), last_received_(opened) {}

  /// The first payload bytes of a message that is not yet complete have arrived.
  void message_started(Clock::time_point now) { message_started_ = now; }
  /// Whether a message is partly received.
  bool in_message() const { return message_started_.has_value(); }
  /// A message is complete.
  void message_done(Clock::time_point now);
  /// The idle clock restarts (the application paused reading: the time was not the peer's silence).
  void restart_idle(Clock::time_point now) { last_received_ = now; }

  /// The earliest moment one of the limits may be reached; none when every limit is off or over.
  std::optional<Clock::time_point> next_deadline() const;
  /// The first limit run past at `now`.
  ReceiveBreach check(Clock::time_point now) const;

 private:
  const SessionOptions& options_;  // the session's; it outlives this
  Clock::time_point opened_;
  Clock::time_point last_received_;
  bool received_any_ = false;
  std::optional<Clock::time_point> message_started_;
};

}  // namespace tribunal::net_detail
