#include <signal.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include "net/error.h"
#include "nodes/dispute_pages.h"
#include "nodes/http_routes.h"
#include "nodes/referee_node.h"
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

// "address:port" or "[v6]:port" → the address, for per-client limits.
std::string address_of(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  std::string host = colon == std::string::npos ? endpoint : endpoint.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// Reconnecting to a provider: first after 100 ms, doubling up to 1 s, until the dispute ends (its
// clock makes a provider that stays away forfeit). Short, because the party's clock runs meanwhile:
// a provider back from a dropped link waits at most 1 s for the referee.
constexpr std::chrono::milliseconds kFirstBackoff{100};
constexpr std::chrono::milliseconds kMaxBackoff{1000};
// Client connections from one address waiting for one dispute's verdict. Counted per address, so
// strangers who hold the opening cannot fill the waiting list and lock the real client out.
constexpr size_t kMaxWaitingPerAddress = 4;
// Bytes of one provider's frames that may wait for the dispute's strand before its reads pause.
constexpr size_t kMaxPendingBytes = size_t{4} << 20;

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

// What an opening is counted against: a trusted client's key, or the client's network.
std::string admission_group(bool trusted, const PublicKey& opener, const std::string& address) {
  if (trusted) return "client key " + to_hex(Digest(opener)).substr(0, 16);
  try {
    return client_network(address);
  } catch (const NetError&) {
    return address;  // not an IP address (never for a TCP peer): counted by itself
  }
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

// The referee's series in its MetricsRegistry (docs/running.md, "Monitoring").
struct RefereeNode::Meters {
  explicit Meters(MetricsRegistry& m)
      : opened(m.counter("tribunal_referee_disputes_opened_total", "Disputes admitted (new openings).")),
        refused(m.counter("tribunal_referee_disputes_refused_total",
                          "Openings refused: invalid, over the cost limits or the admission caps.")),
        suspended(m.counter("tribunal_referee_disputes_suspended_total",
                            "Disputes suspended by a store failure (kept in the store, resumable).")),
        rounds(m.histogram("tribunal_referee_dispute_rounds", "Question rounds of each decided dispute.",
                           {4, 8, 12, 16, 20, 24, 32, 48, 64, 96, 128})),
        cpu(m.histogram("tribunal_referee_dispute_cpu_seconds",
                        "CPU time the referee spent on each decided dispute (its worker threads).",
                        {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
        duration(m.histogram("tribunal_referee_dispute_seconds",
                             "Wall time from opening to verdict of each decided dispute.",
                             latency_buckets())),
        bytes_in(m.counter("tribunal_referee_bytes_received_total",
                           "Envelope bytes received from providers and clients by decided disputes.")),
        bytes_out(m.counter("tribunal_referee_bytes_sent_total",
                            "Envelope bytes sent to providers and clients by decided disputes.")),
        frames_refused(
            m.counter("tribunal_referee_frames_refused_total",
                      "Provider frames refused (undecodable, badly signed, stale, refused by the game) by "
                      "decided disputes.")),
        reconnects(m.counter("tribunal_referee_provider_reconnects_total",
                             "Provider connections re-established during disputes.")),
        answer_latency(
            m.histogram("tribunal_referee_answer_latency_seconds",
                        "From a question sent to a provider to the arrival of the first message of its "
                        "accepted answer.",
                        latency_buckets())),
        commit_latency(m.histogram(
            "tribunal_referee_store_commit_seconds",
            "Duration of each durable store commit (one dispute input, written ahead).", latency_buckets())) {
    for (const VerdictReason r :
         {VerdictReason::WrongOutput, VerdictReason::InconsistentInput, VerdictReason::BadProof,
          VerdictReason::Timeout, VerdictReason::Equivocation, VerdictReason::WrongInitialState,
          VerdictReason::WrongPostState, VerdictReason::RefereeFault, VerdictReason::BadRoundingLog,
          VerdictReason::BothValid})
      decided[r] = &m.counter("tribunal_referee_disputes_decided_total",
                              "Disputes decided, by the verdict's reason.", {{"reason", reason_name(r)}});
  }
  Counter& opened;
  Counter& refused;
  Counter& suspended;
  std::map<VerdictReason, Counter*> decided;
  Histogram& rounds;
  Histogram& cpu;
  Histogram& duration;
  Counter& bytes_in;
  Counter& bytes_out;
  Counter& frames_refused;
  Counter& reconnects;
  Histogram& answer_latency;
  Histogram& commit_latency;
};

struct RefereeNode::Live {
  explicit Live(asio::thread_pool& pool) : strand(asio::make_strand(pool)), timer(strand) {}
  // Everything that touches the dispute runs on its strand, one event at a time; `mu` guards what
  // attach() reads from other workers (clients, finished).
  asio::strand<asio::thread_pool::executor_type> strand;
  asio::steady_timer timer;  // armed at the dispute's next deadline or reconnection
  std::mutex mu;
  std::unique_ptr<RefereeDispute> dispute;
  std::string tag;                                    // short dispute id for logs
  std::string group;                                  // admission_group of its opener (per-client limit)
  bool trusted = false;                               // opened by a trusted client key (reserved slots)
  std::vector<std::shared_ptr<Session>> clients;      // waiting for the verdict
  std::array<std::shared_ptr<Session>, 2> providers;  // null while (re)connecting
  std::array<bool, 2> connecting{};
  std::array<std::optional<GameTime>, 2> retry_at{};  // when to reconnect, if scheduled
  std::array<std::chrono::milliseconds, 2> backoff{};
  std::array<bool, 2> connected_once{};  // a first connection was made (later ones are reconnects)
  DisputeStats stats;
  std::vector<DisputeEvent> events;  // its rounds as played (replayed when resumed): stored with the verdict
  std::array<std::optional<SteadyClock::time_point>, 2>
      asked{};  // a question to the party is unanswered since
  // Provider frames received (stamped) but not yet handled, per party, and their bytes: a timeout is
  // decided only once every frame that arrived before the deadline has been handled.
  std::mutex pending_mu;  // pending and pending_bytes: the network threads add, the strand removes
  std::array<size_t, 2> pending{};
  std::array<size_t, 2> pending_bytes{};
  // A question handed to the party's connection whose write has not completed: its clock has not
  // started, so no timeout is decided for the party until it has (or the connection is lost).
  std::array<bool, 2> writing{};
  std::weak_ptr<Live> self;  // for callbacks that come back to the strand
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  bool finished = false;  // decided (verdict sent) or dropped; no longer in live_
};

AddressPolicy loopback_policy() {
  return AddressPolicy::public_only({parse_cidr("127.0.0.0/8"), parse_cidr("::1")});
}

RefereeNode::RefereeNode(NetContext& ctx, KeyPair key, RefereeNodeOptions options, LogFn log,
                         AddressPolicy providers)
    : ctx_(ctx),
      key_(key),
      options_(std::move(options)),
      log_(std::move(log)),
      meters_(std::make_unique<Meters>(metrics_)),
      workers_(std::make_unique<Workers>(options_.workers)),
      store_(open_store(options_, key_)),
      pages_(store_ ? std::make_unique<DisputePages>(*store_, key_.public_key, log_, metrics_) : nullptr),
      policy_(std::move(providers)),
      opening_cpu_(options_.opening_cpu),
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
  add_server_metrics(metrics_, server_);
}

// /healthz, /metrics, and with a store /disputes (the most recent 200) and /disputes/<id> (the report
// of a decided dispute, from the store alone: nodes/dispute_pages.h), each request within its source's
// rate limit (options_.http_rate).
HttpHandler RefereeNode::http_handler() {
  return node_http_handler(
      metrics_,
      [this](const HttpRequest& r, const std::function<void(HttpResponse)>& respond) {
        if (pages_) return pages_->route(r, respond);
        if (r.target != "/disputes" && r.target.rfind("/disputes/", 0) != 0) return false;
        respond({404, "text/plain; charset=utf-8",
                 "this referee keeps no store (--data), so no dispute pages\n"});
        return true;
      },
      options_.http_rate);
}

uint16_t RefereeNode::listen_metrics(const std::string& host, uint16_t port) {
  metrics_server_ = listen_http(ctx_, http_handler(), host, port);
  return metrics_server_->port();
}

RefereeNode::~RefereeNode() {
  // The network is stopped by now (its owner stops the NetContext first); stop the workers, then
  // let the disputes (and their timers) go while the pool still exists.
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
    if (env.kind != MessageKind::DisputeOpen)
      throw WireError(CloseCode::PolicyViolation, "expected a DisputeOpen");
  } catch (const WireError& e) {  // not even a signed opening: no answer
    log_(fmt::format("referee: refused client {}: {}", client->remote_endpoint(), e.what()));
    meters_->refused.inc();
    client->close(e.code(), e.what());
    return;
  }
  const std::string group =
      admission_group(trusted(env.sender), env.sender, address_of(client->remote_endpoint()));
  const auto charge = [&] {
    const auto used = std::chrono::duration<double>(thread_cpu_seconds()) - c0;
    opening_cpu_.charge(group, std::chrono::duration_cast<std::chrono::nanoseconds>(used));
  };
  // A signed opening the referee refuses gets a signed refusal that says why.
  try {
    if (const auto wait = opening_cpu_.wait(group)) {
      const CpuBudgetOptions& b = opening_cpu_.options();
      throw ProtocolError(
          fmt::format("the openings from {} have used their CPU budget at this referee ({:.3g} CPU-s at "
                      "once, refilled at {:.3g} "
                      "CPU-s per second); retry in {:.3f} s",
                      group, std::chrono::duration<double>(b.burst).count(), b.refill_per_second,
                      std::chrono::duration<double>(*wait).count()));
    }
    open(client, env);
    charge();
  } catch (const std::exception& e) {
    charge();
    log_(fmt::format("referee: refused dispute from {}: {}", client->remote_endpoint(), e.what()));
    meters_->refused.inc();
    client->send(seal(key_, {}, 1, ErrorMessage{1008, e.what()}));
    client->close(CloseCode::PolicyViolation, "dispute refused");
  }
}

// Arms the dispute's one timer at its next event: the earliest deadline of a party it waits for, or
// the next reconnection. Called on the dispute's strand after every event.
void RefereeNode::arm(const std::shared_ptr<Live>& live) {
  if (live->finished) {
    live->timer.cancel();
    return;
  }
  // The next deadline or re-ask (RefereeDispute::next_wakeup), or the next reconnection.
  std::optional<GameTime> next = live->dispute->next_wakeup();
  const auto earliest = [&](GameTime t) { next = next ? std::min(*next, t) : t; };
  for (int p = 0; p < 2; ++p)
    if (const auto& retry = live->retry_at[static_cast<size_t>(p)]) earliest(*retry);
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
  {
    std::lock_guard pending_lock(live->pending_mu);
    for (int p = 0; p < 2; ++p)
      if (game.awaiting(p) && t > game.deadline(p) &&
          (live->pending[static_cast<size_t>(p)] != 0 || live->writing[static_cast<size_t>(p)]))
        return;
  }
  const double c0 = thread_cpu_seconds();
  try {
    auto out = live->dispute->on_tick(t);
    live->stats.cpu_seconds += thread_cpu_seconds() - c0;
    deliver(*live, std::move(out));
  } catch (const StoreError& e) {
    drop(*live, e.what());
    return;
  }
  finish_if_done(*live);
  if (!live->finished)
    for (int p = 0; p < 2; ++p) {
      const auto i = static_cast<size_t>(p);
      if (!live->providers[i] && !live->connecting[i] && live->retry_at[i] && t >= *live->retry_at[i])
        connect_provider(live, p);
    }
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
        log_(fmt::format("referee: cannot resume dispute {} from {}: {}", to_hex(stored.id).substr(0, 12),
                         store_->file().string(), e.what()));
      }
    }
    log_(fmt::format("referee: store {}: {} undecided dispute(s) resumed", store_->file().string(), resumed));
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
  RefereeDispute& d = *live->dispute;
  d.on_event = [this, l = live.get()](const DisputeEvent& e) {
    log_(fmt::format("referee: dispute {} round {}: {}", l->tag, e.round, e.text));
    l->events.push_back(e);  // on the dispute's strand, as every call into the dispute
    if (on_event) on_event(e);
  };
  // Write-ahead: the input is committed before the dispute hands out the messages it caused.
  d.on_input = [this, l = live.get()](const DisputeInput& input, const std::vector<uint8_t>* verdict) {
    commit(*l, input, verdict);
  };
  return live;
}

void RefereeNode::prune_store() {
  try {
    const size_t n = store_->prune(std::chrono::system_clock::now() - options_.retention);
    if (n != 0)
      log_(fmt::format(
          "referee: store {}: pruned the records of {} dispute(s) decided over {} s ago (verdicts kept)",
          store_->file().string(), n, options_.retention.count()));
  } catch (const StoreError& e) {
    log_(fmt::format("referee: {}", e.what()));  // the next interval tries again
  }
}

void RefereeNode::commit(Live& live, const DisputeInput& input, const std::vector<uint8_t>* verdict) {
  if (!store_) return;
  const RefereeDispute& d = *live.dispute;
  const auto t0 = SteadyClock::now();
  if (input.kind == DisputeInput::Kind::Open)
    store_->open_dispute(d.dispute_id(), input, live.group);
  else
    store_->append(d.dispute_id(), input, verdict, live.events);  // the rounds for its page, with the verdict
  meters_->commit_latency.observe(seconds_since(t0));
  const uint64_t n = ++events_;
  if (options_.crash_after_events != 0 && n == options_.crash_after_events) {
    // Test hook (RefereeNodeOptions::crash_after_events): die as a power cut or OOM kill would.
    log_(fmt::format("referee: crash hook: SIGKILL after event {}", n));
    ::raise(SIGKILL);
  }
}

bool RefereeNode::trusted(const PublicKey& client) const {
  return std::find(options_.trusted_clients.begin(), options_.trusted_clients.end(), client) !=
         options_.trusted_clients.end();
}

// Called with mu_ held. Fair admission: a global cap; a cap per client network (or trusted key); and
// slots that only trusted clients' openings may take, so strangers cannot fill the referee.
void RefereeNode::admit(const std::shared_ptr<Live>& shared) {
  const Live& live = *shared;
  if (live_.size() >= options_.max_live_disputes)
    throw ProtocolError(
        fmt::format("the referee holds {} live disputes, its limit; try again later", live_.size()));
  const size_t reserved = options_.trusted_clients.empty() ? 0 : options_.reserved_disputes;
  const size_t strangers = live_.size() - trusted_live_;
  if (!live.trusted && strangers + reserved >= options_.max_live_disputes)
    throw ProtocolError(
        fmt::format("the referee holds {} live disputes of clients it does not know, its limit for them "
                    "({} more are kept for its trusted clients); try again later",
                    strangers, reserved));
  const size_t mine = per_client_[live.group];
  if (mine >= options_.max_disputes_per_client)
    throw ProtocolError(fmt::format("{} has {} live disputes, the limit per client", live.group, mine));
  hold(shared);
}

// Called with mu_ held: counts the dispute as live (undone by release()).
void RefereeNode::hold(const std::shared_ptr<Live>& live) {
  ++per_client_[live->group];
  if (live->trusted) ++trusted_live_;
  live_[live->dispute->dispute_id()] = live;
}

// Called with mu_ held: undoes admit().
void RefereeNode::release(const Live& live) {
  live_.erase(live.dispute->dispute_id());
  if (--per_client_[live.group] == 0) per_client_.erase(live.group);
  if (live.trusted) --trusted_live_;
}

void RefereeNode::open(std::shared_ptr<Session> client, const Envelope& env) {
  const std::string address = address_of(client->remote_endpoint());
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
      return address_of(c->remote_endpoint()) == address;
    });
    if (static_cast<size_t>(same_address) >= kMaxWaitingPerAddress)
      throw ProtocolError(fmt::format("{} connections from {} already wait for this dispute's verdict",
                                      kMaxWaitingPerAddress, address));
    live->clients.push_back(client);
    log_(fmt::format("referee: dispute {}: client {} attached; it gets the verdict", live->tag,
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
  for (const std::string& url : dispute->providers()) {
    const WsUrl u = parse_ws_url(url);  // throws NetError
    // A literal address is judged now; a name when it resolves (net/address_policy.h).
    std::string refused;
    try {
      refused = policy_.refusal(u.host);
    } catch (const NetError&) {
    }
    if (!refused.empty())
      throw ProtocolError("a provider's endpoint " + url + " is a " + refused +
                          " address, which this referee does not connect to (--allow-network)");
  }
  const Digest id = dispute->dispute_id();
  if (store_) {
    if (auto verdict = store_->verdict(id)) {
      log_(fmt::format("referee: dispute {} is decided; sending its stored verdict to {}",
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

  const bool known = trusted(env.sender);
  auto live = make_live(std::move(dispute), admission_group(known, env.sender, address), known);
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
      deliver(*live, live->dispute->start(now()));  // commits the opening first
    } catch (const std::exception& e) {
      live->finished = true;
      {
        std::lock_guard node_lock(mu_);
        release(*live);
      }
      log_(fmt::format("referee: refused dispute from {}: {}", client->remote_endpoint(), e.what()));
      meters_->refused.inc();
      client->send(seal(key_, {}, 1, ErrorMessage{1011, e.what()}));
      client->close(CloseCode::InternalError, "dispute refused");
      return;
    }
    live->stats.cpu_seconds += checks + thread_cpu_seconds() - c1;
    opening_cpu_.charge(live->group, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::duration<double>(thread_cpu_seconds() - c1)));
    meters_->opened.inc();
    for (int p = 0; p < 2; ++p) connect_provider(live, p);
    arm(live);
  });
}

void RefereeNode::resume_stored(const StoredDispute& stored) {
  // The rounds played before the restart come back with the replay, so the verdict is stored with all of
  // them.
  std::vector<DisputeEvent> events;
  auto dispute = RefereeDispute::replay(key_, stored.inputs, options_.dispute,
                                        [&](const DisputeEvent& e) { events.push_back(e); });
  if (dispute->done()) throw ProtocolError("its record replays to a verdict the store does not hold");
  if (dispute->dispute_id() != stored.id) throw ProtocolError("its record replays to another dispute id");
  const PublicKey opener = open_envelope(stored.inputs.front().envelope).sender;
  auto live = make_live(std::move(dispute), stored.client, trusted(opener));
  live->events = std::move(events);
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
      deliver(*live, live->dispute->resume(now()));
    } catch (const StoreError& e) {
      drop(*live, e.what());
      return;
    }
    log_(fmt::format("referee: dispute {} resumed from the store ({} inputs, round {})", live->tag, inputs,
                     live->dispute->game().rounds()));
    for (int p = 0; p < 2; ++p) connect_provider(live, p);
    arm(live);
  });
}

