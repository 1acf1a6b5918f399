#include "net/receive_limits.h"

namespace tribunal::net_detail {

void ReceiveLimits::message_done(Clock::time_point now) {
  message_started_.reset();
  last_received_ = now;
  received_any_ = true;
}

std::optional<ReceiveLimits::Clock::time_point> ReceiveLimits::next_deadline() const {
  std::optional<Clock::time_point> next;
  auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  if (options_.idle_timeout.count() > 0) consider(last_received_ + options_.idle_timeout);
  if (options_.first_message_timeout.count() > 0 && !received_any_)
    consider(opened_ + options_.first_message_timeout);
  if (options_.message_timeout.count() > 0 && message_started_)
    consider(*message_started_ + options_.message_timeout);
  return next;
}

ReceiveBreach ReceiveLimits::check(Clock::time_point now) const {
  if (options_.message_timeout.count() > 0 && message_started_ &&
      now - *message_started_ >= options_.message_timeout)
    return ReceiveBreach::MessageTooSlow;
  if (options_.first_message_timeout.count() > 0 && !received_any_ &&
      now - opened_ >= options_.first_message_timeout)
    return ReceiveBreach::NoMessage;
  if (options_.idle_timeout.count() > 0 && now - last_received_ >= options_.idle_timeout)
    return ReceiveBreach::Idle;
  return ReceiveBreach::None;
}

}  // namespace tribunal::net_detail
