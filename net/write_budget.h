// Internal to net/: the bound on a session's write queue (SessionOptions::max_queued_messages and
// max_queued_bytes), apart from any I/O so that it can be tested alone. Shared by the threads that
// send (Session::send, wait_for_room) and the session's strand, which writes and releases.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace tribunal::net_detail {

/// Counts the messages a session has accepted and not yet written (or dropped), and their bytes.
/// Thread-safe.
class WriteBudget {
 public:
  WriteBudget(size_t max_messages, size_t max_bytes) : max_messages_(max_messages), max_bytes_(max_bytes) {}

  /// The outcome of claim(): the totals it saw, the new message included.
  struct Claim {
    bool ok = false;  ///< within both bounds: the message now counts until release()
    size_t messages = 0;
    size_t bytes = 0;
  };
  /// Counts one message of `bytes` from now on — unless the totals with it pass either bound: then
  /// nothing stays counted and `ok` is false (the session closes with 1008).
  Claim claim(size_t bytes);
  /// One message of `bytes` has been written or dropped; wakes wait_for_room().
  void release(size_t bytes);
  /// Blocks until a message of `bytes` would fit both bounds (or nothing is queued, so that one
  /// message larger than max_bytes still goes); returns false at once when `open` reads false.
  bool wait_for_room(size_t bytes, const std::atomic<bool>& open);

 private:
  const size_t max_messages_;
  const size_t max_bytes_;
  std::atomic<size_t> messages_{0};
  std::atomic<size_t> bytes_{0};
  std::mutex mutex_;  // wait_for_room() waits here for release()
  std::condition_variable room_;
};

}  // namespace tribunal::net_detail