// Called on the dispute's strand with live->mu held.
void RefereeNode::connect_provider(const std::shared_ptr<Live>& live, int party) {
  const auto i = static_cast<size_t>(party);
  live->connecting[i] = true;
  live->retry_at[i].reset();
  std::weak_ptr<Live> weak = live;
  client_.connect(live->dispute->providers()[i], [this, weak, party](std::shared_ptr<Session> s,
                                                                     const std::string& error) {
    auto live = weak.lock();
    if (!live) {
      if (s) s->close(CloseCode::Normal, "dispute over");
      return;
    }
    if (s) {
      // Installed now, on the network thread, so no message is missed; each only stamps its arrival
      // (the time its lateness is judged by) and hands it to the dispute's strand. Up to
      // kMaxPendingBytes wait there per party: a stream is stamped as it arrives even while the strand
      // is busy; beyond it the session's reads pause until the backlog is handled (TCP holds the
      // sender back), and no timeout is decided for the party meanwhile (on_timer).
      std::weak_ptr<Session> session = s;
      s->set_handlers({[this, weak, party, session](Session& current, std::vector<uint8_t> bytes) {
                         const auto received = SteadyClock::now();
                         const GameTime arrived =
                             std::chrono::time_point_cast<std::chrono::milliseconds>(received);
                         auto live = weak.lock();
                         auto self = session.lock();
                         if (!live || !self) return;
                         const size_t size = bytes.size();
                         {
                           std::lock_guard lock(live->pending_mu);
                           const auto i = static_cast<size_t>(party);
                           ++live->pending[i];
                           live->pending_bytes[i] += size;
                           if (live->pending_bytes[i] >= kMaxPendingBytes) current.set_reading(false);
                         }
                         asio::post(live->strand, [this, live, party, self, size, bytes = std::move(bytes),
                                                   arrived, received]() mutable {
                           {
                             std::lock_guard lock(live->pending_mu);
                             const auto i = static_cast<size_t>(party);
                             --live->pending[i];
                             live->pending_bytes[i] -= size;
                             if (live->pending_bytes[i] + size >= kMaxPendingBytes &&
                                 live->pending_bytes[i] < kMaxPendingBytes)
                               self->set_reading(true);
                           }
                           on_provider_message(live, party, self, std::move(bytes), arrived, received);
                         });
                       },
                       [this, weak, party, session](Session&, const CloseInfo& info) {
                         auto live = weak.lock();
                         if (!live) return;
                         asio::post(live->strand, [this, live, party, self = session.lock(), info] {
                           std::lock_guard lock(live->mu);
                           auto& current = live->providers[static_cast<size_t>(party)];
                           if (!current || current != self) return;
                           current.reset();
                           if (!live->finished)
                             provider_lost(*live, party, "connection lost: " + to_string(info));
                           arm(live);
                         });
                       }});
    }
    asio::post(live->strand, [this, live, party, s = std::move(s), error] {
      on_provider_connected(live, party, s, error);
    });
  });
}

