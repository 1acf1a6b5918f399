#include "scenarios/runner.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "cheats/fault_policy.h"
#include "net/client.h"
#include "nodes/delegate.h"
#include "nodes/provider_node.h"
#include "nodes/referee_node.h"
#include "scenarios/behaviour.h"

namespace tribunal::scenarios {
namespace {

// A trainer's altered logs (LogServing::Altered): the step's first logged decision turned the other way
// (down ↔ up) — logs other than the ones its records commit to, which an auditor that replays them
// follows (the value is near a boundary), so its outputs differ.
void flip_first_decision(StepRoundingLog& log) {
  for (RoundingLog& node : log.nodes)
    for (uint8_t& byte : node.packed)  // five trits a byte, the first the least significant base-3 digit
      for (int weight = 1, rest = byte; rest > 0; weight *= 3, rest /= 3)
        if (const int t = rest % 3; t != 0) {
          byte = static_cast<uint8_t>(byte + (t == 1 ? weight : -weight));
          return;
        }
}

// The providers of one run. A crash-restart destroys a node and builds a new one on the same port,
// key and store from a thread of its own, since the request comes from inside the node.
class ProviderFleet {
 public:
  ProviderFleet(NetContext& ctx, const Scenario& s, const RunOptions& o, const std::filesystem::path& dir,
                const PublicKey& referee)
      : ctx_(ctx), options_(o), referee_(referee), registry_(s.registry) {
    for (size_t i = 0; i < s.providers.size(); ++i) {
      Slot slot;
      slot.spec = s.providers[i];
      slot.key = generate_keypair();
      slot.store = dir / slot.spec.name;
      slot.state = std::make_shared<BehaviourState>(s.seed * 1000003u + i);
      slots_.push_back(std::move(slot));
    }
    if (o.link_faults)
      for (size_t i = 0; i < slots_.size(); ++i) {
        slots_[i].proxy = std::make_unique<FaultProxy>(ctx, "", o.link_faults(i));
        slots_[i].proxy_url = slots_[i].proxy->listen();
      }
    for (size_t i = 0; i < slots_.size(); ++i) {
      const std::string& mirror = slots_[i].spec.answers.mirror;
      for (auto& other : slots_)
        if (!mirror.empty() && other.spec.name == mirror) slots_[i].mirror_store = other.store;
    }
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < slots_.size(); ++i) start(i);
    restarter_ = std::thread([this] { restart_loop(); });
  }

  ~ProviderFleet() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    restarter_.join();
    // Destroyed outside the lock: a node's worker may be waiting for it in a crash request.
    std::vector<std::unique_ptr<nodes::ProviderNode>> nodes;
    {
      std::lock_guard lock(mu_);
      for (auto& s : slots_) nodes.push_back(std::move(s.node));
    }
    nodes.clear();
  }

  std::vector<std::string> urls() const {
    std::vector<std::string> out;
    for (auto& s : slots_) out.push_back(fmt::format("ws://127.0.0.1:{}/", s.port));
    return out;
  }
  /// The URL provider i's claims sign: its proxy's with link faults, else its own.
  std::string endpoint(size_t i) const {
    return slots_[i].proxy_url.empty() ? fmt::format("ws://127.0.0.1:{}/", slots_[i].port)
                                       : slots_[i].proxy_url;
  }
  const std::string& name(size_t i) const { return slots_[i].spec.name; }
  std::vector<ProxyCounts> proxies() const {
    std::vector<ProxyCounts> out;
    for (auto& s : slots_)
      if (s.proxy) out.push_back(s.proxy->counts());
    return out;
  }
  size_t crashes() {
    std::lock_guard lock(mu_);
    return crashes_;
  }
  std::vector<BehaviourCounts> behaviours() {
    std::vector<BehaviourCounts> out;
    for (auto& s : slots_) {
      std::lock_guard lock(s.state->mu);
      out.push_back(s.state->counts);
    }
    return out;
  }

