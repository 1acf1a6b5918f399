#include <signal.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "net/error.h"
#include "nodes/dispute_pages.h"
#include "nodes/provider_link.h"
#include "nodes/referee_node.h"
#include "nodes/referee_routes.h"
#include "referee/report.h"

namespace tribunal::nodes {
namespace {

using SteadyClock = std::chrono::steady_clock;

GameTime now() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(SteadyClock::now());
}

double seconds_since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// CPU time of the calling thread, to charge each dispute only for its own handling.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The server must admit a client connection per live dispute.
ServerOptions server_options(const RefereeNodeOptions& o) {
  ServerOptions s;
  if (!o.tls.cert.empty() || !o.tls.key.empty()) s.tls = TlsContext::server(o.tls);
  s.max_connections = std::max(s.max_connections, o.max_live_disputes + 64);
  if (o.max_connections_per_address)
    s.max_connections_per_address = *o.max_connections_per_address;
  else if (s.max_connections_per_address != 0)
    s.max_connections_per_address = std::max(s.max_connections_per_address, o.max_disputes_per_client + 16);
  return s;
}

std::unique_ptr<RefereeStore> open_store(const RefereeNodeOptions& o, const KeyPair& key) {
  if (o.data_dir.empty()) return nullptr;
  return std::make_unique<RefereeStore>(o.data_dir, key.public_key);
}

}  // namespace

namespace asio = boost::asio;

// The pool that plays the disputes, off the network threads.
struct RefereeNode::Workers {
  explicit Workers(int n)
      : pool(static_cast<size_t>(n > 0 ? n : std::max(2u, std::thread::hardware_concurrency()))) {}
  asio::thread_pool pool;
  asio::steady_timer prune_timer{pool};
};

struct RefereeNode::Live {
  explicit Live(asio::thread_pool& pool) : strand(asio::make_strand(pool)), timer(strand) {}
  // Everything that touches the dispute runs on its strand, one event at a time; `mu` guards what
  // attach() reads from other workers (clients, finished).
  DisputeStrand strand;
  asio::steady_timer timer;  // armed at the dispute's next deadline or reconnection
  std::mutex mu;
  std::unique_ptr<RefereeDispute> dispute;
  std::string tag;                                     // short dispute id for logs
  std::string group;                                   // Admission::group of its opener (per-client limit)
  bool trusted = false;                                // opened by a trusted client key (reserved slots)
  std::vector<std::shared_ptr<Session>> clients;       // waiting for the verdict
  std::array<std::unique_ptr<ProviderLink>, 2> links;  // each party's connection (made by make_live)
  DisputeStats stats;
  // Events of Steps that committed nothing (refusals): stored with the next Step's inputs.
  std::vector<DisputeEvent> unstored;
  std::weak_ptr<Live> self;  // for callbacks that come back to the strand
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool finished = false;  // decided (verdict sent) or dropped; no longer in live_
  // The awaited party's deadline (GameTime milliseconds; 0: none awaited), set when the timer is
  // armed on the strand and read by a scrape (RefereeNode::clock_left).
  std::atomic<int64_t> deadline_ms{0};
  // Its reservation in the node's budget of opened bytes (RefereeNode::admit_opening): None until its
  // OpenInputs question is sent; Waiting while that question waits for room, held back in `held` with
  // no timer for the game (no clock runs: the question is not written); Reserved until the opening and
  // the re-execution are over.
  enum class Opening : uint8_t { None, Waiting, Reserved } opening = Opening::None;
  std::vector<RefereeDispute::Outgoing> held;
  // Where its game stands, for /disputes.json (RefereeNode::progress): set with deadline_ms.
  std::mutex progress_mu;
  DisputeProgress progress;

  ProviderLink& link(int party) { return *links[static_cast<size_t>(party)]; }
  // What its log lines are about (nodes/log.h: the JSON lines' dispute and job fields).
  LogKeys keys() const {
    if (!dispute) return {};
    return {to_hex(dispute->dispute_id()), to_hex(dispute->job_id())};
  }
};

AddressPolicy loopback_policy() {
  return AddressPolicy::public_only({parse_cidr("127.0.0.0/8"), parse_cidr("::1")});
}

