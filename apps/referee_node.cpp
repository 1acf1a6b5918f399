#include <time.h>

#include <array>
#include <chrono>

#include <fmt/format.h>

#include "apps/nodes.h"

namespace tribunal::cli {
namespace {

uint64_t now_ms() {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count());
}

// CPU time of the calling thread, to charge each dispute only for its own handling.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

struct RefereeNode::Live {
  std::mutex mu;
  std::unique_ptr<RefereeDispute> dispute;
  std::shared_ptr<Session> client;
  std::array<std::shared_ptr<Session>, 2> providers;
  std::array<std::vector<std::vector<uint8_t>>, 2> backlog;  // until the provider connection is up
  DisputeStats stats;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool finished = false;
};

RefereeNode::RefereeNode(NetContext& ctx, KeyPair key, RefereeOptions options, LogFn log)
    : ctx_(ctx),
      key_(key),
      options_(options),
      log_(std::move(log)),
      server_(ctx,
              [this](std::shared_ptr<Session> s) {
                std::weak_ptr<Session> weak = s;
                s->set_handlers({[this, weak](Session& session, std::vector<uint8_t> bytes) {
                                   try {
                                     const Envelope env = open_envelope(bytes);
                                     if (env.kind != MessageKind::DisputeOpen)
                                       throw WireError(CloseCode::PolicyViolation, "expected a DisputeOpen");
                                     if (auto self = weak.lock()) open(self, env);
                                   } catch (const WireError& e) {
                                     log_(fmt::format("referee: refused client {}: {}", session.remote_endpoint(), e.what()));
                                     session.close(e.code(), e.what());
                                   } catch (const std::exception& e) {
                                     log_(fmt::format("referee: refused dispute from {}: {}", session.remote_endpoint(), e.what()));
                                     session.send(seal(key_, {}, 1, ErrorMessage{1008, e.what()}));
                                     session.close(CloseCode::PolicyViolation, "dispute refused");
                                   }
                                 },
                                 {}});
              }),
      client_(ctx) {
  ticker_ = std::thread([this] {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::vector<std::shared_ptr<Live>> all;
      {
        std::lock_guard lock(mu_);
        for (auto& [id, live] : live_) all.push_back(live);
      }
      for (auto& live : all) {
        std::lock_guard lock(live->mu);
        if (live->finished) continue;
        const double c0 = thread_cpu_seconds();
        auto out = live->dispute->on_tick(now_ms());
        live->stats.cpu_seconds += thread_cpu_seconds() - c0;
        deliver(*live, std::move(out));
        finish_if_done(*live);
      }
    }
  });
}

RefereeNode::~RefereeNode() {
  stop_ = true;
  ticker_.join();
}

uint16_t RefereeNode::listen(const std::string& host, uint16_t port) { return server_.listen(host, port); }

void RefereeNode::open(std::shared_ptr<Session> client, const Envelope& env) {
  auto live = std::make_shared<Live>();
  const double c0 = thread_cpu_seconds();
  live->dispute = std::make_unique<RefereeDispute>(key_, env, options_);
  live->client = client;
  live->stats.bytes_in += env.bytes.size();
  RefereeDispute& d = *live->dispute;
  const std::string tag = to_hex(d.dispute_id()).substr(0, 12);
  d.on_event = [this, tag](const DisputeEvent& e) {
    log_(fmt::format("referee: dispute {} round {}: {}", tag, e.round, e.text));
    if (on_event) on_event(e);
  };
  {
    std::lock_guard lock(mu_);
    if (live_.count(d.dispute_id())) throw ProtocolError("this dispute is already open");
    live_[d.dispute_id()] = live;
  }
  std::lock_guard lock(live->mu);
  deliver(*live, d.start(now_ms()));
  live->stats.cpu_seconds += thread_cpu_seconds() - c0;
  for (int p = 0; p < 2; ++p) {
    const std::string url = d.providers()[static_cast<size_t>(p)];
    std::weak_ptr<Live> weak = live;
    client_.connect(url, [this, weak, p, url, tag](std::shared_ptr<Session> s, const std::string& error) {
      auto live = weak.lock();
      if (!live) return;
      if (!s) {
        // The game's deadline makes an unreachable provider forfeit.
        log_(fmt::format("referee: dispute {}: cannot reach provider {} at {}: {}", tag, p, url, error));
        return;
      }
      std::weak_ptr<Live> weak2 = live;
      s->set_handlers({[this, weak2, p](Session& session, std::vector<uint8_t> bytes) {
                         auto live = weak2.lock();
                         if (!live) return;
                         std::lock_guard lock(live->mu);
                         live->stats.bytes_in += bytes.size();
                         if (live->finished) return;
                         const double c0 = thread_cpu_seconds();
                         try {
                           const Envelope env = open_envelope(bytes);
                           std::string refused;
                           auto out = live->dispute->on_envelope(p, env, now_ms(), &refused);
                           if (!refused.empty()) log_(fmt::format("referee: refused a message from provider {}: {}", p, refused));
                           deliver(*live, std::move(out));
                         } catch (const WireError& e) {
                           // Undecodable or badly signed: refused without touching the game.
                           log_(fmt::format("referee: refused a frame from {}: {}", session.remote_endpoint(), e.what()));
                         }
                         live->stats.cpu_seconds += thread_cpu_seconds() - c0;
                         finish_if_done(*live);
                       },
                       {}});
      std::lock_guard lock(live->mu);
      live->providers[static_cast<size_t>(p)] = s;
      for (auto& bytes : live->backlog[static_cast<size_t>(p)]) s->send(std::move(bytes));
      live->backlog[static_cast<size_t>(p)].clear();
    });
  }
}

void RefereeNode::deliver(Live& live, std::vector<RefereeDispute::Outgoing> out) {
  for (auto& o : out) {
    live.stats.bytes_out += o.envelope.size();
    auto& s = live.providers[static_cast<size_t>(o.party)];
    if (s)
      s->send(std::move(o.envelope));
    else
      live.backlog[static_cast<size_t>(o.party)].push_back(std::move(o.envelope));
  }
}

void RefereeNode::finish_if_done(Live& live) {
  if (live.finished || !live.dispute->done()) return;
  live.finished = true;
  live.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - live.started).count();
  live.stats.bytes_out += live.dispute->verdict_envelope().size();
  live.client->send(live.dispute->verdict_envelope());
  live.client->close(CloseCode::Normal, "verdict");
  for (auto& s : live.providers)
    if (s) s->close(CloseCode::Normal, "verdict");
  if (on_finished) on_finished(*live.dispute, live.stats);
  std::lock_guard lock(mu_);
  live_.erase(live.dispute->dispute_id());
}

}  // namespace tribunal::cli
