#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "nodes/provider_node.h"
#include "nodes/http_routes.h"
#include "nodes/train_set.h"
#include "nodes/training_ranks.h"
#include "engine/error.h"
#include "engine/provider_session.h"
#include "net/error.h"

namespace tribunal::nodes {
ServerOptions provider_server_options() {
  ServerOptions o;
  o.max_connections_per_address = o.max_connections;
  return o;
}


namespace {

// Work on the provider's own files (data sets, checkpoints): their errors name local paths, so a peer
// is told only what failed; the operator's log gets the details.
class LocalFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
template <class F>
auto locally(const LogFn& log, const char* what, F&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const ProtocolError&) {
    throw;
  } catch (const std::exception& e) {
    log(fmt::format("provider: {} failed: {}", what, e.what()));
    throw LocalFailure(std::string(what) + " failed on the provider (details in its operator's log)");
  }
}

}  // namespace

// Messages queued for a connection's worker before its session stops reading (each ≤ 1 MiB).
constexpr size_t kInboxHigh = 8;
// Disputes whose recomputed state is kept after their connection ends (the least recently used
// beyond it are forgotten; one that a connection still uses lives on until it ends).
constexpr size_t kRetainedDisputes = 16;

// One dispute this provider answers for one referee: the data, the pool and the responder's caches
// (the interval's state hashes, the located step's trace) outlive any one connection.
struct ProviderNode::Dispute {
  std::mutex mu;  // one query at a time, whichever connection it came on
  std::unique_ptr<ThreadPool> pool;
  std::shared_ptr<const Dataset> data;
  std::unique_ptr<ProviderDisputeSession> session;
  std::chrono::steady_clock::time_point used;
};

// The provider's series in its MetricsRegistry (docs/running.md, "Monitoring").
struct ProviderNode::Meters {
  explicit Meters(MetricsRegistry& m)
      : claims(m.counter("tribunal_provider_jobs_total", "Submitted jobs, by outcome.", {{"outcome", "claimed"}})),
        jobs_refused(m.counter("tribunal_provider_jobs_total", "Submitted jobs, by outcome.", {{"outcome", "refused"}})),
        training(m.histogram("tribunal_provider_training_seconds", "Wall time of each job trained to its claim.",
                             {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600})),
        queries(m.counter("tribunal_provider_queries_total", "Referee queries answered.")),
        answer_latency(m.histogram("tribunal_provider_answer_seconds",
                                   "From a query taken up to its answer computed (recomputing an interval or a "
                                   "step included).",
                                   latency_buckets())),
        answer_bytes(m.counter("tribunal_provider_answer_bytes_total", "Envelope bytes of the answers sent.")),
        frames_refused(m.counter("tribunal_provider_frames_refused_total",
                                 "Frames refused: undecodable, badly signed, untrusted referee, out of order.")),
        errors(m.counter("tribunal_provider_errors_total", "Messages answered with an ErrorMessage (refused jobs "
                                                           "and failed answers).")) {}
  Counter& claims;
  Counter& jobs_refused;
  Histogram& training;
  Counter& queries;
  Histogram& answer_latency;
  Counter& answer_bytes;
  Counter& frames_refused;
  Counter& errors;
};

// One connection: its messages are handled in order on a worker thread of their own, since
// training and recomputing intervals take seconds and must not block the I/O thread.
struct ProviderNode::Connection {
  std::shared_ptr<Session> session;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<uint8_t>> inbox;
  bool closed = false;
  bool finished = false;  // the worker has returned
  uint64_t sequence = 0;
  // Dispute state: the DisputeOpen once it arrived (and its job), the session once a trusted
  // referee's first query came (nothing is loaded or computed for anyone else).
  std::optional<Envelope> open;
  JobSpec job;
  std::shared_ptr<ProviderNode::Dispute> dispute;
};