RefereeNode::RefereeNode(NetContext& ctx, KeyPair key, RefereeNodeOptions options, Logger log,
                         AddressPolicy providers)
    : ctx_(ctx),
      key_(key),
      options_(std::move(options)),
      log_(std::move(log)),
      workers_(std::make_unique<Workers>(options_.workers)),
      store_(open_store(options_, key_)),
      pages_(store_ ? std::make_unique<DisputePages>(*store_, key_.public_key, log_, metrics_, PageLimits{},
                                                     options_.dispute.weights)
                    : nullptr),
      policy_(std::move(providers)),
      admission_([&] {
        AdmissionLimits a;
        a.max_live_disputes = options_.max_live_disputes;
        a.max_disputes_per_client = options_.max_disputes_per_client;
        a.trusted_clients = options_.trusted_clients;
        a.reserved_disputes = options_.reserved_disputes;
        a.opening_cpu = options_.opening_cpu;
        return a;
      }()),
      openings_(options_.opening_memory),
      server_(
          ctx,
          [this](std::shared_ptr<Session> s) {
            std::weak_ptr<Session> weak = s;
            s->set_handlers({[this, weak](Session&, std::vector<uint8_t> bytes) {
                               if (auto self = weak.lock()) on_client_message(self, std::move(bytes));
                             },
                             {}});
          },
          [&] {
            ServerOptions o = server_options(options_);
            o.http = http_handler();
            return o;
          }()),
      client_(ctx, [&] {
        ClientOptions o;
        o.address_policy = policy_;
        o.tls = TlsContext::client(options_.tls);
        return o;
      }()) {
  metrics_.gauge("tribunal_referee_disputes_open", "Undecided disputes held now.",
                 [this] { return static_cast<double>(live_disputes()); });
  // In the manner of Optimism's op-dispute-mon: how close the live disputes are to a party's clock
  // running out (docs/protocol.md, "Clocks"), from each dispute's armed deadline.
  metrics_.gauge(
      "tribunal_referee_disputes_near_clock_end",
      fmt::format("Undecided disputes whose awaited party has under {:g} seconds left on its clock.",
                  std::chrono::duration<double>(options_.near_clock_end).count()),
      [this] { return clock_left().first; });
  metrics_.gauge("tribunal_referee_dispute_clock_left_min_seconds",
                 "Least time left on an awaited party's clock among the undecided disputes (NaN when none "
                 "awaits an answer).",
                 [this] { return clock_left().second; });
  metrics_.gauge("tribunal_referee_opening_reserved_bytes",
                 "Opened bytes in flight reserved by the disputes now opening a node's inputs (bytes).",
                 [this] { return static_cast<double>(openings_.reserved()); });
  metrics_.gauge("tribunal_referee_openings_waiting",
                 "Disputes whose input opening waits for room in the opened-bytes budget (question unsent).",
                 [this] { return static_cast<double>(openings_.waiting()); });
  add_server_metrics(metrics_, server_);
  if (pages_) pages_->live_progress = [this](const Digest& id) { return progress(id); };
}

// /healthz, /metrics and the dispute pages (nodes/referee_routes.h), each request within its source's
// rate limit (options_.http_rate).
HttpHandler RefereeNode::http_handler() {
  return referee_http_handler(metrics_, pages_.get(), options_.http_rate);
}

uint16_t RefereeNode::listen_metrics(const std::string& host, uint16_t port) {
  metrics_server_ = listen_http(ctx_, http_handler(), host, port);
  return metrics_server_->port();
}

RefereeNode::~RefereeNode() {
  // The network is stopped by now (its owner stops the NetContext first). The pages go first: their
  // thread reads live_ (progress()). Then stop the workers, and let the disputes (and their timers) go
  // while the pool still exists.
  pages_.reset();
  workers_->pool.stop();
  workers_->pool.join();
  std::lock_guard lock(mu_);
  live_.clear();
}

// A client's message, on a network thread: the opening is checked and started on a worker.
void RefereeNode::on_client_message(const std::shared_ptr<Session>& client, std::vector<uint8_t> bytes) {
  // One message in flight per client connection: no further frame is read until this one is
  // handled, so a client sending faster than it is served is held back by TCP, not queued here.
  client->set_reading(false);
  asio::post(workers_->pool, [this, client, bytes = std::move(bytes)] {
    if (!client->is_open()) return;  // refused and closed meanwhile: its frames are dropped with it
    handle_opening(client, bytes);
    if (client->is_open()) client->set_reading(true);
  });
}

DisputeOptions RefereeNode::opening_options() const {
  DisputeOptions o = options_.dispute;
  o.limits = options_.limits;
  return o;
}

