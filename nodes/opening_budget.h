// The referee's bound on opened bytes in flight across its disputes (docs/protocol.md, "Bounds on a
// dispute's cost"): an input opening streams a node's inputs from both parties at once, and while the
// referee's workers are behind those frames wait in its memory (up to 4 MiB per connection before its
// reads pause, nodes/provider_link.h). A thousand disputes reaching their openings together would hold
// a thousand openings. A dispute instead reserves its opening's bytes here before its OpenInputs
// question is written; one that does not fit waits, first come first served, with its question unsent
// and its parties' clocks stopped (a question's clock starts when it is written: docs/protocol.md,
// "Clocks").
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>

namespace tribunal::nodes {

/// Reservations of opened bytes against a capacity, with a FIFO queue of waiters. Thread-safe.
class OpeningBudget {
 public:
  /// Called once when a waiting reservation is granted, on the thread whose release() made room,
  /// without the budget's lock held.
  using Granted = std::function<void()>;

  /// `capacity` in bytes. 0 grants one opening at a time.
  explicit OpeningBudget(uint64_t capacity) : capacity_(capacity) {}

  /// Reserves `bytes` for `holder` (any unique key, e.g. the dispute's address) and returns true when
  /// they fit beside what is reserved and no one waits before it; one reservation is always granted
  /// when nothing is reserved, however large (the dispute's cost limits bound it: `max_opened_bytes`).
  /// Otherwise queues `holder` and returns false: `granted` runs once its turn comes. A holder that
  /// already holds or waits is left as it is (returns whether it holds).
  bool reserve(const void* holder, uint64_t bytes, Granted granted);

  /// Gives back `holder`'s reservation, or takes it out of the queue; then grants the waiters at the
  /// head of the queue that now fit, in order. Nothing for a holder it does not know.
  void release(const void* holder);

  /// Bytes reserved now, and the reservations waiting (for /metrics).
  uint64_t reserved() const;
  size_t waiting() const;
  /// Reservations that had to wait since the start.
  uint64_t deferred() const;

 private:
  struct Waiter {
    const void* holder;
    uint64_t bytes;
    Granted granted;
  };
  bool fits(uint64_t bytes) const { return held_.empty() || reserved_ + bytes <= capacity_; }

  const uint64_t capacity_;
  mutable std::mutex mu_;
  std::map<const void*, uint64_t> held_;
  uint64_t reserved_ = 0;
  std::deque<Waiter> queue_;
  uint64_t deferred_ = 0;
};

}  // namespace tribunal::nodes
