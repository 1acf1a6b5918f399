#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "dispute/provider_session.h"
#include "engine/error.h"
#include "engine/progress.h"
#include "engine/state.h"
#include "engine/training_cost.h"
#include "net/error.h"
#include "nodes/http_routes.h"
#include "nodes/provider_node.h"
#include "nodes/train_set.h"
#include "nodes/trainer_logs.h"
#include "nodes/training_ranks.h"
#include "protocol/trajectory.h"

namespace tribunal::nodes {
ServerOptions provider_server_options() {
  ServerOptions o;
  o.max_connections_per_address = 16;
  o.evict_strangers = true;
  o.max_trusted_connections = 1024;
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
auto locally(const Logger& log, const char* what, F&& work) -> decltype(work()) {
  try {
    return work();
  } catch (const ProtocolError&) {
    throw;
  } catch (const TrainingStopped&) {  // asked for (shutdown, client gone): no failure of the files
    throw;
  } catch (const std::exception& e) {
    log->error(fmt::format("provider: {} failed: {}", what, e.what()));
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
      : claims(m.counter("tribunal_provider_jobs_total", "Submitted jobs, by outcome.",
                         {{"outcome", "claimed"}})),
        jobs_refused(m.counter("tribunal_provider_jobs_total", "Submitted jobs, by outcome.",
                               {{"outcome", "refused"}})),
        training(m.histogram("tribunal_provider_training_seconds",
                             "Wall time of each job trained to its claim.",
                             {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600})),
        queries(m.counter("tribunal_provider_queries_total", "Referee queries answered.")),
        answer_latency(
            m.histogram("tribunal_provider_answer_seconds",
                        "From a query taken up to its answer computed (recomputing an interval or a "
                        "step included).",
                        latency_buckets())),
        answer_bytes(
            m.counter("tribunal_provider_answer_bytes_total", "Envelope bytes of the answers sent.")),
        frames_refused(
            m.counter("tribunal_provider_frames_refused_total",
                      "Frames refused: undecodable, badly signed, untrusted referee, out of order.")),
        errors(m.counter("tribunal_provider_errors_total",
                         "Messages answered with an ErrorMessage (refused jobs "
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

// One training of a submitted job, shared by every connection that submitted it while it waits or
// trains (they all get its claim).
struct ProviderNode::JobRun {
  explicit JobRun(bool stop_when_left) : stop_when_left(stop_when_left) {}
  std::mutex mu;
  std::condition_variable cv;
  int clients = 1;            // connections waiting for it
  const bool stop_when_left;  // ClientLeaves::Stop
  bool done = false;
  std::optional<TrainResult> result;
  std::string error;              // when done without a result
  std::string why_stopped;        // for the log: shutting down, or its clients left
  std::atomic<bool> stop{false};  // checked by the trainer between steps

  // A submitting connection closed (its session's strand): the last one gone stops it if the
  // operator said so.
  void leave() {
    std::lock_guard lock(mu);
    if (--clients == 0 && stop_when_left && !done) {
      if (why_stopped.empty()) why_stopped = "its client left (--if-client-leaves stop)";
      stop = true;
    }
  }
  void halt(const std::string& why) {
    std::lock_guard lock(mu);
    if (why_stopped.empty()) why_stopped = why;
    stop = true;
  }
  void finish(std::optional<TrainResult> r, std::string why) {
    {
      std::lock_guard lock(mu);
      result = std::move(r);
      error = std::move(why);
      done = true;
    }
    cv.notify_all();
  }
};

// One connection: its messages are handled in order on a worker thread of their own, since
// training and recomputing intervals take seconds and must not block the I/O thread.
struct ProviderNode::Connection {
  std::shared_ptr<Session> session;
  std::mutex mu;
  std::condition_variable cv;
  // Messages not yet handled, with the time each arrived: a reply delayed by a scenario's behaviour
  // counts from its query's arrival, not from when the worker got to it.
  struct Inbound {
    std::vector<uint8_t> bytes;
    std::chrono::steady_clock::time_point arrived;
  };
  std::deque<Inbound> inbox;
  bool closed = false;
  bool finished = false;  // the worker has returned
  uint64_t sequence = 0;
  // Dispute state: the DisputeOpen once it arrived (and its job), the session once a trusted
  // referee's first query came (nothing is loaded or computed for anyone else).
  std::optional<Envelope> open;
  JobSpec job;
  std::shared_ptr<ProviderNode::Dispute> dispute;
  bool trusted = false;         // a trusted referee's Query verified on it (answer())
  std::shared_ptr<JobRun> run;  // the job it submitted, while it waits for its claim
};

ProviderNode::ProviderNode(NetContext& ctx, KeyPair key, ProviderConfig config, Logger log)
    : ctx_(ctx),
      key_(key),
      config_(std::move(config)),
      log_(std::move(log)),
      meters_(std::make_unique<Meters>(metrics_)),
      server_(
          ctx,
          [this](std::shared_ptr<Session> s) {
            auto c = std::make_shared<Connection>();
            c->session = s;
            s->set_handlers({[c](Session& session, std::vector<uint8_t> bytes) {
                               std::lock_guard lock(c->mu);
                               c->inbox.push_back({std::move(bytes), std::chrono::steady_clock::now()});
                               // A peer that sends faster than the worker serves is held back by TCP.
                               if (c->inbox.size() >= kInboxHigh) session.set_reading(false);
                               c->cv.notify_one();
                             },
                             [c](Session&, const CloseInfo&) {
                               std::shared_ptr<JobRun> run;
                               {
                                 std::lock_guard lock(c->mu);
                                 c->closed = true;
                                 run = std::move(c->run);
                                 c->cv.notify_one();
                               }
                               if (run) run->leave();
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
                                    Connection::Inbound in;
                                    {
                                      std::unique_lock lock(c->mu);
                                      // An unproven peer that stays silent is closed, so it holds no slot.
                                      if (!c->cv.wait_for(lock, config_.stranger_idle,
                                                          [&] { return c->closed || !c->inbox.empty(); })) {
                                        if (!c->trusted && c->session)
                                          c->session->close(CloseCode::PolicyViolation,
                                                            "idle: no message in time");
                                        continue;
                                      }
                                      if (c->inbox.empty()) break;
                                      in = std::move(c->inbox.front());
                                      c->inbox.pop_front();
                                      if (c->inbox.size() + 1 == kInboxHigh / 2 && c->session)
                                        c->session->set_reading(true);
                                    }
                                    on_message(c, std::move(in.bytes), in.arrived);
                                  }
                                  std::lock_guard lock(c->mu);
                                  c->session.reset();
                                  c->finished = true;
                                }),
                                c});
          },
          [&] {
            ServerOptions o = config_.server;
            o.http = node_http_handler(metrics_);
            if (!config_.tls.cert.empty() || !config_.tls.key.empty())
              o.tls = TlsContext::server(config_.tls);
            return o;
          }()) {
  metrics_.gauge("tribunal_provider_disputes_open", "Disputes whose recomputed state the provider keeps now.",
                 [this] {
                   std::lock_guard lock(mu_);
                   return static_cast<double>(disputes_.size());
                 });
  metrics_.gauge("tribunal_provider_step_seconds", "Seconds per training step of the last job trained.",
                 [this] { return last_step_seconds_.load(); });
  metrics_.gauge("tribunal_provider_training_step",
                 "Steps done of the job training now (the most recently started one); 0 when none trains.",
                 [this] { return static_cast<double>(progress_step_.load()); });
  metrics_.gauge("tribunal_provider_training_job_steps",
                 "Steps (T) of the job training now (the most recently started one); 0 when none trains.",
                 [this] { return static_cast<double>(progress_total_.load()); });
  metrics_.gauge(
      "tribunal_provider_training_steps_per_second",
      "Training rate of the job training now: steps done over the seconds since it started.", [this] {
        const int64_t step = progress_step_.load();
        const double started = progress_started_.load();
        if (step <= 0 || started <= 0) return 0.0;
        const double now =
            std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
        return now > started ? static_cast<double>(step) / (now - started) : 0.0;
      });
  add_server_metrics(metrics_, server_);
  // SIGTERM/SIGINT (the NetContext's shutdown): training stops between two steps, so the process
  // exits within seconds instead of after the job (the sessions close on their own).
  closer_id_ = ctx_.add_closer([this] {
    stop_training();
    ctx_.remove_closer(closer_id_);
  });
}

void ProviderNode::stop_training() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  for (auto& [id, run] : runs_) run->halt("the provider is shutting down");
}

uint16_t ProviderNode::listen_metrics(const std::string& host, uint16_t port) {
  metrics_server_ = listen_http(ctx_, node_http_handler(metrics_), host, port);
  return metrics_server_->port();
}

ProviderNode::~ProviderNode() {
  ctx_.remove_closer(closer_id_);
  stop_training();
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
    throw NetError("provider: listening on '" + host +
                   "' needs the URL referees reach it at (--advertise ws://HOST:PORT/)");
  const uint16_t bound = server_.listen(host, port);
  const char* scheme = config_.tls.cert.empty() ? "ws" : "wss";
  if (config_.endpoint.empty())
    config_.endpoint = host.find(':') != std::string::npos ? fmt::format("{}://[{}]:{}/", scheme, host, bound)
                                                           : fmt::format("{}://{}:{}/", scheme, host, bound);
  return bound;
}

namespace {

std::string seconds_text(std::chrono::duration<double> d) {
  return fmt::format("{:g} s", d.count());
}

// Refuses a cost term above its limit, naming the term, the job's value and the limit.
void check_limit(const char* what, uint64_t value, uint64_t limit, const char* flag) {
  if (value > limit)
    throw ProtocolError(
        fmt::format("the job's {} is {}; this provider takes at most {} ({})", what, value, limit, flag));
}

}  // namespace

// [dispute] terms the provider could not meet are refused now, before it agrees to them: the
// operator's floors and, once it has trained this model kind, its own measured speed.
void ProviderNode::check_terms(const JobSpec& job, uint64_t step_work) const {
  const DisputeTerms& t = job.dispute;
  const TermFloors& floors = config_.terms;
  if (t.base < floors.base)
    throw ProtocolError(
        fmt::format("[dispute] base_seconds = {} is below this provider's minimum of {} (--min-base-seconds)",
                    seconds_text(t.base), seconds_text(floors.base)));
  if (t.step < floors.step)
    throw ProtocolError(
        fmt::format("[dispute] step_seconds = {} is below this provider's minimum of {} (--min-step-seconds)",
                    seconds_text(t.step), seconds_text(floors.step)));
  if (t.min_bytes_per_second > floors.link_bytes_per_second)
    throw ProtocolError(
        fmt::format("[dispute] min_bytes_per_second = {} is above the {} bytes/s this provider can stream "
                    "(--link-bytes-per-second)",
                    t.min_bytes_per_second, floors.link_bytes_per_second));
  double per_work = 0;
  {
    std::lock_guard lock(const_cast<std::mutex&>(mu_));
    if (auto it = seconds_per_work_.find(job.model.kind); it != seconds_per_work_.end())
      per_work = it->second;
  }
  const std::chrono::duration<double> measured(per_work * static_cast<double>(step_work) *
                                               floors.safety_factor);
  if (floors.safety_factor > 0 && t.step < measured)
    throw ProtocolError(
        fmt::format("[dispute] step_seconds = {} is below this provider's minimum of {} for this job "
                    "(its measured step time × safety factor {:g})",
                    seconds_text(t.step), seconds_text(measured), floors.safety_factor));
}

// A JobSubmit: checked against the operator's policy before any data is loaded, then queued and
// trained (or, when the same job is already waiting or training, its run is shared).
void ProviderNode::train(Connection& c, const Envelope& env) {
  const std::string me = to_hex(key_.public_key).substr(0, 8);
  const auto& clients = config_.clients;
  if (!clients.empty() && std::find(clients.begin(), clients.end(), env.sender) == clients.end())
    throw ProtocolError("this provider does not train jobs for the client key that signed the JobSubmit");
  const std::string& toml = std::get<JobSubmit>(env.body).job_toml;
  JobSpec job = parse_job(toml, "submitted job");
  require_disputable(job.numerics, "submitted job");  // a claim no referee could check is worth nothing
  // An imported model's size and graph are in its file (the operator's, by the name the job gives).
  locate_model_files(job, config_.datasets);
  const JobLimits& limits = config_.limits;
  if (job.steps > limits.max_steps)
    throw ProtocolError(
        fmt::format("the job has {} steps; this provider trains at most {}", job.steps, limits.max_steps));
  const JobFootprint footprint = job_footprint(job);
  if (footprint.parameters > limits.max_parameters)
    throw ProtocolError(fmt::format("the model has {} parameters; this provider trains at most {}",
                                    footprint.parameters, limits.max_parameters));
  if (footprint.checkpoint_bytes > limits.max_checkpoint_bytes)
    throw ProtocolError(fmt::format("the job's checkpoints take {} bytes; this provider stores at most {}",
                                    footprint.checkpoint_bytes, limits.max_checkpoint_bytes));
  // The graph's node count first: the cost estimate builds one shard's graph, never S of them.
  const TrainingCost cost = training_cost(job);
  check_limit("step graph (nodes, train.shards copies of the forward and backward)", cost.nodes,
              limits.max_graph_nodes, "--max-graph-nodes");
  check_limit("work per step (multiply-adds)", cost.step_work, limits.max_step_work, "--max-step-work");
  check_limit("memory for training (bytes)", cost.memory_bytes, limits.max_memory_bytes,
              "--max-memory-bytes");
  check_limit("total work (work per step × steps)", cost.total_work, limits.max_total_work,
              "--max-total-work");
  check_terms(job, cost.step_work);
  locate_data(job, config_.datasets);  // a registered name, or an error: never a path from the peer
  ThreadPool pool(config_.threads);
  const std::shared_ptr<const Dataset> data =
      locally(log_, "loading the data set", [&] { return shared_train_set(job, pool); });
  check_job_against_dataset(job, *data);
  const Digest id = job_id(job, *data);
  // Not echoed: the sender must know the id of the job it submits.
  if (id != env.context) throw ProtocolError("the submitted job's id is not the one it was sent under");
  const LogScope scope({"", to_hex(id)});  // this job's lines, its training's included
  if (std::optional<HeldCheckpoints> held = held_claim(id, job)) {
    held->claim.endpoint = config_.endpoint;                // where it answers now
    hold_claim(job, held->claim, held->checkpoint_hashes);  // its final state may be asked for again
    c.session->send(seal(key_, id, ++c.sequence, held->claim));
    meters_->claims.inc();  // a submitted job answered with a claim, trained or held
    log_->info(
        fmt::format("provider {}: job {} was trained before: answered with its claim (trajectory_root {})",
                    me, to_hex(id).substr(0, 12), to_hex(held->claim.trajectory_root).substr(0, 16)));
    return;
  }
  // A rounding-log job with roles that names another provider as its trainer: this one audits. It
  // fetches the trainer's logs of every step (each chunk proven against the trainer's signed leaf) and
  // replays them (docs/numerics.md, "Trainer and auditors").
  std::filesystem::path audit_logs;
  if (!job.numerics.trainer.empty() && job.numerics.trainer != config_.endpoint) {
    audit_logs = audited_logs_dir(config_.store / to_hex(id));
    LogFetch fetch;
    PublicKey trainer{};
    try {
      // The trainer's key is its claim's, as the client forwards it: only headers signed by that key
      // are evidence against the trainer (docs/numerics.md, "Trainer and auditors").
      trainer = trainer_claim_key(std::get<JobSubmit>(env.body).trainer_claim, job, id);
      const bool wss = job.numerics.trainer.rfind("wss://", 0) == 0;
      fetch = fetch_trainer_logs(ctx_, job.numerics.trainer, key_, trainer, job, data_shape_of(*data), id,
                                 audit_logs, wss ? TlsContext::client(config_.tls) : nullptr);
    } catch (const std::exception& e) {  // the trainer's doing (or its link's): the client is told why
      throw ProtocolError(std::string("this provider audits the job and cannot: ") + e.what());
    }
    log_->info(fmt::format(
        "provider {}: auditing job {}: fetched the rounding logs of trainer {} ({}): {} steps, {} packed "
        "bytes ({} per step), {} bytes received, {} bytes gzip, {:.3f} s, {} requests sent again, {} "
        "reconnections",
        me, to_hex(id).substr(0, 12), job.numerics.trainer, to_hex(Digest(trainer)).substr(0, 8), fetch.steps,
        fetch.packed_bytes, fetch.packed_bytes / std::max<uint64_t>(fetch.steps, 1), fetch.wire_bytes,
        fetch.file_bytes, fetch.seconds, fetch.reasks, fetch.reconnects));
  }
  const TrainResult r = run_job(c, job, id, data, toml, audit_logs);
  if (r.steps > r.resumed_from) {
    const double per_work = r.seconds / (static_cast<double>(r.steps - r.resumed_from) *
                                         static_cast<double>(std::max<uint64_t>(cost.step_work, 1)));
    std::lock_guard lock(mu_);
    seconds_per_work_[job.model.kind] = per_work;
  }
  const Claim claim{r.job_id, static_cast<uint64_t>(r.steps), r.trajectory_root, r.final_state_hash,
                    config_.endpoint};
  hold_claim(job, claim, r.checkpoint_hashes);
  std::vector<uint8_t> sealed = seal(key_, r.job_id, ++c.sequence, claim);
  keep_claim(r.job_id, sealed);
  c.session->send(std::move(sealed));
  log_->info(
      fmt::format("provider {}: claim trajectory_root {}", me, to_hex(r.trajectory_root).substr(0, 16)));
}

// Where a job's claim is kept, next to its checkpoints.
static std::filesystem::path claim_file(const std::filesystem::path& store, const Digest& id) {
  return store / to_hex(id) / "claim.bin";
}

// The claim this provider signed for job `id` after training it, when its store still holds it and
// the final checkpoint it commits to (so a dispute about it can be answered): a resubmitted job is
// answered with it instead of being trained again. A file that is not this provider's signed claim
// of this job, or whose final checkpoint is gone or differs, is ignored (the job is trained).
std::optional<ProviderNode::HeldCheckpoints> ProviderNode::held_claim(const Digest& id,
                                                                      const JobSpec& job) const {
  const std::filesystem::path file = claim_file(config_.store, id);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  try {
    std::ifstream in(file, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const Envelope env = open_envelope(bytes);
    if (env.kind != MessageKind::Claim || env.sender != key_.public_key || env.context != id)
      throw EngineError("not this provider's claim of this job");
    const Claim& claim = std::get<Claim>(env.body);
    if (claim.job_id != id || claim.steps != static_cast<uint64_t>(job.steps))
      throw EngineError("a claim of another job or length");
    const CheckpointHeader last = read_checkpoint_header(checkpoint_path(file.parent_path(), job.steps));
    if (last.job_id != id || last.state_hash != claim.final_state_hash)
      throw EngineError("its final checkpoint is not the one the claim commits to");
    // Its checkpoints' state hashes, for a delivery of its final state (hold_claim); the trajectory
    // root they rebuild must be the claim's.
    std::vector<Digest> hashes;
    for (const uint64_t t :
         checkpoint_steps(static_cast<uint64_t>(job.steps), static_cast<uint64_t>(job.stride))) {
      const CheckpointHeader h =
          read_checkpoint_header(checkpoint_path(file.parent_path(), static_cast<int64_t>(t)));
      if (h.job_id != id)
        throw EngineError("its checkpoint of step " + std::to_string(t) + " is of another job");
      hashes.push_back(h.state_hash);
    }
    if (trajectory_root(hashes) != claim.trajectory_root)
      throw EngineError("its checkpoints do not rebuild the claim's trajectory root");
    return HeldCheckpoints{claim, std::move(hashes)};
  } catch (const std::exception& e) {
    log_->warn(fmt::format("provider: {}: not used ({}); training the job", file.string(), e.what()));
    return std::nullopt;
  }
}

// Keeps the signed claim of a trained job (atomically: temporary file, then rename) for held_claim.
// A failure to keep it costs a retraining on resubmission, never the claim just made: it is logged.
void ProviderNode::keep_claim(const Digest& id, const std::vector<uint8_t>& claim_envelope) const {
  const std::filesystem::path file = claim_file(config_.store, id);
  const std::filesystem::path temp = file.string() + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(claim_envelope.data()),
              static_cast<std::streamsize>(claim_envelope.size()));
    if (!out) ec = std::make_error_code(std::errc::io_error);
  }
  if (!ec) std::filesystem::rename(temp, file, ec);
  if (ec) log_->warn(fmt::format("provider: cannot keep the claim in {}: {}", file.string(), ec.message()));
}

// Waits for a training slot (or joins the run of the same job), trains, and returns the result every
// submitter of the job shares. Throws ProtocolError when the queue is full, the provider stops, or the
// run stopped because its clients left.
TrainResult ProviderNode::run_job(Connection& c, const JobSpec& job, const Digest& id,
                                  const std::shared_ptr<const Dataset>& data, const std::string& toml,
                                  const std::filesystem::path& audit_logs) {
  const std::string me = to_hex(key_.public_key).substr(0, 8);
  const std::string job_hex = to_hex(id).substr(0, 12);
  const JobLimits& limits = config_.limits;
  std::shared_ptr<JobRun> run;
  bool mine = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_) throw ProtocolError("this provider is shutting down");
    if (auto it = runs_.find(id); it != runs_.end()) {
      run = it->second;
      std::lock_guard run_lock(run->mu);
      ++run->clients;
    } else {
      if (training_ >= limits.max_concurrent_jobs &&
          queue_.size() >= static_cast<size_t>(limits.max_queued_jobs))
        throw ProtocolError(
            fmt::format("this provider is busy: {} job(s) training and {} waiting (at most {} and {}); "
                        "submit the job later",
                        training_, queue_.size(), limits.max_concurrent_jobs, limits.max_queued_jobs));
      run = std::make_shared<JobRun>(config_.if_client_leaves == ClientLeaves::Stop);
      runs_.emplace(id, run);
      queue_.push_back(run);
      mine = true;
    }
  }
  {
    std::lock_guard lock(c.mu);
    if (c.closed) {  // the client left already: its close came before the run was attached
      run->leave();
    } else {
      c.run = run;
    }
  }
  server_.keep(*c.session);  // training for this peer: no flood may evict its connection
  if (!mine) {
    log_->info(fmt::format("provider {}: job {} submitted again while it waits or trains: sharing its run",
                           me, job_hex));
  } else {
    // FIFO: the oldest waiting job takes a free slot; a stop (shutdown, clients gone) ends the wait.
    bool go = false;
    for (;;) {
      std::unique_lock lock(mu_);
      if (stopping_ || run->stop) break;
      if (training_ < limits.max_concurrent_jobs && queue_.front() == run) {
        go = true;
        ++training_;
        break;
      }
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    {
      std::lock_guard lock(mu_);
      std::erase(queue_, run);
    }
    std::optional<TrainResult> result;
    std::string error;
    if (!go) {
      std::lock_guard lock(run->mu);
      error = "the job was not trained: " +
              (run->why_stopped.empty() ? "the provider is shutting down" : run->why_stopped);
    } else {
      ++trainings_started_;
      log_->info(fmt::format("provider {}: training job {} ({} steps){}", me, job_hex, job.steps,
                             is_honest(config_.policy) ? "" : " [cheating]"));
      TrainOptions o;
      o.train = data.get();
      o.threads = config_.threads;
      o.device = config_.device;
      o.out_dir = config_.store / to_hex(id);
      o.evaluate = false;
      o.policy = config_.policy;
      o.stop = &run->stop;
      // Progress in the log while it trains (docs/running.md, "Progress"): the first step, every 10 s
      // and the last.
      auto progress = std::make_shared<ProgressMeter>(std::chrono::seconds(10));
      o.on_step = [this, progress, me, job_hex](int64_t step, int64_t total, float loss) {
        progress->update(step, total);
        if (progress->report_due())
          log_->info(fmt::format("provider {}: job {}: {}, loss {:.4f}", me, job_hex, progress->line(),
                                 static_cast<double>(loss)));
      };
      // The progress gauges follow the training started last (a provider trains one job at a time but
      // for rare overlaps).
      const double started_at =
          std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      progress_started_ = started_at;
      progress_step_ = 0;
      progress_total_ = job.steps;
      o.on_step = [this, started_at, previous = o.on_step](int64_t step, int64_t total, float loss) {
        if (progress_started_.load() == started_at) progress_step_ = step;
        if (previous) previous(step, total, loss);
      };
      struct ProgressReset {  // however the training ends, the gauges then read 0 (none trains)
        ProviderNode& node;
        double started_at;
        ~ProgressReset() {
          if (node.progress_started_.load() != started_at) return;
          node.progress_step_ = 0;
          node.progress_total_ = 0;
          node.progress_started_ = 0;
        }
      } progress_reset{*this, started_at};
      if (!audit_logs.empty()) o.rounding = RoundingOptions{default_float64_gemm(), audit_logs, true};
      TrainingRanks* ranks = config_.ranks && config_.ranks->shares(job) ? config_.ranks : nullptr;
      if (config_.ranks && !ranks)
        log_->warn(
            fmt::format("provider {}: train.shards {} cannot be shared by {} ranks: training on rank 0 alone",
                        me, job.shards, config_.ranks->world().size()));
      const auto started = std::chrono::steady_clock::now();
      try {
        result = locally(log_, "training",
                         [&] { return ranks ? ranks->lead(toml, job, o) : run_training(job, o); });
        meters_->training.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        meters_->claims.inc();
        last_step_seconds_ = result->seconds / static_cast<double>(std::max<int64_t>(result->steps, 1));
      } catch (const TrainingStopped& e) {
        std::string why;
        {
          std::lock_guard lock(run->mu);
          why = run->why_stopped;
        }
        log_->warn(fmt::format(
            "provider {}: training of job {} stopped at step {} of {} ({}); {} keeps its complete "
            "checkpoints",
            me, job_hex, e.step, job.steps, why, (o.out_dir).string()));
        error = fmt::format("the job's training stopped at step {}: {}", e.step, why);
      } catch (const std::exception& e) {  // LocalFailure (details logged) or a ProtocolError
        error = e.what();
      }
      std::lock_guard lock(mu_);
      --training_;
    }
    {
      std::lock_guard lock(mu_);
      runs_.erase(id);
    }
    run->finish(std::move(result), error);
  }
  std::unique_lock lock(run->mu);
  run->cv.wait(lock, [&] { return run->done; });
  if (!run->result) throw ProtocolError(run->error);
  return *run->result;
}

// The dispute of the connection's DisputeOpen as answered for `referee`: the one kept from an earlier
// connection, or a new one (its data loaded now).
std::shared_ptr<ProviderNode::Dispute> ProviderNode::dispute_for(const Connection& c,
                                                                 const PublicKey& referee) {
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
    d->session =
        std::make_unique<ProviderDisputeSession>(key_, *c.open, c.job, *d->data, config_.store / to_hex(id),
                                                 *d->pool, config_.referees, config_.policy);
  });
  d->used = std::chrono::steady_clock::now();
  const LogScope scope({to_hex(c.open->context), ""});
  log_->info(fmt::format("provider {}: answering dispute {} as party {}",
                         to_hex(key_.public_key).substr(0, 8), to_hex(c.open->context).substr(0, 12),
                         d->session->party()));
  std::lock_guard lock(mu_);
  auto [it, inserted] = disputes_.emplace(key, d);  // a concurrent connection may have made it first
  while (disputes_.size() > kRetainedDisputes) {
    auto oldest = std::min_element(disputes_.begin(), disputes_.end(), [](const auto& a, const auto& b) {
      return a.second->used < b.second->used;
    });
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
// Whether a question of the same dispute, signed by the same referee, of the same or a later round
// already waits in the connection's inbox: then `query` was asked again (a re-ask, docs/protocol.md
// "Lost frames") or moved past, and is superseded — only the last copy is answered, so re-asks that
// piled up while the provider computed, or an old round's, never delay the answer the referee waits for.
bool ProviderNode::superseded(Connection& c, const Envelope& query) {
  const uint32_t round = std::get<Query>(query.body).round;
  std::lock_guard lock(c.mu);
  for (const auto& in : c.inbox) {
    if (in.bytes.size() < 2 || in.bytes[1] != static_cast<uint8_t>(MessageKind::Query)) continue;
    try {
      const Envelope later = open_envelope(in.bytes);
      if (later.sender == query.sender && later.context == query.context &&
          std::get<Query>(later.body).round >= round)
        return true;
    } catch (const std::exception&) {
      // Not a valid envelope: it supersedes nothing (it is refused when its turn comes).
    }
  }
  return false;
}

void ProviderNode::answer(const std::shared_ptr<Connection>& c, const Envelope& env,
                          std::chrono::steady_clock::time_point arrived) {
  Session& session = *c->session;
  const LogScope scope({to_hex(env.context), ""});  // a query's context is its dispute id
  const auto& referees = config_.referees;
  if (std::find(referees.begin(), referees.end(), env.sender) == referees.end())
    throw WireError(CloseCode::PolicyViolation, "query signed by a key that is not a trusted referee");
  if (!c->trusted) {
    // The referee has proven its key (the envelope's signature verified): its connection leaves the
    // strangers' limits for the trusted pool, where no flood can evict it (docs/protocol.md).
    std::lock_guard lock(c->mu);
    c->trusted = true;
    server_.trust(session);
  }
  if (!c->open) throw WireError(CloseCode::PolicyViolation, "a query before the DisputeOpen");
  if (!c->dispute) {
    c->dispute = dispute_for(*c, env.sender);
    std::lock_guard lock(c->dispute->mu);
    c->dispute->session->new_connection();
  }
  if (superseded(*c, env)) return;
  const auto received = arrived, taken = std::chrono::steady_clock::now();
  std::vector<std::vector<uint8_t>> answers;
  {
    std::lock_guard lock(c->dispute->mu);
    c->dispute->used = taken;
    answers = locally(log_, "answering the query", [&] { return c->dispute->session->on_envelope(env); });
  }
  const auto computed = std::chrono::steady_clock::now();
  meters_->queries.inc();
  meters_->answer_latency.observe(std::chrono::duration<double>(computed - taken).count());
  log_->debug(fmt::format("provider {}: a query of dispute {} answered with {} frame(s) in {:.1f} ms",
                          to_hex(key_.public_key).substr(0, 8), to_hex(env.context).substr(0, 12),
                          answers.size(),
                          std::chrono::duration<double, std::milli>(computed - taken).count()));
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
      if (bytes_per_second !=
          0) {  // a throttled link (scenarios): frame k leaves once the bytes before it have
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
  ProviderReply reply = reply_filter(QueryContext{*c->open, env, computed - taken}, std::move(answers));
  if (reply.delay > std::chrono::milliseconds{0} && !wait_until(received + reply.delay)) return;
  stream(reply.frames, reply.bytes_per_second);
  if (reply.disconnect) session.close(CloseCode::GoingAway, "provider disconnects");
}

// A claim this node signed: its final state may be asked for (deliver()).
void ProviderNode::hold_claim(const JobSpec& job, const Claim& claim,
                              const std::vector<Digest>& checkpoint_hashes) {
  auto held = std::make_shared<const HeldClaim>(HeldClaim{job, claim, checkpoint_hashes});
  std::lock_guard lock(mu_);
  held_[claim.job_id] = std::move(held);
}

// Deliveries streaming at once: each holds one final state in memory; beyond them a client is told
// to come back.
constexpr int kMaxDeliveries = 2;

// A StateRequest (docs/protocol.md, "Delivery"): the final state of a claim this node made, to a client
// its operator trains for (the JobSubmit policy), as a StateHeader and then every tensor in chunks,
// at the link's pace. The request names a job id and a trajectory root, never a path: only the final
// checkpoint of a claim held in memory (hold_claim), read from STORE/<job_id>/, is served.
void ProviderNode::deliver(Connection& c, const Envelope& env) {
  const auto& clients = config_.clients;
  if (!clients.empty() && std::find(clients.begin(), clients.end(), env.sender) == clients.end())
    throw ProtocolError("this provider does not deliver to the client key that signed the StateRequest");
  const StateRequest& request = std::get<StateRequest>(env.body);
  if (request.job_id != env.context) throw ProtocolError("the StateRequest is not addressed to its job id");
  const LogScope scope({"", to_hex(request.job_id)});
  std::shared_ptr<const HeldClaim> held;
  {
    std::lock_guard lock(mu_);
    if (auto it = held_.find(request.job_id); it != held_.end()) held = it->second;
    if (held && held->claim.trajectory_root == request.trajectory_root) {
      if (delivering_ >= kMaxDeliveries)
        throw ProtocolError(
            fmt::format("this provider is busy delivering {} final states; ask again later", delivering_));
      ++delivering_;
    }
  }
  if (!held) throw ProtocolError("this provider holds no claim for job " + to_hex(request.job_id));
  if (held->claim.trajectory_root != request.trajectory_root)
    throw ProtocolError("this provider's claim for job " + to_hex(request.job_id).substr(0, 16) +
                        " has another trajectory root");
  struct Slot {
    ProviderNode& node;
    ~Slot() {
      std::lock_guard lock(node.mu_);
      --node.delivering_;
    }
  } slot{*this};
  Session& session = *c.session;
  server_.keep(session);  // streaming to this peer: no flood may evict its connection
  ThreadPool pool(config_.threads);
  const auto job_dir = config_.store / to_hex(request.job_id);
  const StateSource source =
      locally(log_, "loading the final checkpoint", [&] { return StateSource(*held, job_dir, pool); });
  const std::string me = to_hex(key_.public_key).substr(0, 8);
  log_->info(fmt::format("provider {}: delivering the final state of job {} ({} chunks) to {}", me,
                         to_hex(request.job_id).substr(0, 12), source.chunk_count(),
                         session.remote_endpoint()));
  const auto send = [&](const Body& body) {
    std::vector<uint8_t> frame = seal(key_, request.job_id, ++c.sequence, body);
    // Waits for room in the write queue: the state streams at the link's pace, never all queued.
    if (!session.wait_for_room(frame.size())) return false;
    session.send(std::move(frame));
    return true;
  };
  if (!send(source.header())) return;
  source.stream([&](TensorChunk& chunk) {
    if (delivery_filter) delivery_filter(chunk);
    return send(chunk);
  });
}

// A LogRequest (docs/protocol.md, "Rounding-log jobs"): an auditor of a job with roles that this
// node trained asks for one step's rounding logs. Served to any peer that names the job (an auditor is
// another provider, not a client), only for a claim this node holds as the job's trainer, from
// STORE/<job_id>/rounding_logs/, at the link's pace.
void ProviderNode::serve_logs(Connection& c, const Envelope& env) {
  const LogRequest& request = std::get<LogRequest>(env.body);
  if (request.job_id != env.context) throw ProtocolError("the LogRequest is not addressed to its job id");
  std::shared_ptr<const HeldClaim> held;
  {
    std::lock_guard lock(mu_);
    if (auto it = held_.find(request.job_id); it != held_.end()) held = it->second;
  }
  if (!held) throw ProtocolError("this provider holds no claim for job " + to_hex(request.job_id));
  if (held->job.numerics.trainer.empty() || held->job.numerics.trainer != config_.endpoint)
    throw ProtocolError("this provider is not the trainer of job " + to_hex(request.job_id).substr(0, 16));
  Session& session = *c.session;
  server_.keep(session);
  ThreadPool pool(1);
  const std::shared_ptr<const Dataset> data = shared_train_set(held->job, pool);
  const std::vector<Body> answer =
      trainer_log_answer(held->job, data_shape_of(*data), request.job_id,
                         config_.store / to_hex(request.job_id), request.step, log_serving.alter);
  const KeyPair& signer = log_serving.signer ? *log_serving.signer : key_;
  // Numbered as the answers to a referee's queries are (q · 2^20 + k): the auditor tells a late answer to an
  // earlier request from this one's (docs/protocol.md, "Rounding-log jobs").
  for (size_t k = 0; k < answer.size(); ++k) {
    std::vector<uint8_t> frame =
        seal(signer, request.job_id, ProviderDisputeSession::answer_sequence(env.sequence, k), answer[k]);
    if (!session.wait_for_room(frame.size())) return;
    session.send(std::move(frame));
  }
}

void ProviderNode::on_message(const std::shared_ptr<Connection>& c, std::vector<uint8_t> bytes,
                              std::chrono::steady_clock::time_point arrived) {
  Session& session = *c->session;
  MessageKind env_kind = MessageKind::Error;  // not yet decoded
  try {
    const Envelope env = open_envelope(bytes);
    env_kind = env.kind;
    switch (env.kind) {
      case MessageKind::JobSubmit:
        ++jobs_received_;
        train(*c, env);
        return;
      case MessageKind::DisputeOpen: {
        // Cheap checks only: the opening is forwarded by whoever connects; a trusted referee's first
        // query makes it a dispute (answer()).
        if (c->open) throw WireError(CloseCode::PolicyViolation, "a second DisputeOpen on one connection");
        const DisputeOpen& d = std::get<DisputeOpen>(env.body);
        if (dispute_id(d) != env.context)
          throw ProtocolError("the DisputeOpen is not addressed to its dispute id");
        bool ours = false;
        for (const auto& claim : d.claims) ours = ours || open_envelope(claim).sender == key_.public_key;
        if (!ours) throw ProtocolError("none of the disputed claims is this provider's");
        JobSpec job = parse_job(d.job_toml, "disputed job");
        locate_data(job, config_.datasets);
        c->job = std::move(job);
        c->open = env;
        return;
      }
      case MessageKind::Query:
        answer(c, env, arrived);
        return;
      case MessageKind::StateRequest:
        deliver(*c, env);
        return;
      case MessageKind::LogRequest:
        serve_logs(*c, env);
        return;
      case MessageKind::Verdict: {
        const Verdict& v = std::get<Verdict>(env.body);
        log_->info(fmt::format("provider {}: verdict received: {}", to_hex(key_.public_key).substr(0, 8),
                               v.winners.empty() ? "no winner" : "winner " + std::to_string(v.winners[0])));
        // Only a verdict signed by a referee this dispute is answered for ends it.
        if (c->dispute && env.context == c->open->context &&
            std::find(config_.referees.begin(), config_.referees.end(), env.sender) != config_.referees.end())
          forget(env.context);
        return;
      }
      default:
        throw WireError(CloseCode::PolicyViolation, "unexpected message");
    }
  } catch (const WireError& e) {
    log_->warn(fmt::format("provider: refused a frame from {}: {}", session.remote_endpoint(), e.what()));
    meters_->frames_refused.inc();
    session.close(e.code(), e.what());
  } catch (const std::exception& e) {
    log_->error(fmt::format("provider: error serving {}: {}", session.remote_endpoint(), e.what()));
    meters_->errors.inc();
    if (env_kind == MessageKind::JobSubmit) meters_->jobs_refused.inc();
    session.send(seal(key_, {}, ++c->sequence, ErrorMessage{1011, e.what()}));
    session.close(CloseCode::InternalError, "error");
  }
}

}  // namespace tribunal::nodes
