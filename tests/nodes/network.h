// A network on loopback for the node tests: a referee node, provider nodes (honest or cheating) and
// the delegating client, plus a raw peer that sends whatever envelopes a test (or an attacker) wants.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

#include "cheats/fault_policy.h"
#include "net/error.h"
#include "nodes/delegate.h"
#include "nodes/provider_node.h"
#include "nodes/referee_node.h"
#include "nodes/train_set.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

namespace tribunal::testing {

inline const std::filesystem::path kShortJob =
    tribunal::testing::source_dir() / "scenarios/jobs/short_mlp.toml";

struct Network {
  TempDir dir{"nodes"};
  NetContext ctx{2, false};
  KeyPair referee_key = generate_keypair();
  nodes::RefereeNode referee;
  std::string referee_url;
  std::vector<std::unique_ptr<nodes::ProviderNode>> providers;
  int next_store = 0;
  std::filesystem::path job_file = kShortJob;  ///< the job request() delegates

  explicit Network(nodes::RefereeNodeOptions options = {}, AddressPolicy policy = nodes::loopback_policy())
      : referee(ctx, referee_key, std::move(options), nodes::quiet_logger(), std::move(policy)) {
    set_net_log_sink([](std::string_view) {});
    referee_url = "ws://127.0.0.1:" + std::to_string(referee.listen("127.0.0.1", 0)) + "/";
    ctx.start();
  }
  ~Network() {
    ctx.stop();
    ctx.join();
    set_net_log_sink({});
  }
  /// A provider's configuration: its own store, trusting this network's referee.
  nodes::ProviderConfig config(const cheats::Fault& fault = {}) {
    nodes::ProviderConfig c;
    c.store = dir.path / ("store" + std::to_string(next_store++));
    c.referees = {referee_key.public_key};
    c.policy = cheats::fault_policy(fault);
    return c;
  }
  /// Starts a provider; returns its URL.
  std::string provider(const cheats::Fault& fault) { return provider(config(fault)); }
  std::string provider(nodes::ProviderConfig c, KeyPair key = generate_keypair()) {
    providers.push_back(std::make_unique<nodes::ProviderNode>(ctx, key, std::move(c), nodes::quiet_logger()));
    return "ws://127.0.0.1:" + std::to_string(providers.back()->listen("127.0.0.1", 0)) + "/";
  }
  nodes::DelegateRequest request(const std::vector<std::string>& urls) const {
    nodes::DelegateRequest r;
    r.job_file = job_file;
    r.providers = urls;
    r.referee = referee_url;
    r.referee_key = referee_key.public_key;
    r.out_dir = dir.path / "verdicts";
    r.client_key = generate_keypair();
    return r;
  }
  nodes::DelegateOutcome delegate(const std::vector<std::string>& urls) {
    return nodes::delegate_job(ctx, request(urls), nodes::quiet_logger());
  }
  Verdict verify(const std::vector<uint8_t>& verdict) const {
    return verify_verdict(verdict, referee_key.public_key);
  }
  /// Makes request() delegate the short job with the [dispute] table `terms` (e.g. "base_seconds =
  /// 1.5"): a dispute whose clocks run out quickly.
  void use_terms(const std::string& terms) {
    job_file = dir.path / ("job" + std::to_string(next_store++) + ".toml");
    std::ofstream(job_file) << short_job_with_terms(terms);
  }
  /// The short job's text with a [dispute] table.
  static std::string short_job_with_terms(const std::string& terms) {
    std::ifstream in(kShortJob);
    std::ostringstream text;
    text << in.rdbuf() << "\n[dispute]\n" << terms << "\n";
    return text.str();
  }
};

/// A cheater's fault: adds 10 to every element of `node`'s first output at `step`.
inline cheats::Fault corrupt(int64_t step, int64_t node) {
  cheats::Fault f;
  f.step = step;
  f.node = node;
  f.delta = 10.0f;
  return f;
}

/// A raw WebSocket peer: sends envelopes, collects every message it gets and how the session ended.
class RawPeer {
 public:
  RawPeer(NetContext& ctx, const std::string& url) { session_ = Client(ctx).connect_sync(url, handlers()); }
  void send(std::vector<uint8_t> bytes) { session_->send(std::move(bytes)); }
  /// Waits until the session ends (at most 30 s); returns every message received.
  std::vector<std::vector<uint8_t>> until_closed() {
    std::unique_lock lock(state_->mu);
    state_->cv.wait_for(lock, std::chrono::seconds(30), [&] { return state_->closed.has_value(); });
    REQUIRE(state_->closed.has_value());
    return state_->messages;
  }
  /// The first message of `kind` received (waiting at most 30 s for it).
  std::vector<uint8_t> first(MessageKind kind) {
    std::unique_lock lock(state_->mu);
    std::vector<uint8_t> found;
    state_->cv.wait_for(lock, std::chrono::seconds(30), [&] {
      for (const auto& m : state_->messages)
        if (open_envelope(m).kind == kind) {
          found = m;
          return true;
        }
      return state_->closed.has_value();
    });
    REQUIRE_FALSE(found.empty());
    return found;
  }
  /// The first ErrorMessage received before the session ended, or "" if none.
  std::string error() {
    for (const auto& m : until_closed()) {
      const Envelope env = open_envelope(m);
      if (env.kind == MessageKind::Error) return std::get<ErrorMessage>(env.body).reason;
    }
    return "";
  }
  CloseInfo close_info() {
    until_closed();
    return *state_->closed;
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::vector<uint8_t>> messages;
    std::optional<CloseInfo> closed;
  };
  SessionHandlers handlers() {
    auto st = state_;
    return {[st](Session&, std::vector<uint8_t> bytes) {
              std::lock_guard lock(st->mu);
              st->messages.push_back(std::move(bytes));
              st->cv.notify_all();  // first() waits for a message
            },
            [st](Session&, const CloseInfo& info) {
              std::lock_guard lock(st->mu);
              st->closed = info;
              st->cv.notify_all();
            }};
  }
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::shared_ptr<Session> session_;
};

}  // namespace tribunal::testing
