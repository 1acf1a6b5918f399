#include "bench/load/provider_host.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdio>
#include <cstring>

#include "cheats/fault_policy.h"
#include "net/context.h"
#include "protocol/wire.h"

namespace tribunal::load_bench {

ProviderHost::ProviderHost(NetContext& ctx, const JobSpec& job, const Digest& job_id, const Dataset& data,
                           const KeyPair& honest, const Trained& honest_run, const Trained& cheater_run,
                           int workers, Latency& latency, std::chrono::milliseconds think)
    : ctx_(ctx),
      job_(job),
      job_id_(job_id),
      data_(data),
      honest_key_(honest),
      honest_(honest_run),
      cheater_(cheater_run),
      latency_(latency),
      think_(think) {
  for (int role = 0; role < 2; ++role) {
    const Trained& run = role == 0 ? honest_ : cheater_;
    responders_[role].responder = std::make_unique<DisputeResponder>(
        job_, data_, run.store, responders_[role].pool, cheats::fault_policy(run.fault));
  }
  ServerOptions options;
  options.max_connections = 100000;  // limited by the file descriptors; the referee is under test
  options.max_connections_per_address = 0;
  for (int i = 0; i < workers; ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) w->thread = std::thread([this, w = w.get()] { work(*w); });
  for (int role = 0; role < 2; ++role) {
    servers_[role] = std::make_unique<Server>(
        ctx, [this, role](std::shared_ptr<Session> s) { accept(role, std::move(s)); }, options);
    ports_[role] = servers_[role]->listen("127.0.0.1", 0);
  }
}
ProviderHost::~ProviderHost() {
  for (auto& s : servers_) s->stop();
  for (auto& w : workers_) {
    {
      std::lock_guard lock(w->mu);
      w->stop = true;
    }
    w->cv.notify_all();
    w->thread.join();
  }
}

void ProviderHost::accept(int role, std::shared_ptr<Session> s) {
  auto c = std::make_shared<Connection>();
  c->role = role;
  c->session = s;
  Worker* w = workers_[next_worker_++ % workers_.size()].get();
  std::weak_ptr<Connection> weak = c;
  s->set_handlers({[this, w, weak](Session& session, std::vector<uint8_t> bytes) {
                     auto c = weak.lock();
                     if (!c) return;
                     session.set_reading(false);  // one message per connection queued at a time
                     // Envelope header: version, kind, 32-byte context. A question's arrival is
                     // stamped here, on the I/O thread, before any queueing.
                     if (bytes.size() > 34 && bytes[1] == static_cast<uint8_t>(MessageKind::Query)) {
                       Digest id;
                       std::memcpy(id.data(), bytes.data() + 2, id.size());
                       latency_.question(id, Clock::now());
                     }
                     std::lock_guard lock(w->mu);
                     w->tasks.push_back({c, std::move(bytes), Clock::now()});
                     w->cv.notify_one();
                   },
                   [c](Session&, const CloseInfo&) mutable { c.reset(); }});
}

void ProviderHost::work(Worker& w) {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(w.mu);
      w.cv.wait(lock, [&] { return w.stop || !w.tasks.empty(); });
      if (w.stop) return;
      task = std::move(w.tasks.front());
      w.tasks.pop_front();
    }
    if (handle(task.connection, task.bytes, task.received)) task.connection->session->set_reading(true);
  }
}

bool ProviderHost::handle(const std::shared_ptr<Connection>& connection, const std::vector<uint8_t>& bytes,
                          Clock::time_point received) {
  Connection& c = *connection;
  try {
    const Envelope env = open_envelope(bytes);
    if (env.kind == MessageKind::DisputeOpen && !c.open) {
      const DisputeOpen& open = std::get<DisputeOpen>(env.body);
      bool ours = false;
      for (const auto& claim : open.claims) {
        const Envelope ce = open_envelope(claim);
        if (ce.kind != MessageKind::Claim || std::get<Claim>(ce.body).job_id != job_id_)
          throw ProtocolError("dispute opening: a claim is not a Claim for this job");
        if (c.role == 0 && ce.sender == honest_key_.public_key) c.key = honest_key_, ours = true;
        if (c.role == 1)
          if (const auto it = cheater_keys_.find(ce.sender); it != cheater_keys_.end())
            c.key = it->second, ours = true;
      }
      if (!ours) throw ProtocolError("dispute opening: none of its claims is ours");
      if (dispute_id(open) != env.context)
        throw ProtocolError("dispute opening: it is not addressed to its dispute id");
      c.dispute_id = env.context;
      c.open = true;
      return true;
    }
    if (env.kind == MessageKind::Query && c.open) {
      if (env.context != c.dispute_id) throw ProtocolError("query for another dispute");
      if (c.referee && env.sender != *c.referee) throw ProtocolError("query signed by another referee");
      if (env.sequence <= c.last_sequence) throw ProtocolError("stale sequence number (replay)");
      c.referee = env.sender;
      c.last_sequence = env.sequence;
      std::vector<Body> bodies;
      {
        Responder& r = responders_[c.role];
        std::lock_guard lock(r.mu);
        bodies = r.responder->answer(std::get<Query>(env.body));
      }
      std::vector<std::vector<uint8_t>> answers;
      for (const Body& body : bodies) answers.push_back(seal(c.key, c.dispute_id, ++c.sequence, body));
      const auto now = Clock::now();
      latency_.provider(received, now);
      if (think_.count() == 0) {
        latency_.answered(env.context, now);
        for (auto& a : answers) c.session->send(std::move(a));
        return true;
      }
      std::chrono::microseconds delay;
      {
        std::lock_guard lock(rng_mu_);
        delay = std::chrono::microseconds(std::uniform_int_distribution<int64_t>(
            0, 2 * std::chrono::duration_cast<std::chrono::microseconds>(think_).count())(rng_));
      }
      auto timer = std::make_shared<boost::asio::steady_timer>(ctx_.io(), delay);
      timer->async_wait([this, timer, connection, answers = std::move(answers),
                         id = env.context](const boost::system::error_code&) mutable {
        latency_.answered(id, Clock::now());
        for (auto& a : answers) connection->session->send(std::move(a));
        connection->session->set_reading(true);
      });
      return false;
    }
    if (env.kind == MessageKind::Verdict) return true;
    throw ProtocolError("unexpected message");
  } catch (const std::exception& e) {
    ++errors_;
    std::fprintf(stderr, "bench_load: provider error: %s\n", e.what());
    c.session->close(CloseCode::PolicyViolation, "error");
  }
  return true;
}

}  // namespace tribunal::load_bench
