// The envelopes arriving on one client session, taken by the thread that waits for them: the
// delegate's sessions with providers and the referee (nodes/delegate.h), an auditor's fetch of the
// trainer's rounding logs (nodes/trainer_logs.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "net/session.h"
#include "protocol/envelope.h"

namespace tribunal::nodes {

/// The connection ended before the awaited message: the peer may come back (a restarted referee).
class ConnectionLost : public EngineError {
 public:
  using EngineError::EngineError;
};

/// Received messages of one client session, queued until taken. Held by a shared_ptr: the session's
/// handlers keep it alive, and may still run after the waiting side has moved on. Thread-safe.
class Inbox : public std::enable_shared_from_this<Inbox> {
 public:
  /// The handlers to install on the session (Client::connect_sync): each message is queued, the
  /// session's end remembered.
  SessionHandlers handlers();

  /// The next envelope, opened (signature checked; WireError when it does not open), waiting up to
  /// `timeout`; with `kind`, envelopes of other kinds are dropped until one of `kind` comes. `waiting`,
  /// when given, is called every `every` while nothing has come (without the inbox's lock). Throws
  /// EngineError "PEER: no answer within N s" and "PEER: refused: REASON" (an ErrorMessage), and
  /// ConnectionLost "PEER: connection closed: …" once the queue is empty and the session has ended.
  Envelope next(std::chrono::seconds timeout, const std::string& peer,
                std::optional<MessageKind> kind = std::nullopt, const std::function<void()>& waiting = {},
                std::chrono::milliseconds every = std::chrono::seconds(10));

  /// Whether a message or the session's end is waiting to be taken (e.g. a provider's claim has come).
  bool has_news();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<uint8_t>> queue_;
  std::string closed_;  // how the session ended; empty while it lasts
};

}  // namespace tribunal::nodes