// A client's frame, on a worker: the opening's source must have CPU budget left; then every check
// of the opening, its cost first; what it took is charged to the source.
void RefereeNode::handle_opening(const std::shared_ptr<Session>& client, const std::vector<uint8_t>& bytes) {
  const auto c0 = std::chrono::duration<double>(thread_cpu_seconds());
  Envelope env;
  try {
    env = open_envelope(bytes);
    if (env.kind == MessageKind::RefereeCheck) {
      answer_check(client, env);
      return;
    }
    if (env.kind != MessageKind::DisputeOpen)
      throw WireError(CloseCode::PolicyViolation, "expected a DisputeOpen");
  } catch (const WireError& e) {  // not even a signed opening: no answer
    log_->warn(fmt::format("referee: refused client {}: {}", client->remote_endpoint(), e.what()));
    meters_.refused.inc();
    client->close(e.code(), e.what());
    return;
  }
  const std::string group = admission_.group(env.sender, source_address(client->remote_endpoint()));
  const auto charge = [&] {
    const auto used = std::chrono::duration<double>(thread_cpu_seconds()) - c0;
    admission_.charge(group, std::chrono::duration_cast<std::chrono::nanoseconds>(used), SteadyClock::now());
  };
  // A signed opening the referee refuses gets a signed refusal that says why.
  try {
    if (const AdmissionDecision d = admission_.budget(group, SteadyClock::now()); !d.admitted())
      throw ProtocolError(d.reason);
    open(client, env);
    charge();
  } catch (const std::exception& e) {
    charge();
    log_->warn(fmt::format("referee: refused dispute from {}: {}", client->remote_endpoint(), e.what()));
    meters_.refused.inc();
    client->send(seal(key_, {}, 1, ErrorMessage{1008, e.what()}));
    client->close(CloseCode::PolicyViolation, "dispute refused");
  }
}

// A RefereeCheck (docs/protocol.md, "Checking the referee"): signed proof of this referee's key
// under the client's nonce, and for each provider endpoint what an opening naming it would be told.
// Nothing is held; the answer costs one signature and a URL parse per endpoint.
void RefereeNode::answer_check(const std::shared_ptr<Session>& client, const Envelope& env) {
  const RefereeCheck& check = std::get<RefereeCheck>(env.body);
  if (check.nonce != env.context)
    throw WireError(CloseCode::PolicyViolation, "a RefereeCheck's nonce must be its envelope's context");
  RefereeAnswer answer{check.nonce, {}};
  for (const std::string& url : check.endpoints) {
    std::string refusal;
    try {
      refusal = provider_endpoints({url}, policy_).reason;
    } catch (const NetError& e) {
      refusal = e.what();
    }
    answer.refusals.push_back(refusal.substr(0, kMaxRefusalBytes));
  }
  client->send(seal(key_, check.nonce, 1, answer));
  client->close(CloseCode::Normal, "referee check answered");
}

// Arms the dispute's one timer at its next event: the earliest deadline of a party it waits for, or
// the next reconnection. Called on the dispute's strand after every event.
void RefereeNode::arm(const std::shared_ptr<Live>& live) {
  if (live->finished) {
    live->timer.cancel();
    return;
  }
  settle_opening(*live);
  // The next deadline or re-ask (RefereeDispute::next_wakeup, from Game::next_deadline), or the next
  // reconnection. A dispute whose opening waits for room has no deadline: its question is not written.
  std::optional<GameTime> next;
  if (live->opening != Live::Opening::Waiting) next = live->dispute->next_wakeup();
  live->deadline_ms = next ? next->time_since_epoch().count() : 0;  // for /metrics (clock_left)
  {
    const Game& game = live->dispute->game();
    std::lock_guard lock(live->progress_mu);  // for /disputes.json (progress)
    live->progress = {game.phase(), game.rounds(), game.range().first, game.range().second,
                      game.leaves_at_level()};
  }
  const auto earliest = [&](GameTime t) { next = next ? std::min(*next, t) : t; };
  for (int p = 0; p < 2; ++p)
    if (const auto& retry = live->link(p).retry_at()) earliest(*retry);
  if (!next) {
    live->timer.cancel();
    return;
  }
  live->timer.expires_at(*next);
  std::weak_ptr<Live> weak = live;
  live->timer.async_wait([this, weak](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled or re-armed
    if (auto l = weak.lock()) on_timer(l);
  });
}

// The dispute's timer fired (on its strand): deadlines, then due reconnections.
void RefereeNode::on_timer(const std::shared_ptr<Live>& live) {
  std::lock_guard lock(live->mu);
  if (live->finished) return;
  const GameTime t = now();
  // Frames of a party that arrived before its deadline may still wait for this strand (or, while its
  // reading is paused, in the socket): the timeout is decided once they are handled, never before
  // (docs/protocol.md, "Clocks"). Handling them re-arms the timer.
  const Game& game = live->dispute->game();
  for (int p = 0; p < 2; ++p)
    if (game.overdue(p, t) && live->link(p).holds_timeout()) return;
  const double c0 = thread_cpu_seconds();
  try {
    // While its opening waits for room the timer only reconnects: no clock runs (admit_opening).
    RefereeDispute::Step step;
    if (live->opening != Live::Opening::Waiting) step = live->dispute->on_tick(t);
    live->stats.cpu_seconds += thread_cpu_seconds() - c0;
    apply(*live, std::move(step));
  } catch (const StoreError& e) {
    drop(*live, e.what());
    return;
  }
  finish_if_done(*live);
  if (!live->finished)
    for (int p = 0; p < 2; ++p)
      if (live->link(p).due(t)) connect_provider(live, p);
  arm(live);
}