 private:
  struct Slot {
    ProviderSpec spec;
    KeyPair key;
    std::filesystem::path store, mirror_store;
    uint16_t port = 0;
    std::shared_ptr<BehaviourState> state;
    std::unique_ptr<nodes::ProviderNode> node;
    std::unique_ptr<FaultProxy> proxy;  // RunOptions::link_faults: the referee's way to the node
    std::string proxy_url;
  };

  void start(size_t i) {  // mu_ held
    Slot& s = slots_[i];
    ServerOptions server;
    // A node that sends oversized frames must be allowed to: the limit it tests is the referee's.
    if (s.spec.answers.kind == AnswerKind::Oversized) server.session.max_message_bytes = 2 * kMaxMessageBytes;
    const std::string tag = s.spec.name;
    const nodes::Logger log =
        options_.log ? nodes::line_logger(
                           tag, [this, tag](const std::string& line) { options_.log(tag + ": " + line); })
                     : nodes::quiet_logger(tag);
    nodes::ProviderConfig config;
    config.store = s.store;
    config.threads = options_.threads;
    config.device = s.spec.device;
    config.referees = {referee_};
    config.datasets = registry_;
    config.policy = cheats::fault_policy(s.spec.work);
    config.server = server;
    config.endpoint = s.proxy_url;  // empty without link faults: the node's own URL
    s.node = std::make_unique<nodes::ProviderNode>(ctx_, s.key, std::move(config), log);
    BehaviourSetup setup{s.key,
                         s.spec.answers,
                         s.spec.link,
                         s.spec.slowdown,
                         s.mirror_store,
                         options_.threads,
                         registry_,
                         [this, i](std::chrono::milliseconds down) {
                           std::lock_guard lock(mu_);
                           crashes_requested_.push_back({i, down});
                           cv_.notify_all();
                         }};
    s.node->reply_filter = make_reply_filter(setup, s.state);
    switch (s.spec.serve_logs) {
      case LogServing::Honest:
        break;
      case LogServing::Withheld:
        s.node->log_serving.alter = [](StepRoundingLog&) {
          throw ProtocolError("this trainer withholds its rounding logs");
        };
        break;
      case LogServing::AlteredThrowawayKey:
        s.node->log_serving.signer = generate_keypair();
        [[fallthrough]];
      case LogServing::Altered:
        s.node->log_serving.alter = flip_first_decision;
        break;
    }
    s.port = s.node->listen("127.0.0.1", s.port);
    if (s.proxy) s.proxy->set_upstream(fmt::format("ws://127.0.0.1:{}/", s.port));
  }

  void restart_loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !crashes_requested_.empty(); });
      if (stop_) return;
      const auto [i, down] = crashes_requested_.front();
      crashes_requested_.pop_front();
      if (options_.log)
        options_.log(fmt::format("{}: CRASH (down for {} ms)", slots_[i].spec.name, down.count()));
      std::unique_ptr<nodes::ProviderNode> dead = std::move(slots_[i].node);
      lock.unlock();
      dead.reset();  // joins its workers, closes its connections: everything in memory is lost
      std::this_thread::sleep_for(down);
      lock.lock();
      if (stop_) return;
      start(i);
      ++crashes_;
      if (options_.log) options_.log(fmt::format("{}: restarted from its store", slots_[i].spec.name));
    }
  }

  NetContext& ctx_;
  const RunOptions& options_;
  PublicKey referee_;      // the only referee its nodes answer
  DataRegistry registry_;  // the scenario's data sets and model files
  std::vector<Slot> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<size_t, std::chrono::milliseconds>> crashes_requested_;
  size_t crashes_ = 0;
  bool stop_ = false;
  std::thread restarter_;
};