ProviderNode::ProviderNode(NetContext& ctx, KeyPair key, ProviderConfig config, LogFn log)
    : ctx_(ctx),
      key_(key),
      config_(std::move(config)),
      log_(std::move(log)),
      meters_(std::make_unique<Meters>(metrics_)),
      server_(ctx, [this](std::shared_ptr<Session> s) {
        auto c = std::make_shared<Connection>();
        c->session = s;
        s->set_handlers({[c](Session& session, std::vector<uint8_t> bytes) {
                           std::lock_guard lock(c->mu);
                           c->inbox.push_back(std::move(bytes));
                           // A peer that sends faster than the worker serves is held back by TCP.
                           if (c->inbox.size() >= kInboxHigh) session.set_reading(false);
                           c->cv.notify_one();
                         },
                         [c](Session&, const CloseInfo&) {
                           std::lock_guard lock(c->mu);
                           c->closed = true;
                           c->cv.notify_one();
                         }});
        std::lock_guard lock(mu_);
        // Reap the workers of connections that have ended, so a long-running node keeps no dead threads.
        std::erase_if(workers_, [](Worker& w) {
          std::lock_guard clock(w.connection->mu);
          if (!w.connection->finished) return false;
          w.thread.join();
          return true;
        });
        workers_.push_back({std::thread([this, c] {
                              for (;;) {
                                std::vector<uint8_t> bytes;
                                {
                                  std::unique_lock lock(c->mu);
                                  c->cv.wait(lock, [&] { return c->closed || !c->inbox.empty(); });
                                  if (c->inbox.empty()) break;
                                  bytes = std::move(c->inbox.front());
                                  c->inbox.pop_front();
                                  if (c->inbox.size() + 1 == kInboxHigh / 2 && c->session) c->session->set_reading(true);
                                }
                                on_message(c, std::move(bytes));
                              }
                              std::lock_guard lock(c->mu);
                              c->session.reset();
                              c->finished = true;
                            }),
                            c});
      }, [&] {
        ServerOptions o = config_.server;
        o.http = node_http_handler(metrics_);
        if (!config_.tls.cert.empty() || !config_.tls.key.empty()) o.tls = TlsContext::server(config_.tls);
        return o;
      }()) {
  metrics_.gauge("tribunal_provider_disputes_open", "Disputes whose recomputed state the provider keeps now.", [this] {
    std::lock_guard lock(mu_);
    return static_cast<double>(disputes_.size());
  });
  metrics_.gauge("tribunal_provider_step_seconds", "Seconds per training step of the last job trained.",
                 [this] { return last_step_seconds_.load(); });
  add_server_metrics(metrics_, server_);
}

uint16_t ProviderNode::listen_metrics(const std::string& host, uint16_t port) {
  metrics_server_ = listen_http(ctx_, node_http_handler(metrics_), host, port);
  return metrics_server_->port();
}

ProviderNode::~ProviderNode() {
  server_.stop();
  std::vector<Worker> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  // The I/O may already be stopped, so no on_close will come: end the workers ourselves.
  for (Worker& w : workers) {
    {
      std::lock_guard lock(w.connection->mu);
      w.connection->closed = true;
      w.connection->inbox.clear();
      if (w.connection->session) w.connection->session->close(CloseCode::GoingAway, "provider stopping");
    }
    w.connection->cv.notify_one();
    w.thread.join();
  }
}

uint16_t ProviderNode::listen(const std::string& host, uint16_t port) {
  if (config_.endpoint.empty() && (host == "0.0.0.0" || host == "::" || host.empty()))
    throw NetError("provider: listening on '" + host + "' needs the URL referees reach it at (--advertise ws://HOST:PORT/)");
  const uint16_t bound = server_.listen(host, port);
  const char* scheme = config_.tls.cert.empty() ? "ws" : "wss";
  if (config_.endpoint.empty())
    config_.endpoint = host.find(':') != std::string::npos ? fmt::format("{}://[{}]:{}/", scheme, host, bound)
                                                           : fmt::format("{}://{}:{}/", scheme, host, bound);
  return bound;
}