// Prunes the store every prune_interval, on a worker.
void RefereeNode::arm_pruning() {
  workers_->prune_timer.expires_after(options_.prune_interval);
  workers_->prune_timer.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    prune_store();
    arm_pruning();
  });
}

std::pair<double, double> RefereeNode::clock_left() {
  const int64_t now_ms = now().time_since_epoch().count();
  double near = 0, least = NAN;
  std::lock_guard lock(mu_);
  for (const auto& [id, live] : live_) {
    const int64_t deadline = live->deadline_ms.load();
    if (deadline == 0) continue;
    const int64_t left_ms = std::max<int64_t>(deadline - now_ms, 0);
    const double left = static_cast<double>(left_ms) / 1000;
    if (std::chrono::milliseconds(left_ms) < options_.near_clock_end) ++near;
    if (!(least <= left)) least = left;
  }
  return {near, least};
}

std::optional<DisputeProgress> RefereeNode::progress(const Digest& dispute) {
  std::shared_ptr<Live> live;
  {
    std::lock_guard lock(mu_);
    const auto it = live_.find(dispute);
    if (it == live_.end()) return std::nullopt;
    live = it->second;
  }
  std::lock_guard lock(live->progress_mu);
  if (live->progress.round == 0) return std::nullopt;  // not started yet
  return live->progress;
}

size_t RefereeNode::live_disputes() {
  std::lock_guard lock(mu_);
  return live_.size();
}

uint16_t RefereeNode::listen(const std::string& host, uint16_t port) {
  if (store_ && !resumed_) {
    resumed_ = true;
    // Every undecided dispute of the store, replayed and resumed before any client can connect. A
    // store that cannot be read throws (StoreError names the file); a dispute whose record no longer
    // replays is reported and left in the store.
    size_t resumed = 0;
    for (const StoredDispute& stored : store_->load_open()) {
      try {
        resume_stored(stored);
        ++resumed;
      } catch (const StoreError&) {
        throw;
      } catch (const std::exception& e) {
        const LogScope scope({to_hex(stored.id), ""});
        log_->error(fmt::format("referee: cannot resume dispute {} from {}: {}",
                                to_hex(stored.id).substr(0, 12), store_->file().string(), e.what()));
      }
    }
    log_->info(
        fmt::format("referee: store {}: {} undecided dispute(s) resumed", store_->file().string(), resumed));
    prune_store();
    arm_pruning();
  }
  return server_.listen(host, port);
}

std::shared_ptr<RefereeNode::Live> RefereeNode::make_live(std::unique_ptr<RefereeDispute> dispute,
                                                          std::string group, bool trusted) {
  auto live = std::make_shared<Live>(workers_->pool);
  live->self = live;
  live->dispute = std::move(dispute);
  live->group = std::move(group);
  live->trusted = trusted;
  live->tag = to_hex(live->dispute->dispute_id()).substr(0, 12);
  const std::weak_ptr<Live> weak = live;
  for (int p = 0; p < 2; ++p)
    live->links[static_cast<size_t>(p)] = std::make_unique<ProviderLink>(
        live->strand, std::weak_ptr<void>(live),
        ProviderLinkEvents{[this, weak, p](std::shared_ptr<Session> s, const std::string& error) {
                             if (auto l = weak.lock()) on_provider_connected(l, p, std::move(s), error);
                           },
                           [this, weak, p](const std::shared_ptr<Session>& s, std::vector<uint8_t> bytes,
                                           GameTime arrived, SteadyClock::time_point received) {
                             if (auto l = weak.lock())
                               on_provider_message(l, p, s, std::move(bytes), arrived, received);
                           },
                           [this, weak, p](const std::shared_ptr<Session>& s, const CloseInfo& info) {
                             if (auto l = weak.lock()) on_provider_closed(l, p, s, info);
                           }});
  return live;
}

void RefereeNode::prune_store() {
  try {
    const size_t n = store_->prune(std::chrono::system_clock::now() - options_.retention);
    if (n != 0)
      log_->info(fmt::format(
          "referee: store {}: pruned the records of {} dispute(s) decided over {} s ago (verdicts kept)",
          store_->file().string(), n, options_.retention.count()));
  } catch (const StoreError& e) {
    log_->error(fmt::format("referee: {}", e.what()));  // the next interval tries again
  }
}

