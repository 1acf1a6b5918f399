#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "apps/nodes.h"
#include "engine/provider_session.h"

namespace tribunal::cli {
ServerOptions provider_server_options() {
  ServerOptions o;
  o.max_connections_per_address = o.max_connections;
  return o;
}

std::shared_ptr<const Dataset> shared_train_set(const JobSpec& job, ThreadPool& pool) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const Dataset>> cache;
  const std::string key = job.dataset == "text" ? fmt::format("text\n{}\n{}\n{}", job.text_path.string(),
                                                                job.model.context, job.validation)
                                                : fmt::format("{}\n{}", job.dataset, job.data_dir.string());
  std::lock_guard lock(mu);
  if (auto data = cache[key].lock()) return data;
  auto data = std::make_shared<const Dataset>(load_dataset(job, Split::Train, pool));
  cache[key] = data;
  return data;
}

// Messages queued for a connection's worker before its session stops reading (each ≤ 1 MiB).
constexpr size_t kInboxHigh = 8;

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
  // Dispute state, once a DisputeOpen arrived.
  std::unique_ptr<ThreadPool> pool;
  std::shared_ptr<const Dataset> data;
  std::optional<Envelope> open;
  std::unique_ptr<ProviderDisputeSession> dispute;
};

ProviderNode::ProviderNode(NetContext& ctx, KeyPair key, std::filesystem::path store, int threads, Fault fault, LogFn log,
                           ServerOptions server)
    : ctx_(ctx),
      key_(key),
      store_(std::move(store)),
      threads_(threads),
      fault_(fault),
      log_(std::move(log)),
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
      }, server) {}

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

uint16_t ProviderNode::listen(const std::string& host, uint16_t port) { return server_.listen(host, port); }

void ProviderNode::on_message(const std::shared_ptr<Connection>& c, std::vector<uint8_t> bytes) {
  Session& session = *c->session;
  try {
    const Envelope env = open_envelope(bytes);
    if (env.kind == MessageKind::JobSubmit) {
      const JobSpec job = parse_job(std::get<JobSubmit>(env.body).job_toml, "submitted job", ".");
      const std::filesystem::path dir = store_ / to_hex(env.context);
      log_(fmt::format("provider {}: training job {} ({} steps){}", to_hex(key_.public_key).substr(0, 8),
                       to_hex(env.context).substr(0, 12), job.steps, fault_.any() ? " [cheating]" : ""));
      ThreadPool pool(threads_);
      const std::shared_ptr<const Dataset> train = shared_train_set(job, pool);
      TrainOptions o;
      o.train = train.get();
      o.threads = threads_;
      o.out_dir = dir;
      o.evaluate = false;
      o.fault = fault_;
      const TrainResult r = run_training(job, o);
      if (r.job_id != env.context)
        throw ProtocolError("the submitted job's id is " + to_hex(r.job_id) + ", not the one it was sent under");
      last_step_seconds_ = r.seconds / static_cast<double>(std::max<int64_t>(r.steps, 1));
      const Claim claim{r.job_id, static_cast<uint64_t>(r.steps), r.trajectory_root, r.final_state_hash};
      session.send(seal(key_, r.job_id, ++c->sequence, claim));
      log_(fmt::format("provider {}: claim trajectory_root {}", to_hex(key_.public_key).substr(0, 8),
                       to_hex(r.trajectory_root).substr(0, 16)));
      return;
    }
    if (env.kind == MessageKind::DisputeOpen) {
      const DisputeOpen& d = std::get<DisputeOpen>(env.body);
      const JobSpec job = parse_job(d.job_toml, "disputed job", ".");
      c->pool = std::make_unique<ThreadPool>(threads_);
      c->data = shared_train_set(job, *c->pool);
      const Digest id = job_id(job, c->data->root);
      c->open = env;
      c->dispute = std::make_unique<ProviderDisputeSession>(key_, env, job, id, *c->data, store_ / to_hex(id), *c->pool,
                                                            fault_);
      log_(fmt::format("provider {}: answering dispute {} as party {}", to_hex(key_.public_key).substr(0, 8),
                       to_hex(env.context).substr(0, 12), c->dispute->party()));
      return;
    }
    if (env.kind == MessageKind::Query && c->dispute) {
      const auto received = std::chrono::steady_clock::now();
      std::vector<std::vector<uint8_t>> answers = c->dispute->on_envelope(env);
      if (!reply_filter) {
        for (auto& answer : answers) session.send(std::move(answer));
        return;
      }
      ProviderReply reply = reply_filter(QueryContext{*c->open, env}, std::move(answers));
      if (reply.delay_ms > 0) {
        // Waits on the connection's condition variable, so a closed connection ends the wait.
        std::unique_lock lock(c->mu);
        c->cv.wait_until(lock, received + std::chrono::milliseconds(reply.delay_ms), [&] { return c->closed; });
        if (c->closed) return;
      }
      for (auto& frame : reply.frames) session.send(std::move(frame));
      if (reply.disconnect) session.close(CloseCode::GoingAway, "provider disconnects");
      return;
    }
    if (env.kind == MessageKind::Verdict) {
      const Verdict& v = std::get<Verdict>(env.body);
      log_(fmt::format("provider {}: verdict received: {}", to_hex(key_.public_key).substr(0, 8),
                       v.winners.empty() ? "no valid claim" : "winner " + std::to_string(v.winners[0])));
      return;
    }
    throw WireError(CloseCode::PolicyViolation, "unexpected message");
  } catch (const WireError& e) {
    log_(fmt::format("provider: refused a frame from {}: {}", session.remote_endpoint(), e.what()));
    session.close(e.code(), e.what());
  } catch (const std::exception& e) {
    log_(fmt::format("provider: error serving {}: {}", session.remote_endpoint(), e.what()));
    session.send(seal(key_, {}, ++c->sequence, ErrorMessage{1011, e.what()}));
    session.close(CloseCode::InternalError, "error");
  }
}

}  // namespace tribunal::cli