// A JobSubmit: checked against the operator's policy before any data is loaded, then trained.
void ProviderNode::train(Connection& c, const Envelope& env) {
  const std::string me = to_hex(key_.public_key).substr(0, 8);
  const auto& clients = config_.clients;
  if (!clients.empty() && std::find(clients.begin(), clients.end(), env.sender) == clients.end())
    throw ProtocolError("this provider does not train jobs for the client key that signed the JobSubmit");
  JobSpec job = parse_job(std::get<JobSubmit>(env.body).job_toml, "submitted job");
  require_disputable(job.numerics, "submitted job");  // a claim no referee could check is worth nothing
  const JobLimits& limits = config_.limits;
  if (job.steps > limits.max_steps)
    throw ProtocolError(fmt::format("the job has {} steps; this provider trains at most {}", job.steps, limits.max_steps));
  const JobFootprint footprint = job_footprint(job);
  if (footprint.parameters > limits.max_parameters)
    throw ProtocolError(fmt::format("the model has {} parameters; this provider trains at most {}", footprint.parameters,
                                    limits.max_parameters));
  if (footprint.checkpoint_bytes > limits.max_checkpoint_bytes)
    throw ProtocolError(fmt::format("the job's checkpoints take {} bytes; this provider stores at most {}",
                                    footprint.checkpoint_bytes, limits.max_checkpoint_bytes));
  locate_data(job, config_.datasets);  // a registered name, or an error: never a path from the peer
  ThreadPool pool(config_.threads);
  const std::shared_ptr<const Dataset> data =
      locally(log_, "loading the data set", [&] { return shared_train_set(job, pool); });
  check_job_against_dataset(job, *data);
  const Digest id = job_id(job, *data);
  // Not echoed: the sender must know the id of the job it submits.
  if (id != env.context) throw ProtocolError("the submitted job's id is not the one it was sent under");
  log_(fmt::format("provider {}: training job {} ({} steps){}", me, to_hex(id).substr(0, 12), job.steps,
                   config_.fault.any() ? " [cheating]" : ""));
  TrainOptions o;
  o.train = data.get();
  o.threads = config_.threads;
  o.device = config_.device;
  o.out_dir = config_.store / to_hex(id);
  o.evaluate = false;
  o.fault = config_.fault;
  TrainingRanks* ranks = config_.ranks && config_.ranks->shares(job) ? config_.ranks : nullptr;
  if (config_.ranks && !ranks)
    log_(fmt::format("provider {}: train.shards {} cannot be shared by {} ranks: training on rank 0 alone", me,
                     job.shards, config_.ranks->world().size()));
  const std::string& toml = std::get<JobSubmit>(env.body).job_toml;
  const auto started = std::chrono::steady_clock::now();
  const TrainResult r = locally(log_, "training", [&] { return ranks ? ranks->lead(toml, job, o) : run_training(job, o); });
  meters_->training.observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  meters_->claims.inc();
  last_step_seconds_ = r.seconds / static_cast<double>(std::max<int64_t>(r.steps, 1));
  const Claim claim{r.job_id, static_cast<uint64_t>(r.steps), r.trajectory_root, r.final_state_hash, config_.endpoint};
  c.session->send(seal(key_, r.job_id, ++c.sequence, claim));
  log_(fmt::format("provider {}: claim trajectory_root {}", me, to_hex(r.trajectory_root).substr(0, 16)));
}

// The dispute of the connection's DisputeOpen as answered for `referee`: the one kept from an earlier
// connection, or a new one (its data loaded now).
std::shared_ptr<ProviderNode::Dispute> ProviderNode::dispute_for(const Connection& c, const PublicKey& referee) {
  const auto key = std::make_pair(c.open->context, referee);
  {
    std::lock_guard lock(mu_);
    if (auto it = disputes_.find(key); it != disputes_.end()) {
      it->second->used = std::chrono::steady_clock::now();
      return it->second;
    }
  }
  auto d = std::make_shared<Dispute>();
  locally(log_, "opening the dispute", [&] {
    d->pool = std::make_unique<ThreadPool>(config_.threads);
    d->data = shared_train_set(c.job, *d->pool);
    const Digest id = job_id(c.job, *d->data);
    d->session = std::make_unique<ProviderDisputeSession>(key_, *c.open, c.job, *d->data, config_.store / to_hex(id),
                                                          *d->pool, config_.referees, config_.fault);
  });
  d->used = std::chrono::steady_clock::now();
  log_(fmt::format("provider {}: answering dispute {} as party {}", to_hex(key_.public_key).substr(0, 8),
                   to_hex(c.open->context).substr(0, 12), d->session->party()));
  std::lock_guard lock(mu_);
  auto [it, inserted] = disputes_.emplace(key, d);  // a concurrent connection may have made it first
  while (disputes_.size() > kRetainedDisputes) {
    auto oldest = std::min_element(disputes_.begin(), disputes_.end(),
                                   [](const auto& a, const auto& b) { return a.second->used < b.second->used; });
    disputes_.erase(oldest);
  }
  return it->second;
}

// A verdict ends the dispute: its kept state is released.
void ProviderNode::forget(const Digest& dispute_id) {
  std::lock_guard lock(mu_);
  std::erase_if(disputes_, [&](const auto& entry) { return entry.first.first == dispute_id; });
}