// Called on the dispute's strand with live.mu held: what a RefereeDispute handler returned, in its
// order. Write-ahead: the Step's inputs are committed before any message it caused is sent; a commit
// that throws (StoreError) propagates, and nothing is sent. Then the messages, then the events.
// `caused_by`: the arrival of the provider frame the Step answers (for the handling latency).
void RefereeNode::apply(Live& live, RefereeDispute::Step step,
                        std::optional<SteadyClock::time_point> caused_by) {
  commit(live, step);
  deliver(live, std::move(step.send), caused_by);
  const LogScope scope(live.keys());
  for (const DisputeEvent& e : step.events) {
    log_->info(fmt::format("referee: dispute {} round {}: {}", live.tag, e.round, e.text));
    if (on_event) on_event(e);
  }
}

// Commits the Step's inputs, one transaction each; its events (and those of earlier Steps that
// committed nothing) go with its last input, the verdict too when it decided the dispute.
void RefereeNode::commit(Live& live, RefereeDispute::Step& step) {
  if (!store_) return;
  if (step.commit.empty()) {
    // A refusal changes nothing durable: its event waits for the next commit (at most
    // kMaxStoredEvents of them, the latest in the last place, as the store keeps them).
    for (const DisputeEvent& e : step.events)
      if (live.unstored.size() < kMaxStoredEvents)
        live.unstored.push_back(e);
      else
        live.unstored.back() = e;
    return;
  }
  const Digest& id = live.dispute->dispute_id();
  live.unstored.insert(live.unstored.end(), step.events.begin(), step.events.end());
  for (size_t i = 0; i < step.commit.size(); ++i) {
    const DisputeInput& input = step.commit[i];
    const bool last = i + 1 == step.commit.size();
    const std::span<const DisputeEvent> events =
        last ? std::span(live.unstored) : std::span<const DisputeEvent>{};
    const auto t0 = SteadyClock::now();
    if (input.kind == DisputeInput::Kind::Open)
      store_->open_dispute(id, input, live.group, events);
    else
      store_->append(id, input, last && step.verdict ? &*step.verdict : nullptr, events);
    meters_.commit_latency.observe(seconds_since(t0));
    if (last) live.unstored.clear();
    const uint64_t n = ++events_;
    if (options_.crash_after_events != 0 && n == options_.crash_after_events) {
      // Test hook (RefereeNodeOptions::crash_after_events): die as a power cut or OOM kill would.
      log_->warn(fmt::format("referee: crash hook: SIGKILL after event {}", n));
      ::raise(SIGKILL);
    }
  }
}

// Called with mu_ held: the caps (Admission::admit), then held.
void RefereeNode::admit(const std::shared_ptr<Live>& live) {
  if (const AdmissionDecision d = admission_.admit(live->group, live->trusted); !d.admitted())
    throw ProtocolError(d.reason);
  hold(live);
}

// Called with mu_ held: counts the dispute as live (undone by release()).
void RefereeNode::hold(const std::shared_ptr<Live>& live) {
  admission_.hold(live->group, live->trusted);
  live_[live->dispute->dispute_id()] = live;
}

// Called with mu_ held: undoes hold().
void RefereeNode::release(const Live& live) {
  live_.erase(live.dispute->dispute_id());
  admission_.release(live.group, live.trusted);
}

