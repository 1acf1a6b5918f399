#include "nodes/inbox.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace tribunal::nodes {

SessionHandlers Inbox::handlers() {
  auto self = shared_from_this();
  return {[self](Session&, std::vector<uint8_t> bytes) {
            std::lock_guard lock(self->mu_);
            self->queue_.push_back(std::move(bytes));
            self->cv_.notify_all();
          },
          [self](Session&, const CloseInfo& info) {
            std::lock_guard lock(self->mu_);
            self->closed_ = to_string(info);
            self->cv_.notify_all();
          }};
}

Envelope Inbox::next(std::chrono::seconds timeout, const std::string& peer, std::optional<MessageKind> kind,
                     const std::function<void()>& waiting, std::chrono::milliseconds every) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock lock(mu_);
  const auto deadline = Clock::now() + timeout;
  const auto ready = [&] { return !queue_.empty() || !closed_.empty(); };
  for (;;) {
    while (!ready()) {
      const auto now = Clock::now();
      if (now >= deadline) throw EngineError(fmt::format("{}: no answer within {} s", peer, timeout.count()));
      const auto slice = waiting ? std::min<Clock::duration>(deadline - now, every) : deadline - now;
      if (!cv_.wait_for(lock, slice, ready) && waiting && Clock::now() < deadline) {
        lock.unlock();
        waiting();
        lock.lock();
      }
    }
    if (queue_.empty()) throw ConnectionLost(fmt::format("{}: connection closed: {}", peer, closed_));
    const std::vector<uint8_t> bytes = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();  // the signature check runs while the session queues what comes next
    Envelope env = open_envelope(bytes);
    if (env.kind == MessageKind::Error)
      throw EngineError(fmt::format("{}: refused: {}", peer, std::get<ErrorMessage>(env.body).reason));
    if (!kind || env.kind == *kind) return env;
    lock.lock();
  }
}

bool Inbox::has_news() {
  std::lock_guard lock(mu_);
  return !queue_.empty() || !closed_.empty();
}

}  // namespace tribunal::nodes
