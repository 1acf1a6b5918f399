// The on-path attacker of plain ws://. See fault_proxy.h.
#include "scenarios/fault_proxy.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <utility>

namespace tribunal::scenarios {

// One proxied connection: the referee's session (downstream) and the provider's (upstream). Frames
// from the referee that come before the upstream connection is made wait in `early`.
struct FaultProxy::Link {
  std::mutex mu;
  uint64_t id = 0;
  std::shared_ptr<Session> downstream, upstream;
  std::vector<std::vector<uint8_t>> early;
  std::array<uint64_t, 2> frames{};  // per Direction
  bool closed = false;

  // Closes both sides once, and lets go of them: their handlers own the link, so holding them too
  // would be a cycle that outlives a stopped NetContext.
  void close_both(CloseCode code, const std::string& why) {
    std::shared_ptr<Session> a, b;
    {
      std::lock_guard lock(mu);
      if (std::exchange(closed, true)) return;
      a = std::move(downstream);
      b = std::move(upstream);
      early.clear();
    }
    if (a) a->close(code, why);
    if (b) b->close(code, why);
  }
};

FaultProxy::FaultProxy(NetContext& ctx, std::string upstream, FrameFilter filter)
    : ctx_(ctx),
      upstream_(std::move(upstream)),
      filter_(std::move(filter)),
      server_(
          ctx, [this](std::shared_ptr<Session> s) { on_session(std::move(s)); },
          [] {
            ServerOptions o;
            o.session.first_message_timeout = std::chrono::milliseconds{0};  // the referee may wait
            return o;
          }()),
      client_(ctx) {}

FaultProxy::~FaultProxy() {
  std::vector<std::weak_ptr<Link>> links;
  {
    std::lock_guard lock(mu_);
    links.swap(links_);
  }
  for (auto& weak : links)
    if (auto l = weak.lock()) l->close_both(CloseCode::GoingAway, "proxy stopping");
}

void FaultProxy::set_upstream(std::string upstream) {
  std::lock_guard lock(mu_);
  upstream_ = std::move(upstream);
}

std::string FaultProxy::listen() {
  return "ws://127.0.0.1:" + std::to_string(server_.listen("127.0.0.1", 0)) + "/";
}

ProxyCounts FaultProxy::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void FaultProxy::on_session(std::shared_ptr<Session> downstream) {
  auto link = std::make_shared<Link>();
  link->downstream = downstream;
  {
    std::lock_guard lock(mu_);
    link->id = counts_.connections++;
    links_.push_back(link);
  }
  std::weak_ptr<Link> weak = link;
  // One frame through the filter, to the session `to`: forwarded now, later, twice, never, or the
  // connection cut.
  auto route = [this, weak](Direction d, std::vector<uint8_t> frame, const std::shared_ptr<Session>& to) {
    auto l = weak.lock();
    if (!l || !to) return;
    uint64_t index = 0;
    {
      std::lock_guard lock(l->mu);
      if (l->closed) return;
      index = l->frames[static_cast<size_t>(d)]++;
    }
    const FrameFault f = filter_(d, l->id, index, frame);
    const auto count = [&](uint64_t ProxyCounts::*field) {
      std::lock_guard lock(mu_);
      ++(counts_.*field);
    };
    const auto deliver_after = [&](std::chrono::milliseconds delay, std::vector<uint8_t> bytes) {
      if (delay <= std::chrono::milliseconds{0}) {
        to->send(std::move(bytes));
        return;
      }
      auto timer = std::make_shared<boost::asio::steady_timer>(ctx_.io(), delay);
      timer->async_wait([timer, to, bytes = std::move(bytes)](const boost::system::error_code& ec) mutable {
        if (!ec) to->send(std::move(bytes));
      });
    };
    switch (f.kind) {
      case FrameFault::Kind::Forward:
        count(f.delay > std::chrono::milliseconds{0} ? &ProxyCounts::delayed : &ProxyCounts::forwarded);
        deliver_after(f.delay, std::move(frame));
        break;
      case FrameFault::Kind::Drop:
        count(&ProxyCounts::dropped);
        break;
      case FrameFault::Kind::Duplicate:
        count(&ProxyCounts::duplicated);
        deliver_after(std::chrono::milliseconds{0}, frame);
        deliver_after(f.delay, std::move(frame));
        break;
      case FrameFault::Kind::Cut:
        count(&ProxyCounts::cut);
        l->close_both(CloseCode::GoingAway, "proxy cut the connection");
        break;
    }
  };
  // The sessions' handlers own the link (they are dropped when a session ends): the link lives as
  // long as either side of it.
  downstream->set_handlers({[link, route](Session&, std::vector<uint8_t> bytes) {
                              const auto& l = link;
                              std::shared_ptr<Session> up;
                              {
                                std::lock_guard lock(l->mu);
                                up = l->upstream;
                                if (!up) {  // not connected yet (or still flushing): kept in order
                                  l->early.push_back(std::move(bytes));
                                  return;
                                }
                              }
                              route(Direction::ToProvider, std::move(bytes), up);
                            },
                            [link](Session&, const CloseInfo&) {
                              link->close_both(CloseCode::GoingAway, "referee side closed");
                            }});
  std::string upstream;
  {
    std::lock_guard lock(mu_);
    upstream = upstream_;
  }
  client_.connect(upstream, [weak, route](std::shared_ptr<Session> up, const std::string&) {
    auto l = weak.lock();
    if (!l) {
      if (up) up->close(CloseCode::GoingAway, "proxy link gone");
      return;
    }
    if (!up) {
      l->close_both(CloseCode::GoingAway, "provider unreachable");
      return;
    }
    std::shared_ptr<Session> down;
    {
      std::lock_guard lock(l->mu);
      down = l->downstream;
    }
    up->set_handlers(
        {[l, route, down](Session&, std::vector<uint8_t> bytes) {
           route(Direction::ToReferee, std::move(bytes), down);
         },
         [l](Session&, const CloseInfo&) { l->close_both(CloseCode::GoingAway, "provider side closed"); }});
    // The referee's frames that came first go first; the link opens once none is left.
    for (;;) {
      std::vector<std::vector<uint8_t>> early;
      {
        std::lock_guard lock(l->mu);
        if (l->closed) {
          up->close(CloseCode::GoingAway, "referee side closed");
          return;
        }
        if (l->early.empty()) {
          l->upstream = up;
          break;
        }
        early.swap(l->early);
      }
      for (auto& frame : early) route(Direction::ToProvider, std::move(frame), up);
    }
  });
}

}  // namespace tribunal::scenarios