void RefereeNode::open(std::shared_ptr<Session> client, const Envelope& env) {
  const std::string address = source_address(client->remote_endpoint());
  const auto attach = [&](const std::shared_ptr<Live>& live) {
    std::lock_guard lock(live->mu);
    if (live->finished) {
      if (!live->dispute->done())
        throw ProtocolError("the dispute was suspended by a store failure; open it again");
      client->send(live->dispute->verdict_envelope());
      client->close(CloseCode::Normal, "verdict");
      return;
    }
    std::erase_if(live->clients, [](const std::shared_ptr<Session>& c) { return !c->is_open(); });
    if (std::find(live->clients.begin(), live->clients.end(), client) != live->clients.end()) return;
    const auto same_address = std::count_if(live->clients.begin(), live->clients.end(), [&](const auto& c) {
      return source_address(c->remote_endpoint()) == address;
    });
    if (const AdmissionDecision d = admission_.attach(address, static_cast<size_t>(same_address));
        !d.admitted())
      throw ProtocolError(d.reason);
    live->clients.push_back(client);
    const LogScope scope(live->keys());
    log_->info(fmt::format("referee: dispute {}: client {} attached; it gets the verdict", live->tag,
                           client->remote_endpoint()));
  };

  std::shared_ptr<Live> existing;
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(env.context); it != live_.end()) existing = it->second;
  }
  if (existing) {
    // The same opening again (a client that reconnected) attaches at once; a different envelope
    // for the same dispute (another client) must be a valid opening of it.
    if (existing->dispute->open_envelope_bytes() != env.bytes)
      RefereeDispute check(key_, env, opening_options());
    attach(existing);
    return;
  }

  const double c0 = thread_cpu_seconds();
  // Every check of the opening; its cost, derived from the job text, first (options_.limits).
  auto dispute = std::make_unique<RefereeDispute>(key_, env, opening_options());
  if (const AdmissionDecision d = provider_endpoints(dispute->providers(), policy_); !d.admitted())
    throw ProtocolError(d.reason);
  const Digest id = dispute->dispute_id();
  if (store_) {
    if (auto verdict = store_->verdict(id)) {
      const LogScope scope({to_hex(id), to_hex(dispute->job_id())});
      log_->info(fmt::format("referee: dispute {} is decided; sending its stored verdict to {}",
                             to_hex(id).substr(0, 12), client->remote_endpoint()));
      client->send(std::move(*verdict));
      client->close(CloseCode::Normal, "verdict");
      return;
    }
    if (auto stored = store_->load(id)) {  // recorded but not held (suspended by a store failure)
      resume_stored(*stored);
      std::lock_guard lock(mu_);
      if (auto it = live_.find(id); it != live_.end()) existing = it->second;
    }
    if (existing) {
      attach(existing);
      return;
    }
  }

  const bool known = admission_.trusted(env.sender);
  auto live = make_live(std::move(dispute), admission_.group(env.sender, address), known);
  {
    std::lock_guard lock(mu_);
    if (auto it = live_.find(id); it != live_.end())
      existing = it->second;  // opened concurrently
    else
      admit(live);
  }
  if (existing) {
    attach(existing);
    return;
  }
  const double checks = thread_cpu_seconds() - c0;
  // Started on its strand, where everything else of the dispute will run.
  asio::post(live->strand, [this, live, client, checks, bytes = env.bytes.size()] {
    std::lock_guard lock(live->mu);
    live->clients.push_back(client);
    live->stats.bytes_in += bytes;
    const double c1 = thread_cpu_seconds();
    try {
      apply(*live, live->dispute->start(now()));  // commits the opening first
    } catch (const std::exception& e) {
      live->finished = true;
      {
        std::lock_guard node_lock(mu_);
        release(*live);
      }
      log_->warn(fmt::format("referee: refused dispute from {}: {}", client->remote_endpoint(), e.what()));
      meters_.refused.inc();
      client->send(seal(key_, {}, 1, ErrorMessage{1011, e.what()}));
      client->close(CloseCode::InternalError, "dispute refused");
      return;
    }
    live->stats.cpu_seconds += checks + thread_cpu_seconds() - c1;
    admission_.charge(live->group,
                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::duration<double>(thread_cpu_seconds() - c1)),
                      SteadyClock::now());
    meters_.opened.inc();
    for (int p = 0; p < 2; ++p) connect_provider(live, p);
    arm(live);
  });
}

void RefereeNode::resume_stored(const StoredDispute& stored) {
  // The rounds played before the restart are in the store. A dispute of an older store that has
  // none (StoredDispute::events) gets them back from the replay, stored before it goes on.
  std::vector<DisputeEvent> replayed;
  auto dispute =
      RefereeDispute::replay(key_, stored.inputs, options_.dispute, stored.events ? nullptr : &replayed);
  if (dispute->done()) throw ProtocolError("its record replays to a verdict the store does not hold");
  if (dispute->dispute_id() != stored.id) throw ProtocolError("its record replays to another dispute id");
  if (!stored.events) store_->restore_events(stored.id, replayed);
  const bool trusted = admission_.trusted(dispute->opener());
  auto live = make_live(std::move(dispute), stored.client, trusted);
  {
    // A stored dispute was admitted when it was opened: it is held again whatever the caps are now.
    std::lock_guard lock(mu_);
    if (live_.count(stored.id)) return;
    hold(live);
  }
  asio::post(live->strand, [this, live, inputs = stored.inputs.size()] {
    std::lock_guard lock(live->mu);
    try {
      // Fresh sequence numbers and restarted clocks for the open questions; committed before they are sent.
      apply(*live, live->dispute->resume(now()));
    } catch (const StoreError& e) {
      drop(*live, e.what());
      return;
    }
    const LogScope scope(live->keys());
    log_->info(fmt::format("referee: dispute {} resumed from the store ({} inputs, round {})", live->tag,
                           inputs, live->dispute->game().rounds()));
    for (int p = 0; p < 2; ++p) connect_provider(live, p);
    arm(live);
  });
}

