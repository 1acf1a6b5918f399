#include "net/write_budget.h"

#include <chrono>

namespace tribunal::net_detail {

WriteBudget::Claim WriteBudget::claim(size_t bytes) {
  // Counted before the message reaches the strand, so the bound holds for messages still in the
  // strand's post queue too.
  Claim c{true, messages_.fetch_add(1) + 1, bytes_.fetch_add(bytes) + bytes};
  if (c.messages > max_messages_ || c.bytes > max_bytes_) {
    release(bytes);
    c.ok = false;
  }
  return c;
}

void WriteBudget::release(size_t bytes) {
  messages_.fetch_sub(1);
  bytes_.fetch_sub(bytes);
  room_.notify_all();
}

bool WriteBudget::wait_for_room(size_t bytes, const std::atomic<bool>& open) {
  std::unique_lock lock(mutex_);
  while (open.load()) {
    const size_t messages = messages_.load(), queued = bytes_.load();
    if (messages == 0 || (messages + 1 <= max_messages_ && queued + bytes <= max_bytes_)) return true;
    // Woken by release(); the timed wait also notices a close, which releases nothing.
    room_.wait_for(lock, std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace tribunal::net_detail