// A scripted behaviour that never acted proves nothing: its scenario fails.
void check_acted(const Scenario& s, ScenarioResult& r) {
  for (size_t i = 0; i < s.providers.size() && i < r.behaviours.size(); ++i) {
    const ProviderSpec& p = s.providers[i];
    const BehaviourCounts& c = r.behaviours[i];
    if (p.answers.kind != AnswerKind::Honest && c.acts == 0)
      r.mismatches.push_back(
          fmt::format("provider {}: its answers behaviour '{}' never acted (round {} was never reached?)",
                      p.name, answer_kind_name(p.answers.kind), p.answers.round));
    if ((p.link.latency > std::chrono::milliseconds{0} || p.link.bytes_per_second != 0) &&
        c.link_delayed == 0)
      r.mismatches.push_back(
          fmt::format("provider {}: its link's latency or bandwidth never delayed a reply", p.name));
    if (p.slowdown > 1 && c.slowed == 0)
      r.mismatches.push_back(fmt::format("provider {}: its slowdown never held back a reply", p.name));
    if (p.link.drop_rate > 0 && c.link_dropped == 0)
      r.mismatches.push_back(fmt::format("provider {}: its lossy link never lost a reply", p.name));
  }
}

void compare(const Scenario& s, ScenarioResult& r) {
  const Expectation& e = s.expect;
  auto& m = r.mismatches;
  check_acted(s, r);
  const auto count = [&](const char* what, const std::optional<uint64_t>& want, uint64_t got) {
    if (want && *want != got) m.push_back(fmt::format("{}: expected {}, got {}", what, *want, got));
  };
  count("disputes", e.disputes, r.disputes);
  count("crashes", e.crashes, r.crashes);
  count("refused", e.refused, r.refused);
  count("reconnects", e.reconnects, r.reconnects);
  if (r.winner != e.winner) m.push_back(fmt::format("winner: expected {}, got {}", e.winner, r.winner));
  if (e.dispute && *e.dispute != (r.disputes > 0))
    m.push_back(fmt::format("dispute: expected {}, got {}", *e.dispute ? "one" : "none",
                            r.disputes ? "one" : "none"));
  const bool wants_verdict = e.reason || e.step || e.node || e.op;
  if (wants_verdict && !r.verdict) {
    m.push_back("expected a verdict, but no dispute was played");
    return;
  }
  if (!r.verdict) return;
  const Verdict& v = *r.verdict;
  if (e.reason && *e.reason != v.reason)
    m.push_back(fmt::format("reason: expected {}, got {}", reason_name(*e.reason), reason_name(v.reason)));
  if (e.step && *e.step != v.step) m.push_back(fmt::format("step: expected {}, got {}", *e.step, v.step));
  if (e.node && *e.node != v.node) m.push_back(fmt::format("node: expected {}, got {}", *e.node, v.node));
  const std::string op = located_op(v);
  if (e.op && *e.op != op) m.push_back(fmt::format("op: expected {}, got {}", *e.op, op));
}

}  // namespace

std::string located_op(const Verdict& v) {
  if (v.level != Level::Nodes || v.reason == VerdictReason::WrongPostState || v.op >= kOpKindCount)
    return "none";
  return op_name(static_cast<OpKind>(v.op));
}

// A stranger that opens idle connections from another loopback address (RunOptions::flood_connections)
// and holds them: the nodes' connection limits must keep the honest flow going.
class Flood {
 public:
  Flood(NetContext& ctx, const std::vector<std::string>& urls, size_t per_url)
      : client_(ctx, [] {
          ClientOptions o;
          o.local_address = "127.0.0.2";
          return o;
        }()) {
    for (const std::string& url : urls)
      for (size_t i = 0; i < per_url; ++i)
        client_.connect(url, [state = state_](std::shared_ptr<Session> s, const std::string&) {
          if (!s) return;
          std::lock_guard lock(state->mu);
          state->sessions.push_back(std::move(s));
        });
  }
  ~Flood() {
    std::lock_guard lock(state_->mu);
    for (auto& s : state_->sessions) s->close(CloseCode::GoingAway, "flood over");
  }
  size_t accepted() const {
    std::lock_guard lock(state_->mu);
    return state_->sessions.size();
  }