// Called on the dispute's strand with live->mu held.
void RefereeNode::connect_provider(const std::shared_ptr<Live>& live, int party) {
  live->link(party).connect(client_, live->dispute->providers()[static_cast<size_t>(party)]);
}

// A connection to a provider was made or failed (on the dispute's strand).
void RefereeNode::on_provider_connected(const std::shared_ptr<Live>& live, int party,
                                        std::shared_ptr<Session> s, const std::string& error) {
  std::lock_guard lock(live->mu);
  ProviderLink& link = live->link(party);
  link.attempt_ended();
  if (live->finished) {
    if (s) s->close(CloseCode::Normal, "dispute over");
    return;
  }
  if (!s || !s->is_open()) {
    provider_lost(*live, party,
                  "cannot reach it at " + live->dispute->providers()[static_cast<size_t>(party)] + ": " +
                      (s ? std::string("connection closed") : error));
    arm(live);
    return;
  }
  if (link.established(s)) ++live->stats.reconnects;
  // The DisputeOpen (the provider's new session learns the job) and the question it owes.
  deliver(*live, live->dispute->reconnect(party));
  link.restart_answer_clock();  // the question it owes, if any, restarts from now
  arm(live);
}

// A provider's connection ended (on the dispute's strand): reconnect unless it was an older one.
void RefereeNode::on_provider_closed(const std::shared_ptr<Live>& live, int party,
                                     const std::shared_ptr<Session>& s, const CloseInfo& info) {
  std::lock_guard lock(live->mu);
  if (!live->link(party).closed(s)) return;
  if (!live->finished) provider_lost(*live, party, "connection lost: " + to_string(info));
  arm(live);
}

// A provider's message (on the dispute's strand), judged as of its arrival.
void RefereeNode::on_provider_message(const std::shared_ptr<Live>& live, int party,
                                      const std::shared_ptr<Session>& session, std::vector<uint8_t> bytes,
                                      GameTime arrived, std::chrono::steady_clock::time_point received) {
  std::lock_guard lock(live->mu);
  live->stats.bytes_in += bytes.size();
  if (live->finished || live->link(party).session() != session) return;
  const LogScope scope(live->keys());
  const double c0 = thread_cpu_seconds();
  try {
    // An opened tensor chunk proves itself; its signature is checked only if it would be held against
    // the party (RefereeDispute::on_envelope).
    // The envelope is opened here, once, and the dispute takes it as it is: the frame itself becomes
    // the envelope's bytes, and those the recorded input's, never copied.
    RefereeDispute::Step step = live->dispute->on_envelope(
        party, open_envelope(std::move(bytes), SignatureCheck::DeferTensorChunks), arrived);
    if (!step.refused.empty())
      log_->warn(fmt::format("referee: refused a message from provider {}: {}", party, step.refused));
    if (!step.refused.empty() || step.rejected) {
      ++live->stats.refused;
    } else if (const auto asked = live->link(party).answered()) {
      meters_.answer_latency.observe(std::chrono::duration<double>(received - *asked).count());
    }
    apply(*live, std::move(step), received);
  } catch (const WireError& e) {
    // Undecodable or badly signed: refused without touching the game.
    ++live->stats.refused;
    log_->warn(fmt::format("referee: refused a frame from {}: {}", session->remote_endpoint(), e.what()));
  } catch (const StoreError& e) {
    drop(*live, e.what());
    return;
  }
  live->stats.cpu_seconds += thread_cpu_seconds() - c0;
  finish_if_done(*live);
  arm(live);
}

// Called with live.mu held.
void RefereeNode::provider_lost(Live& live, int party, const std::string& why) {
  const std::chrono::milliseconds backoff = live.link(party).lost(now());
  const LogScope scope(live.keys());
  log_->warn(fmt::format("referee: dispute {}: provider {} {}; reconnecting in {} ms", live.tag, party, why,
                         backoff.count()));
}

