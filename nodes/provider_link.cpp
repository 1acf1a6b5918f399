#include "nodes/provider_link.h"

#include <algorithm>

#include <boost/asio/post.hpp>

namespace tribunal::nodes {

namespace asio = boost::asio;

ProviderLink::ProviderLink(DisputeStrand strand, std::weak_ptr<void> owner, ProviderLinkEvents events)
    : strand_(std::move(strand)), owner_(std::move(owner)), events_(std::move(events)) {}

void ProviderLink::connect(Client& client, const std::string& url) {
  connecting_ = true;
  retry_at_.reset();
  client.connect(url, [this, owner = owner_](std::shared_ptr<Session> s, const std::string& error) {
    auto held = owner.lock();
    if (!held) {  // the dispute is gone, and this link with it
      if (s) s->close(CloseCode::Normal, "dispute over");
      return;
    }
    if (s) install(s);
    asio::post(strand_, [this, held, s = std::move(s), error] { events_.connected(s, error); });
  });
}

// Installed on the network thread, inside the connect callback, so no message is missed; each only
// stamps its arrival (the time its lateness is judged by) and hands it to the dispute's strand. Up to
// kMaxPendingBytes wait there: a stream is stamped as it arrives even while the strand is busy; beyond
// it the session's reads pause until the backlog is handled (TCP holds the sender back), and no
// timeout is decided for the party meanwhile (holds_timeout).
void ProviderLink::install(const std::shared_ptr<Session>& s) {
  std::weak_ptr<Session> session = s;
  s->set_handlers(
      {[this, owner = owner_, session](Session& current, std::vector<uint8_t> bytes) {
         const auto received = SteadyClock::now();
         const GameTime arrived = std::chrono::time_point_cast<std::chrono::milliseconds>(received);
         auto held = owner.lock();
         auto self = session.lock();
         if (!held || !self) return;
         const size_t size = bytes.size();
         {
           std::lock_guard lock(pending_mu_);
           ++pending_;
           pending_bytes_ += size;
           if (pending_bytes_ >= kMaxPendingBytes) current.set_reading(false);
         }
         asio::post(strand_, [this, held, self, size, bytes = std::move(bytes), arrived, received]() mutable {
           {
             std::lock_guard lock(pending_mu_);
             --pending_;
             pending_bytes_ -= size;
             if (pending_bytes_ + size >= kMaxPendingBytes && pending_bytes_ < kMaxPendingBytes)
               self->set_reading(true);
           }
           events_.frame(self, std::move(bytes), arrived, received);
         });
       },
       [this, owner = owner_, session](Session&, const CloseInfo& info) {
         auto held = owner.lock();
         if (!held) return;
         asio::post(strand_, [this, held, self = session.lock(), info] { events_.closed(self, info); });
       }});
}

bool ProviderLink::established(std::shared_ptr<Session> session) {
  session_ = std::move(session);
  backoff_ = std::chrono::milliseconds{0};
  const bool again = connected_once_;
  connected_once_ = true;
  return again;
}

std::chrono::milliseconds ProviderLink::lost(GameTime now) {
  backoff_ = backoff_ == std::chrono::milliseconds{0} ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
  retry_at_ = now + backoff_;
  writing_ = false;  // a question on the lost connection will not be written
  return backoff_;
}

bool ProviderLink::closed(const std::shared_ptr<Session>& session) {
  if (!session_ || session_ != session) return false;
  session_.reset();
  return true;
}

void ProviderLink::close(CloseCode code, const std::string& reason) {
  if (session_) session_->close(code, reason);
}

void ProviderLink::send(std::vector<uint8_t> envelope) {
  session_->send(std::move(envelope));
}

void ProviderLink::ask(std::vector<uint8_t> envelope, std::function<void()> written) {
  const bool queued = session_->send_and_notify(std::move(envelope), std::move(written));
  writing_ = queued;
  if (queued) asked_ = SteadyClock::now();
}

std::optional<ProviderLink::SteadyClock::time_point> ProviderLink::answered() {
  const auto since = asked_;
  asked_.reset();
  return since;
}

bool ProviderLink::holds_timeout() {
  std::lock_guard lock(pending_mu_);
  return pending_ != 0 || writing_;
}

}  // namespace tribunal::nodes