// A connection to a provider was made or failed (on the dispute's strand).
void RefereeNode::on_provider_connected(const std::shared_ptr<Live>& live, int party,
                                        std::shared_ptr<Session> s, const std::string& error) {
  const auto i = static_cast<size_t>(party);
  std::lock_guard lock(live->mu);
  live->connecting[i] = false;
  if (live->finished) {
    if (s) s->close(CloseCode::Normal, "dispute over");
    return;
  }
  if (!s || !s->is_open()) {
    provider_lost(*live, party,
                  "cannot reach it at " + live->dispute->providers()[i] + ": " +
                      (s ? std::string("connection closed") : error));
    arm(live);
    return;
  }
  live->providers[i] = s;
  live->backoff[i] = std::chrono::milliseconds{0};
  if (live->connected_once[i]) ++live->stats.reconnects;
  live->connected_once[i] = true;
  // The DisputeOpen (the provider's new session learns the job) and the question it owes.
  deliver(*live, live->dispute->reconnect(party));
  live->asked[i] = SteadyClock::now();  // the question it owes, if any, restarts from now
  arm(live);
}

// A provider's message (on the dispute's strand), judged as of its arrival.
void RefereeNode::on_provider_message(const std::shared_ptr<Live>& live, int party,
                                      const std::shared_ptr<Session>& session, std::vector<uint8_t> bytes,
                                      GameTime arrived, std::chrono::steady_clock::time_point received) {
  std::lock_guard lock(live->mu);
  live->stats.bytes_in += bytes.size();
  if (live->finished || live->providers[static_cast<size_t>(party)] != session) return;
  const double c0 = thread_cpu_seconds();
  try {
    // An opened tensor chunk proves itself; its signature is checked only if it would be held against
    // the party (RefereeDispute::on_envelope).
    const Envelope env = open_envelope(bytes, SignatureCheck::DeferTensorChunks);
    std::string refused;
    auto out = live->dispute->on_envelope(party, env, arrived, &refused);
    if (!refused.empty())
      log_(fmt::format("referee: refused a message from provider {}: {}", party, refused));
    if (!refused.empty() || live->dispute->refused_last()) {
      ++live->stats.refused;
    } else if (auto& asked = live->asked[static_cast<size_t>(party)]) {
      meters_->answer_latency.observe(std::chrono::duration<double>(received - *asked).count());
      asked.reset();
    }
    deliver(*live, std::move(out));
  } catch (const WireError& e) {
    // Undecodable or badly signed: refused without touching the game.
    ++live->stats.refused;
    log_(fmt::format("referee: refused a frame from {}: {}", session->remote_endpoint(), e.what()));
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
  const auto i = static_cast<size_t>(party);
  live.backoff[i] = live.backoff[i] == std::chrono::milliseconds{0}
                        ? kFirstBackoff
                        : std::min(live.backoff[i] * 2, kMaxBackoff);
  live.retry_at[i] = now() + live.backoff[i];
  live.writing[i] = false;  // a question on the lost connection will not be written
  log_(fmt::format("referee: dispute {}: provider {} {}; reconnecting in {} ms", live.tag, party, why,
                   live.backoff[i].count()));
}

// Called with live.mu held. A provider that is not connected misses nothing: on (re)connection it
// gets the DisputeOpen and the question it still owes (RefereeDispute::reconnect).
void RefereeNode::deliver(Live& live, std::vector<RefereeDispute::Outgoing> out) {
  for (auto& o : out) {
    auto& s = live.providers[static_cast<size_t>(o.party)];
    if (!s) continue;
    live.stats.bytes_out += o.envelope.size();
    if (o.question == 0) {
      s->send(std::move(o.envelope));
      continue;
    }
    // A question's clock starts once it is written to the party's connection (docs/protocol.md,
    // "Clocks"): the referee's own queues and commits are not the party's time.
    auto written = [this, weak = live.self, party = o.party, question = o.question] {
      const GameTime at = now();
      auto l = weak.lock();
      if (!l) return;
      asio::post(l->strand, [this, l, party, question, at] {
        std::lock_guard lock(l->mu);
        if (l->finished) return;
        l->writing[static_cast<size_t>(party)] = false;
        try {
          l->dispute->on_written(party, question, at);
        } catch (const StoreError& e) {
          drop(*l, e.what());
          return;
        }
        arm(l);
      });
    };
    const bool queued = s->send_and_notify(std::move(o.envelope), std::move(written));
    live.writing[static_cast<size_t>(o.party)] = queued;
    if (queued) live.asked[static_cast<size_t>(o.party)] = SteadyClock::now();
  }
}

// Called with live.mu held.
void RefereeNode::finish_if_done(Live& live) {
  if (live.finished || !live.dispute->done()) return;
  live.finished = true;
  live.timer.cancel();
  live.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - live.started).count();
  live.stats.bytes_out += live.dispute->verdict_envelope().size() * live.clients.size();
  finished_metrics(live);
  // Reported before the clients get the verdict, so whoever waits for it sees the report done.
  if (on_finished) on_finished(*live.dispute, live.stats);
  for (auto& c : live.clients) {
    c->send(live.dispute->verdict_envelope());
    c->close(CloseCode::Normal, "verdict");
  }
  for (auto& s : live.providers)
    if (s) s->close(CloseCode::Normal, "verdict");
  std::lock_guard lock(mu_);
  release(live);
}