// Called with live.mu held. A provider that is not connected misses nothing: on (re)connection it
// gets the DisputeOpen and the question it still owes (RefereeDispute::reconnect). A question caused
// by a provider frame that arrived at `caused_by` adds the time to its write to handling_latency.
void RefereeNode::deliver(Live& live, std::vector<RefereeDispute::Outgoing> out,
                          std::optional<SteadyClock::time_point> caused_by) {
  for (auto& o : out) {
    if (o.opening_bytes > 0 && !admit_opening(live, o))
      continue;  // held until the node has room for the opening
    ProviderLink& link = live.link(o.party);
    if (!link.session()) continue;
    live.stats.bytes_out += o.envelope.size();
    if (o.question == 0) {
      link.send(std::move(o.envelope));
      continue;
    }
    // A question's clock starts once it is written to the party's connection (docs/protocol.md,
    // "Clocks"): the referee's own queues and commits are not the party's time.
    auto written = [this, weak = live.self, party = o.party, question = o.question, caused_by] {
      const GameTime at = now();
      if (caused_by) meters_.handling_latency.observe(seconds_since(*caused_by));
      auto l = weak.lock();
      if (!l) return;
      asio::post(l->strand, [this, l, party, question, at] {
        std::lock_guard lock(l->mu);
        if (l->finished) return;
        l->link(party).written();
        try {
          apply(*l, l->dispute->on_written(party, question, at));
        } catch (const StoreError& e) {
          drop(*l, e.what());
          return;
        }
        arm(l);
      });
    };
    link.ask(std::move(o.envelope), std::move(written));
  }
}

// Called with live.mu held: whether the OpenInputs question `o` may be written now. The dispute's first
// one reserves the opening's bytes for both parties' streams (nodes/opening_budget.h); while there is no
// room, it and any later copy for the same party (a reconnection's) wait in live.held, and the budget's
// grant sends them from the dispute's strand. A question's clock starts at its write (docs/protocol.md,
// "Clocks") and arm() sets no deadline meanwhile, so the wait is no party's time.
bool RefereeNode::admit_opening(Live& live, RefereeDispute::Outgoing& o) {
  using Opening = Live::Opening;
  if (live.opening == Opening::Reserved) return true;
  if (live.opening == Opening::None) {
    const auto granted = [this, weak = live.self] {
      auto l = weak.lock();
      if (!l) return;
      asio::post(l->strand, [this, l] {
        std::lock_guard lock(l->mu);
        if (l->finished || l->opening != Opening::Waiting) return;  // settle_opening gave it back
        l->opening = Opening::Reserved;
        deliver(*l, std::exchange(l->held, {}));
        arm(l);
      });
    };
    if (openings_.reserve(&live, 2 * o.opening_bytes, granted)) {
      live.opening = Opening::Reserved;
      return true;
    }
    live.opening = Opening::Waiting;
  }
  std::erase_if(live.held, [&](const RefereeDispute::Outgoing& h) { return h.party == o.party; });
  live.held.push_back(std::move(o));
  return false;
}

// Called with live.mu held: gives back the dispute's opening reservation (or its place in the queue)
// once it is decided or past its opening and re-execution.
void RefereeNode::settle_opening(Live& live) {
  if (live.opening == Live::Opening::None) return;
  const Phase phase = live.dispute->game().phase();
  if (!live.finished && (phase == Phase::OpenInputs || phase == Phase::OpenLog || phase == Phase::Reexecute))
    return;
  live.opening = Live::Opening::None;
  live.held.clear();
  openings_.release(&live);
}

// Called with live.mu held.
void RefereeNode::finish_if_done(Live& live) {
  if (live.finished || !live.dispute->done()) return;
  live.finished = true;
  settle_opening(live);
  live.timer.cancel();
  live.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - live.started).count();
  live.stats.bytes_out += live.dispute->verdict_envelope().size() * live.clients.size();
  meters_.decided(*live.dispute, live.stats);
  // No longer live (/metrics, admission) and reported before the clients get the verdict, so whoever
  // waits for it sees both done. The caller holds `live` alive.
  {
    std::lock_guard lock(mu_);
    release(live);
  }
  if (on_finished) on_finished(*live.dispute, live.stats);
  for (auto& c : live.clients) {
    c->send(live.dispute->verdict_envelope());
    c->close(CloseCode::Normal, "verdict");
  }
  for (auto& link : live.links) link->close(CloseCode::Normal, "verdict");
}

// Called with live.mu held: the store failed, so the dispute cannot go on (its next message would
// not be recorded). It stays in the store as it was; a client that opens it again resumes it there.
void RefereeNode::drop(Live& live, const std::string& why) {
  if (live.finished) return;
  live.finished = true;
  settle_opening(live);
  live.timer.cancel();
  meters_.suspended.inc();
  const LogScope scope(live.keys());
  log_->error(fmt::format("referee: dispute {} suspended: {}", live.tag, why));
  // No ErrorMessage: a client that reconnects and opens the dispute again resumes it from the store.
  for (auto& c : live.clients) c->close(CloseCode::InternalError, "store failure");
  for (auto& link : live.links) link->close(CloseCode::GoingAway, "dispute suspended");
  std::lock_guard lock(mu_);
  release(live);
}

}  // namespace tribunal::nodes