 private:
  struct State {
    mutable std::mutex mu;
    std::vector<std::shared_ptr<Session>> sessions;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
  Client client_;
};

// Busy threads beside the nodes for as long as the scenario runs ([load] cpu_hogs): a loaded machine.
class CpuHogs {
 public:
  explicit CpuHogs(int n) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this] {
        volatile uint64_t spin = 0;
        while (!stop_.load(std::memory_order_relaxed)) spin = spin + 1;
      });
  }
  ~CpuHogs() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

ScenarioResult run_scenario(const Scenario& s, const RunOptions& o) {
  ScenarioResult r;
  r.name = s.name;
  r.file = s.file;
  const auto t0 = std::chrono::steady_clock::now();
  const std::filesystem::path dir = o.work_dir / s.name;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  const nodes::LogFn log = o.log ? o.log : nodes::LogFn([](const std::string&) {});
  try {
    const CpuHogs hogs(s.cpu_hogs);
    NetContext ctx(2, false);
    nodes::RefereeNodeOptions ro;
    ro.data_dir = dir / "referee";  // the referee of a scenario is durable, as `tribunal referee` is
    ro.dispute.weights = s.registry;
    const KeyPair referee_key = generate_keypair();
    nodes::RefereeNode referee(
        ctx, referee_key, ro,
        nodes::line_logger("referee", [&](const std::string& line) { log("referee: " + line); }),
        nodes::loopback_policy());
    referee.on_finished = [&](const RefereeDispute& d, const nodes::DisputeStats& stats) {
      r.rounds = d.game().rounds();
      r.refused += stats.refused;
      r.reconnects += stats.reconnects;
    };
    const std::string referee_url = fmt::format("ws://127.0.0.1:{}/", referee.listen("127.0.0.1", 0));
    {
      ProviderFleet fleet(ctx, s, o, dir, referee_key.public_key);
      ctx.start();
      nodes::DelegateRequest request;
      // The job as the scenario plays it (with its [dispute] terms), next to the scenario's other files.
      request.job_file = dir / s.job.filename();
      // Behind its proxy a trainer signs the proxy's URL: the job names that endpoint as its trainer,
      // and the auditors fetch its logs through the proxy too.
      const bool named = s.roles && fleet.endpoint(0) != fleet.urls()[0];
      std::ofstream(request.job_file, std::ios::binary)
          << (named ? nodes::job_with_trainer(s.job_text, fleet.endpoint(0)) : s.job_text);
      request.providers = fleet.urls();
      request.referee = referee_url;
      std::vector<std::string> flooded = fleet.urls();
      flooded.push_back(referee_url);
      const Flood flood(ctx, flooded, o.flood_connections);
      if (o.flood_connections != 0) {
        // The stranger's connections are made (or refused) before the client comes.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (flood.accepted() < flooded.size() * o.flood_connections / 2 &&
               std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      request.referee_key = referee_key.public_key;
      request.datasets = s.registry;
      request.out_dir = dir / "verdicts";
      request.client_key = generate_keypair();
      request.roles = s.roles;
      const nodes::DelegateOutcome out = nodes::delegate_job(
          ctx, request, nodes::line_logger("delegate", [&](const std::string& line) { log(line); }));
      r.winner = out.accepted ? fleet.name(out.winner) : "none";
      r.disputes = out.verdicts.size();
      if (!out.verdicts.empty())
        r.verdict = verify_verdict(out.verdicts.back(), referee_key.public_key, &s.registry);
      r.crashes = fleet.crashes();
      r.behaviours = fleet.behaviours();
      r.proxies = fleet.proxies();
      r.flood_accepted = flood.accepted();
    }
    ctx.stop();
    ctx.join();
    compare(s, r);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.passed = r.error.empty() && r.mismatches.empty();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tribunal::scenarios