// A Query: only a trusted referee's is served; the dispute's data is loaded on its first one.
void ProviderNode::answer(const std::shared_ptr<Connection>& c, const Envelope& env) {
  Session& session = *c->session;
  const auto& referees = config_.referees;
  if (std::find(referees.begin(), referees.end(), env.sender) == referees.end())
    throw WireError(CloseCode::PolicyViolation, "query signed by a key that is not a trusted referee");
  if (!c->open) throw WireError(CloseCode::PolicyViolation, "a query before the DisputeOpen");
  if (!c->dispute) {
    c->dispute = dispute_for(*c, env.sender);
    std::lock_guard lock(c->dispute->mu);
    c->dispute->session->new_connection();
  }
  const auto received = std::chrono::steady_clock::now();
  std::vector<std::vector<uint8_t>> answers;
  {
    std::lock_guard lock(c->dispute->mu);
    c->dispute->used = received;
    answers = locally(log_, "answering the query", [&] { return c->dispute->session->on_envelope(env); });
  }
  const auto computed = std::chrono::steady_clock::now();
  meters_->queries.inc();
  meters_->answer_latency.observe(std::chrono::duration<double>(computed - received).count());
  // Waits on the connection's condition variable, so a closed connection ends the wait.
  const auto wait_until = [&](std::chrono::steady_clock::time_point t) {
    std::unique_lock lock(c->mu);
    c->cv.wait_until(lock, t, [&] { return c->closed; });
    return !c->closed;
  };
  // An opening may hold more envelopes than the session's write queue: wait for room before each,
  // so a large answer streams at the link's pace instead of overflowing the queue (which closes it).
  const auto stream = [&](std::vector<std::vector<uint8_t>>& frames, uint64_t bytes_per_second) {
    const auto start = std::chrono::steady_clock::now();
    uint64_t sent = 0;
    for (auto& frame : frames) {
      if (bytes_per_second != 0) {  // a throttled link (scenarios): frame k leaves once the bytes before it have
        const auto due = start + std::chrono::microseconds(sent * 1'000'000 / bytes_per_second);
        if (!wait_until(due)) return;
      }
      sent += frame.size();
      meters_->answer_bytes.inc(static_cast<double>(frame.size()));
      if (!session.wait_for_room(frame.size())) return;
      session.send(std::move(frame));
    }
  };
  if (!reply_filter) return stream(answers, 0);
  ProviderReply reply = reply_filter(QueryContext{*c->open, env, computed - received}, std::move(answers));
  if (reply.delay > std::chrono::milliseconds{0} && !wait_until(received + reply.delay)) return;
  stream(reply.frames, reply.bytes_per_second);
  if (reply.disconnect) session.close(CloseCode::GoingAway, "provider disconnects");
}

void ProviderNode::on_message(const std::shared_ptr<Connection>& c, std::vector<uint8_t> bytes) {
  Session& session = *c->session;
  MessageKind env_kind = MessageKind::Error;  // not yet decoded
  try {
    const Envelope env = open_envelope(bytes);
    env_kind = env.kind;
    switch (env.kind) {
      case MessageKind::JobSubmit: train(*c, env); return;
      case MessageKind::DisputeOpen: {
        // Cheap checks only: the opening is forwarded by whoever connects; a trusted referee's first
        // query makes it a dispute (answer()).
        if (c->open) throw WireError(CloseCode::PolicyViolation, "a second DisputeOpen on one connection");
        const DisputeOpen& d = std::get<DisputeOpen>(env.body);
        if (dispute_id(d) != env.context) throw ProtocolError("the DisputeOpen is not addressed to its dispute id");
        bool ours = false;
        for (const auto& claim : d.claims) ours = ours || open_envelope(claim).sender == key_.public_key;
        if (!ours) throw ProtocolError("none of the disputed claims is this provider's");
        JobSpec job = parse_job(d.job_toml, "disputed job");
        locate_data(job, config_.datasets);
        c->job = std::move(job);
        c->open = env;
        return;
      }
      case MessageKind::Query: answer(c, env); return;
      case MessageKind::Verdict: {
        const Verdict& v = std::get<Verdict>(env.body);
        log_(fmt::format("provider {}: verdict received: {}", to_hex(key_.public_key).substr(0, 8),
                         v.winners.empty() ? "no winner" : "winner " + std::to_string(v.winners[0])));
        // Only a verdict signed by a referee this dispute is answered for ends it.
        if (c->dispute && env.context == c->open->context &&
            std::find(config_.referees.begin(), config_.referees.end(), env.sender) != config_.referees.end())
          forget(env.context);
        return;
      }
      default: throw WireError(CloseCode::PolicyViolation, "unexpected message");
    }
  } catch (const WireError& e) {
    log_(fmt::format("provider: refused a frame from {}: {}", session.remote_endpoint(), e.what()));
    meters_->frames_refused.inc();
    session.close(e.code(), e.what());
  } catch (const std::exception& e) {
    log_(fmt::format("provider: error serving {}: {}", session.remote_endpoint(), e.what()));
    meters_->errors.inc();
    if (env_kind == MessageKind::JobSubmit) meters_->jobs_refused.inc();
    session.send(seal(key_, {}, ++c->sequence, ErrorMessage{1011, e.what()}));
    session.close(CloseCode::InternalError, "error");
  }
}

}  // namespace tribunal::nodes