// Called with live.mu held: the store failed, so the dispute cannot go on (its next message would
// not be recorded). It stays in the store as it was; a client that opens it again resumes it there.
void RefereeNode::drop(Live& live, const std::string& why) {
  if (live.finished) return;
  live.finished = true;
  live.timer.cancel();
  meters_->suspended.inc();
  log_(fmt::format("referee: dispute {} suspended: {}", live.tag, why));
  // No ErrorMessage: a client that reconnects and opens the dispute again resumes it from the store.
  for (auto& c : live.clients) c->close(CloseCode::InternalError, "store failure");
  for (auto& s : live.providers)
    if (s) s->close(CloseCode::GoingAway, "dispute suspended");
  std::lock_guard lock(mu_);
  release(live);
}

// Called with live.mu held, once per decided dispute, before anyone gets its verdict (so a scrape after
// a client has its verdict counts it).
void RefereeNode::finished_metrics(const Live& live) {
  Meters& m = *meters_;
  const Verdict& v = live.dispute->verdict();
  if (auto it = m.decided.find(v.reason); it != m.decided.end()) it->second->inc();
  m.rounds.observe(static_cast<double>(live.dispute->game().rounds()));
  m.cpu.observe(live.stats.cpu_seconds);
  m.duration.observe(live.stats.seconds);
  m.bytes_in.inc(static_cast<double>(live.stats.bytes_in));
  m.bytes_out.inc(static_cast<double>(live.stats.bytes_out));
  m.frames_refused.inc(static_cast<double>(live.stats.refused));
  m.reconnects.inc(static_cast<double>(live.stats.reconnects));
}

}  // namespace tribunal::nodes
