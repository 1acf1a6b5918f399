// The referee under load (issue: ≥ 500 concurrent disputes on 2 cores, and abuse bounds). One referee
// process — the real nodes::RefereeNode on a NetContext, forked before any thread exists — holds N
// disputes at once over real loopback WebSocket connections, twice in one invocation:
//
//   clean:  N disputes, nothing else;
//   abuse:  N disputes while a flooder opens silent connections (past the per-address limit), sends
//           oversized frames (> 1 MiB), junk frames, and trickles a frame byte by byte.
//
// This process plays everyone else: one honest and one cheating provider server (the cheater holds N
// identities: N Ed25519 keys signing the same faulty claim, hence N distinct dispute ids), and N
// clients that send
// their DisputeOpen at once and check the signed verdict (right referee, right dispute, honest party
// wins, cheat located at the injected step and node). Prints one JSON object.
//
//   bench_load [--disputes 500] [--referee-threads 2] [--provider-workers 2] [--silent 1200] [--no-abuse]
//
// --silent: how many silent connections the flooder opens from one address (more than the referee's
// per-address limit, so that some are refused). --verbose: the referee's log lines on stderr.
//
// Message-handling latency: per dispute, from the provider sending the last answer of a round to a
// provider receiving the referee's next question (referee handling + loopback both ways + this
// process's receive path); p50/p99 over all rounds of all disputes. Referee memory is its RSS sampled
// from /proc every 20 ms (peak per phase) and its VmHWM; its CPU from /proc/<pid>/stat. The abuse
// phase's figures are reported as ratios to the clean phase of the same run.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "nodes/referee_node.h"
#include "engine/dispute.h"
#include "net/error.h"

using namespace tribunal;
using Clock = std::chrono::steady_clock;

namespace {

const std::filesystem::path kJobFile = std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/short_mlp.toml";
constexpr int64_t kFaultStep = 17;
constexpr int64_t kFaultNode = 13;  // an optimizer node: the cheat persists into the next state
constexpr int kClientAddresses = 8;  // clients connect from 127.0.0.2 … 127.0.0.9 (per-address limit)

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ---------------------------------------------------------------------------------------------
// The referee process.

// What the referee's transport logged (one line per refusal and per session end).
struct ChildStats {
  std::atomic<uint64_t> finished{0};
  std::atomic<uint64_t> refused_429{0}, refused_503{0}, unanswered{0};
  std::atomic<uint64_t> no_message{0}, too_slow{0}, handshake_failed{0};
  std::mutex mu;
  std::map<std::string, uint64_t> closes;  // "closed 1009 (message too big) by us" → count
};

[[noreturn]] void run_referee(const KeyPair& key, int threads, int port_fd, bool verbose) {
  static ChildStats stats;
  static bool log_lines = verbose;
  set_net_log_sink([](std::string_view line) {
    if (log_lines) std::fprintf(stderr, "referee [net] %.*s\n", static_cast<int>(line.size()), line.data());
    auto has = [&](std::string_view s) { return line.find(s) != std::string_view::npos; };
    if (has("(HTTP 429)")) ++stats.refused_429;
    if (has("(HTTP 503)")) ++stats.refused_503;
    if (has("unanswered")) ++stats.unanswered;
    if (const size_t at = line.find(": closed "); at != std::string_view::npos) {
      const std::string_view rest = line.substr(at + 9);
      std::string what(rest.substr(0, rest.find(' ')));  // the close code, and who closed first
      what += rest.find(" by us") != std::string_view::npos    ? " by us"
              : rest.find(" by peer") != std::string_view::npos ? " by peer"
                                                                : "";
      std::lock_guard lock(stats.mu);
      ++stats.closes[what];
    }
    if (has("no message within")) ++stats.no_message;
    if (has("message not complete")) ++stats.too_slow;
    if (has("handshake failed")) ++stats.handshake_failed;
  });
  double cpu = 0;
  std::mutex cpu_mu;
  {
    NetContext ctx(threads, /*handle_signals=*/true);
    ctx.set_shutdown_grace(std::chrono::milliseconds(2000));
    nodes::RefereeNodeOptions options;
    options.max_disputes_per_client = options.max_live_disputes;  // every dispute comes from loopback
    nodes::RefereeNode node(ctx, key, options, [verbose](const std::string& line) {
      if (verbose) std::fprintf(stderr, "referee %s\n", line.c_str());
    }, nodes::loopback_policy());
    node.on_finished = [&](const RefereeDispute&, const nodes::DisputeStats& s) {
      ++stats.finished;
      std::lock_guard lock(cpu_mu);
      cpu += s.cpu_seconds;
    };
    const uint16_t port = node.listen("127.0.0.1", 0);
    if (write(port_fd, &port, sizeof port) != sizeof port) _exit(2);
    ctx.run();  // until SIGTERM
  }
  const nlohmann::json out = {{"finished", stats.finished.load()},
                              {"dispute_cpu_seconds", cpu},
                              {"refused_429", stats.refused_429.load()},
                              {"refused_503", stats.refused_503.load()},
                              {"refused_unanswered_bursts", stats.unanswered.load()},
                              {"session_ends", stats.closes},
                              {"closed_no_first_message", stats.no_message.load()},
                              {"closed_message_too_slow", stats.too_slow.load()},
                              {"handshakes_failed", stats.handshake_failed.load()}};
  const std::string text = out.dump();
  if (write(port_fd, text.data(), text.size()) < 0) _exit(3);
  _exit(0);
}

// /proc readings of the referee process.
struct ProcSample {
  uint64_t rss_kib = 0, hwm_kib = 0;
  double cpu_seconds = 0;
};

ProcSample sample_proc(pid_t pid) {
  ProcSample s;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::stoull(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_kib = std::stoull(line.substr(6));
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::string f;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 14) utime = std::stoull(f);
      if (i == 15) stime = std::stoull(f);
    }
    s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The providers: two servers (honest, cheater). Each connection is one provider identity in one
// dispute, with ProviderDisputeSession's checks (its claim is in the opening, the dispute id matches,
// one referee, increasing sequence numbers) and its own signing key and sequence; the answers come
// from one DisputeResponder per role, shared by all its connections. Every dispute asks the same
// questions of the same two trajectories, so after the first the responder answers from its caches:
// this process stays cheap and the referee is what is measured (with a responder per connection,
// recomputing the same intervals 1000 times, the provider side was the bottleneck on 2 cores).
// Connections are spread over worker threads (so each connection's messages stay in order); each
// reads its next message only once the worker has handled the last, so nothing queues without bound.

struct Trained {
  TrainResult result;
  std::filesystem::path store;
  Fault fault;
};

struct Latency {
  std::mutex mu;
  struct PerDispute {
    std::optional<Clock::time_point> answered;  // the last answer of the current round left then
  };
  std::map<Digest, PerDispute> disputes;
  std::vector<double> samples_ms;
  std::vector<double> provider_ms;  // this process: a question's arrival to its answer leaving

  void answered(const Digest& id, Clock::time_point t) {
    std::lock_guard lock(mu);
    auto& d = disputes[id];
    if (!d.answered || *d.answered < t) d.answered = t;
  }
  void question(const Digest& id, Clock::time_point t) {
    std::lock_guard lock(mu);
    auto& d = disputes[id];
    if (!d.answered) return;  // the other party's copy of this question was first
    samples_ms.push_back(std::chrono::duration<double, std::milli>(t - *d.answered).count());
    d.answered.reset();
  }
  void provider(Clock::time_point received, Clock::time_point answered) {
    std::lock_guard lock(mu);
    provider_ms.push_back(std::chrono::duration<double, std::milli>(answered - received).count());
  }
  void reset() {
    std::lock_guard lock(mu);
    disputes.clear();
    samples_ms.clear();
    provider_ms.clear();
  }
};

class ProviderHost {
 public:
  ProviderHost(NetContext& ctx, const JobSpec& job, const Digest& job_id, const Dataset& data, const KeyPair& honest,
               const Trained& honest_run, const Trained& cheater_run, int workers, Latency& latency)
      : ctx_(ctx), job_(job), job_id_(job_id), data_(data), honest_key_(honest), honest_(honest_run),
        cheater_(cheater_run), latency_(latency) {
    for (int role = 0; role < 2; ++role) {
      const Trained& run = role == 0 ? honest_ : cheater_;
      responders_[role].responder =
          std::make_unique<DisputeResponder>(job_, data_, run.store, responders_[role].pool, run.fault);
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
  ~ProviderHost() {
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
  void add_cheater_key(const KeyPair& key) { cheater_keys_[key.public_key] = key; }
  std::string url(int role) const { return "ws://127.0.0.1:" + std::to_string(ports_[role]) + "/"; }
  uint64_t errors() const { return errors_; }

 private:
  // One identity's side of one dispute (what ProviderDisputeSession checks and keeps).
  struct Connection {
    int role = 0;
    std::shared_ptr<Session> session;
    bool open = false;
    KeyPair key;
    Digest dispute_id{};
    std::optional<PublicKey> referee;
    uint64_t last_sequence = 0;
    uint64_t sequence = 0;
  };
  // A role's answers, shared by its connections.
  struct Responder {
    std::mutex mu;
    ThreadPool pool{1};
    std::unique_ptr<DisputeResponder> responder;
  };
  struct Task {
    std::shared_ptr<Connection> connection;
    std::vector<uint8_t> bytes;
    Clock::time_point received;
  };
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Task> tasks;
    bool stop = false;
    std::thread thread;
  };

  void accept(int role, std::shared_ptr<Session> s) {
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

  void work(Worker& w) {
    for (;;) {
      Task task;
      {
        std::unique_lock lock(w.mu);
        w.cv.wait(lock, [&] { return w.stop || !w.tasks.empty(); });
        if (w.stop) return;
        task = std::move(w.tasks.front());
        w.tasks.pop_front();
      }
      handle(*task.connection, task.bytes, task.received);
      task.connection->session->set_reading(true);
    }
  }

  void handle(Connection& c, const std::vector<uint8_t>& bytes, Clock::time_point received) {
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
            if (const auto it = cheater_keys_.find(ce.sender); it != cheater_keys_.end()) c.key = it->second, ours = true;
        }
        if (!ours) throw ProtocolError("dispute opening: none of its claims is ours");
        if (dispute_id(open) != env.context) throw ProtocolError("dispute opening: it is not addressed to its dispute id");
        c.dispute_id = env.context;
        c.open = true;
        return;
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
        latency_.answered(env.context, now);
        latency_.provider(received, now);
        for (auto& a : answers) c.session->send(std::move(a));
        return;
      }
      if (env.kind == MessageKind::Verdict) return;
      throw ProtocolError("unexpected message");
    } catch (const std::exception& e) {
      ++errors_;
      std::fprintf(stderr, "bench_load: provider error: %s\n", e.what());
      c.session->close(CloseCode::PolicyViolation, "error");
    }
  }

  NetContext& ctx_;
  const JobSpec& job_;
  Digest job_id_;
  const Dataset& data_;
  KeyPair honest_key_;
  const Trained& honest_;
  const Trained& cheater_;
  Latency& latency_;
  std::map<PublicKey, KeyPair> cheater_keys_;  // filled before any connection
  std::array<Responder, 2> responders_;
  std::array<std::unique_ptr<Server>, 2> servers_;
  std::array<uint16_t, 2> ports_{};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<size_t> next_worker_{0};
  std::atomic<uint64_t> errors_{0};
};

// ---------------------------------------------------------------------------------------------
// The clients.

struct Dispute {
  std::vector<uint8_t> open;  // the signed DisputeOpen
  Digest id{};
  int honest = 0;             // the honest party's index
};

struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  size_t verdicts = 0, correct = 0;
  std::vector<std::string> errors;
  std::vector<std::shared_ptr<Session>> sessions;
  Clock::time_point last;
};

// Connects one client per dispute at once (spread over kClientAddresses source addresses) and sends
// its DisputeOpen; `out` counts verdicts as they come.
void open_disputes(NetContext& ctx, const std::string& referee_url, const PublicKey referee_key,
                   const std::vector<Dispute>& disputes, const std::shared_ptr<Outcome>& out) {
  std::vector<Client> clients;
  for (int a = 0; a < kClientAddresses; ++a) {
    ClientOptions o;
    o.local_address = "127.0.0." + std::to_string(2 + a);
    o.connect_timeout = std::chrono::seconds(60);
    clients.emplace_back(ctx, o);
  }
  auto finish = [out](bool verdict, bool correct, std::string error) {
    std::lock_guard lock(out->mu);
    ++out->done;
    out->verdicts += verdict;
    out->correct += correct;
    if (!error.empty() && out->errors.size() < 20) out->errors.push_back(std::move(error));
    out->last = Clock::now();
    out->cv.notify_all();
  };
  for (size_t i = 0; i < disputes.size(); ++i) {
    const Dispute& d = disputes[i];
    clients[i % kClientAddresses].connect(referee_url, [referee_key, d, finish, out](std::shared_ptr<Session> s,
                                                                                     const std::string& error) {
      if (!s) return finish(false, false, "connect: " + error);
      auto got = std::make_shared<std::atomic<bool>>(false);
      s->set_handlers({[referee_key, d, got, finish](Session& session, std::vector<uint8_t> bytes) {
                         if (got->exchange(true)) return;
                         bool correct = false;
                         std::string error;
                         try {
                           const Verdict v = verify_verdict(bytes, referee_key);
                           correct = v.dispute_id == d.id && v.winners == std::vector<uint8_t>{uint8_t(d.honest)} &&
                                     v.losers == std::vector<uint8_t>{uint8_t(1 - d.honest)} &&
                                     v.step == kFaultStep && v.node == kFaultNode;
                           if (!correct) error = "wrong verdict: " + v.detail;
                         } catch (const std::exception& e) {
                           error = std::string("bad verdict: ") + e.what();
                         }
                         session.close(CloseCode::Normal, "verdict received");
                         finish(true, correct, error);
                       },
                       [got, finish](Session&, const CloseInfo& info) {
                         if (!got->exchange(true)) finish(false, false, "closed without a verdict: " + to_string(info));
                       }});
      s->send(d.open);
      std::lock_guard lock(out->mu);
      out->sessions.push_back(s);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// The flooder.

struct Abuse {
  std::atomic<uint64_t> silent_open{0}, silent_refused{0}, silent_other{0}, silent_closed_by_referee{0};
  std::atomic<uint64_t> big_sent{0}, big_closed{0};
  std::atomic<uint64_t> junk_connections{0}, junk_frames{0}, junk_closed{0};
  std::atomic<uint64_t> trickle_started{0}, trickle_closed{0};
  std::mutex mu;
  std::vector<std::shared_ptr<Session>> held;
  std::map<std::string, uint64_t> close_codes;  // what the referee closed abusive sessions with
  std::vector<double> trickle_close_seconds;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;

  void note_close(const std::string& what, const CloseInfo& info) {
    std::lock_guard lock(mu);
    ++close_codes[what + " " + std::to_string(static_cast<unsigned>(info.code))];
  }
};

// A raw TCP WebSocket client (no Beast): handshakes, announces a 60000-byte binary frame and then
// sends its payload one byte every 200 ms. Returns when the referee has closed the connection.
void trickle(uint16_t port, const std::string& local, Abuse& abuse) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, local.c_str(), &a.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return (void)close(fd);
  const std::string request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) return (void)close(fd);
  std::string response;
  char buf[4096];
  while (response.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return (void)close(fd);
    response.append(buf, static_cast<size_t>(n));
  }
  if (response.find(" 101 ") == std::string::npos) return (void)close(fd);
  ++abuse.trickle_started;
  const auto start = Clock::now();
  const uint8_t header[] = {0x82, 0x80 | 126, 60000 >> 8, 60000 & 0xff, 1, 2, 3, 4};
  send(fd, header, sizeof header, MSG_NOSIGNAL);
  timeval tv{0, 200000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (int i = 0; i < 60000 && !abuse.stop; ++i) {
    const uint8_t byte = 0x55;
    if (send(fd, &byte, 1, MSG_NOSIGNAL) < 0) break;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n > 0 && static_cast<uint8_t>(buf[0]) == 0x88)) break;  // closed / a close frame
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
  }
  ++abuse.trickle_closed;
  {
    std::lock_guard lock(abuse.mu);
    abuse.trickle_close_seconds.push_back(seconds_since(start));
  }
  close(fd);
}

void start_abuse(NetContext& ctx, const std::string& url, uint16_t port, size_t silent_count, Abuse& abuse) {
  // 1. Connections from one address that never send anything: past the per-address limit they are
  //    refused (HTTP 429, or closed unanswered while many refusals are in progress); the admitted
  //    ones hold a slot until the first-message timeout.
  ClientOptions silent;
  silent.local_address = "127.0.0.200";
  silent.connect_timeout = std::chrono::seconds(30);
  Client silent_client(ctx, silent);
  for (size_t i = 0; i < silent_count; ++i)
    silent_client.connect(url, [&abuse](std::shared_ptr<Session> s, const std::string& error) {
      if (!s) {
        (error.find("429") != std::string::npos || error.find("503") != std::string::npos ? abuse.silent_refused
                                                                                            : abuse.silent_other)++;
        return;
      }
      ++abuse.silent_open;
      s->set_handlers({{}, [&abuse](Session&, const CloseInfo& info) {
                         ++abuse.silent_closed_by_referee;
                         abuse.note_close("silent", info);
                       }});
      std::lock_guard lock(abuse.mu);
      abuse.held.push_back(s);
    });
  // 2. Oversized frames (1 MiB + 1), 4 connections at a time, over and over until the end.
  abuse.threads.emplace_back([&ctx, &abuse, url] {
    ClientOptions big;
    big.local_address = "127.0.0.201";
    big.session.max_message_bytes = 2 * kMaxMessageBytes;
    const std::vector<uint8_t> oversized(kMaxMessageBytes + 1, 0xAB);
    while (!abuse.stop) {
      std::vector<std::shared_ptr<Session>> sessions;
      for (int i = 0; i < 4; ++i) {
        try {
          auto s = Client(ctx, big).connect_sync(url, {{}, [&abuse](Session&, const CloseInfo& info) {
                                                     ++abuse.big_closed;
                                                     abuse.note_close("oversized", info);
                                                   }});
          if (s->send(oversized)) ++abuse.big_sent;
          sessions.push_back(s);
        } catch (const std::exception&) {
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  // 3. Junk frames (random bytes, 1 B – 64 KiB), 50 per connection, from two threads.
  for (int t = 0; t < 2; ++t)
    abuse.threads.emplace_back([&ctx, &abuse, url, t] {
      ClientOptions junk;
      junk.local_address = "127.0.0.202";
      std::mt19937 rng(7 + t);
      std::vector<std::vector<uint8_t>> frames(64);  // made once
      for (auto& frame : frames) {
        frame.resize(1 + rng() % 65536);
        for (auto& b : frame) b = static_cast<uint8_t>(rng());
      }
      while (!abuse.stop) {
        try {
          auto s = Client(ctx, junk).connect_sync(url, {{}, [&abuse](Session&, const CloseInfo& info) {
                                                      ++abuse.junk_closed;
                                                      abuse.note_close("junk", info);
                                                    }});
          ++abuse.junk_connections;
          for (int k = 0; k < 50; ++k) {
            if (!s->send(frames[rng() % frames.size()])) break;
            ++abuse.junk_frames;
          }
        } catch (const std::exception&) {
        }
      }
    });
  // 4. Tricklers: a frame announced and sent one byte every 200 ms.
  for (int i = 0; i < 20; ++i) abuse.threads.emplace_back([port, &abuse] { trickle(port, "127.0.0.203", abuse); });
}

// ---------------------------------------------------------------------------------------------

struct PhaseResult {
  nlohmann::json json;
  double p50 = 0, p99 = 0, rate = 0;
  uint64_t peak_rss_kib = 0;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 500;
  int referee_threads = 2, provider_workers = 2;
  bool abuse_phase = true;
  size_t silent_count = 1200;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--disputes") && i + 1 < argc) n = std::stoul(argv[++i]);
    else if (!std::strcmp(argv[i], "--referee-threads") && i + 1 < argc) referee_threads = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--provider-workers") && i + 1 < argc) provider_workers = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--no-abuse")) abuse_phase = false;
    else if (!std::strcmp(argv[i], "--verbose")) verbose = true;
    else if (!std::strcmp(argv[i], "--silent") && i + 1 < argc) silent_count = std::stoul(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_load [--disputes N] [--referee-threads K] [--provider-workers W] [--silent N] [--no-abuse] [--verbose]\n");
      return 2;
    }
  }
  const size_t fd_limit = raise_fd_limit();
  const KeyPair referee_key = generate_keypair();

  // The referee, forked before any thread exists.
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(pipe_fd[0]);
    run_referee(referee_key, referee_threads, pipe_fd[1], verbose);
  }
  close(pipe_fd[1]);
  uint16_t referee_port = 0;
  if (read(pipe_fd[0], &referee_port, sizeof referee_port) != sizeof referee_port) {
    std::fprintf(stderr, "bench_load: the referee did not start\n");
    return 1;
  }
  const std::string referee_url = "ws://127.0.0.1:" + std::to_string(referee_port) + "/";
  std::atomic<uint64_t> net_log_lines{0};
  set_net_log_sink([&](std::string_view) { ++net_log_lines; });

  // The job, trained once honestly and once with a fault.
  const std::string toml = read_text(kJobFile);
  const JobSpec job = load_job(kJobFile);
  ThreadPool pool(1);
  const Dataset data = load_dataset(job, Split::Train, pool);
  const Digest id = job_id(job, data);
  const auto tmp = std::filesystem::temp_directory_path() / ("tribunal-bench-load-" + std::to_string(getpid()));
  auto train = [&](Fault fault, const std::string& name) {
    Trained t;
    t.fault = fault;
    t.store = tmp / name;
    TrainOptions o;
    o.out_dir = t.store;
    o.evaluate = false;
    o.fault = fault;
    t.result = run_training(job, o);
    return t;
  };
  Fault fault;
  fault.step = kFaultStep;
  fault.node = kFaultNode;
  fault.delta = 10.0f;
  const Trained honest = train(Fault{}, "honest");
  const Trained cheater = train(fault, "cheater");
  const KeyPair honest_key = generate_keypair();
  auto claim_of = [&](const KeyPair& key, const Trained& t, const std::string& endpoint) {
    return seal(key, id, 1,
                Claim{id, static_cast<uint64_t>(t.result.steps), t.result.trajectory_root, t.result.final_state_hash,
                      endpoint});
  };

  // Declared before the context: the flooder's sessions may end (and report to it) until ctx stops.
  Abuse abuse;
  NetContext ctx(2, false);
  Latency latency;
  ProviderHost host(ctx, job, id, data, honest_key, honest, cheater, provider_workers, latency);
  const std::vector<uint8_t> honest_claim = claim_of(honest_key, honest, host.url(0));
  DisputeOpen base;
  base.job_toml = toml;
  base.dataset_root = data.root;
  base.dataset_samples = static_cast<uint64_t>(data.inputs.shape()[0]);
  base.features = static_cast<uint64_t>(data.inputs.shape()[1]);
  base.classes = static_cast<uint64_t>(data.classes);
  auto make_disputes = [&] {
    std::vector<Dispute> out;
    const KeyPair client = generate_keypair();
    for (size_t i = 0; i < n; ++i) {
      const KeyPair key = generate_keypair();
      host.add_cheater_key(key);
      Dispute d;
      d.honest = static_cast<int>(i % 2);
      DisputeOpen open = base;
      const std::vector<uint8_t> cheat = claim_of(key, cheater, host.url(1));
      open.claims = d.honest == 0 ? std::vector{honest_claim, cheat} : std::vector{cheat, honest_claim};
      d.id = dispute_id(open);
      d.open = seal(client, d.id, 1, open);
      out.push_back(std::move(d));
    }
    return out;
  };
  const std::vector<Dispute> clean_disputes = make_disputes();
  const std::vector<Dispute> abuse_disputes = abuse_phase ? make_disputes() : std::vector<Dispute>{};
  ctx.start();

  // Referee memory and CPU, sampled in the background.
  std::atomic<bool> sampling{true};
  std::atomic<uint64_t> peak_rss{0};
  std::thread sampler([&] {
    while (sampling) {
      const ProcSample s = sample_proc(child);
      uint64_t p = peak_rss;
      while (s.rss_kib > p && !peak_rss.compare_exchange_weak(p, s.rss_kib)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const ProcSample idle = sample_proc(child);

  auto run_phase = [&](const std::vector<Dispute>& disputes, Abuse* abuse) {
    latency.reset();
    peak_rss = sample_proc(child).rss_kib;
    auto out = std::make_shared<Outcome>();
    if (abuse) {
      // The flood first: the disputes start once every silent connection is held or refused.
      start_abuse(ctx, referee_url, referee_port, silent_count, *abuse);
      const auto f0 = Clock::now();
      while (seconds_since(f0) < 20 &&
             abuse->silent_open + abuse->silent_refused + abuse->silent_other < silent_count)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const uint64_t junk0 = abuse ? abuse->junk_frames.load() : 0, big0 = abuse ? abuse->big_sent.load() : 0;
    const ProcSample before = sample_proc(child);
    const auto t0 = Clock::now();
    open_disputes(ctx, referee_url, referee_key.public_key, disputes, out);
    {
      std::unique_lock lock(out->mu);
      out->cv.wait_for(lock, std::chrono::minutes(10), [&] { return out->done == disputes.size(); });
    }
    const double wall = std::chrono::duration<double>(out->last - t0).count();
    const ProcSample after = sample_proc(child);
    PhaseResult r;
    std::vector<double> samples, provider;
    {
      std::lock_guard lock(latency.mu);
      samples = latency.samples_ms;
      provider = latency.provider_ms;
    }
    r.p50 = percentile(samples, 0.50);
    r.p99 = percentile(samples, 0.99);
    r.rate = static_cast<double>(out->verdicts) / wall;
    r.peak_rss_kib = peak_rss;
    std::lock_guard lock(out->mu);
    r.json = {{"disputes", disputes.size()},
              {"verdicts", out->verdicts},
              {"verdicts_correct", out->correct},
              {"lost", disputes.size() - out->verdicts},
              {"errors", out->errors},
              {"wall_seconds", wall},
              {"disputes_per_second", r.rate},
              {"latency_samples", samples.size()},
              {"latency_p50_ms", r.p50},
              {"latency_p99_ms", r.p99},
              {"latency_max_ms", percentile(samples, 1.0)},
              {"provider_answer_p99_ms", percentile(provider, 0.99)},
              {"provider_answer_max_ms", percentile(provider, 1.0)},
              {"referee_peak_rss_mib", static_cast<double>(r.peak_rss_kib) / 1024},
              {"referee_cpu_seconds", after.cpu_seconds - before.cpu_seconds}};
    if (abuse)
      r.json["during_disputes"] = {{"junk_frames_sent", abuse->junk_frames - junk0},
                                   {"oversized_frames_sent", abuse->big_sent - big0},
                                   {"silent_connections_held", abuse->silent_open - abuse->silent_closed_by_referee}};
    return r;
  };

  const PhaseResult clean = run_phase(clean_disputes, nullptr);
  nlohmann::json result = {{"bench", "load"},
                           {"referee_threads", referee_threads},
                           {"provider_workers", provider_workers},
                           {"fd_limit", fd_limit},
                           {"job", "scenarios/jobs/short_mlp.toml"},
                           {"cheat", {{"step", kFaultStep}, {"node", kFaultNode}}},
                           {"referee_idle_rss_mib", static_cast<double>(idle.rss_kib) / 1024},
                           {"clean", clean.json}};
  if (abuse_phase) {
    const PhaseResult dirty = run_phase(abuse_disputes, &abuse);
    // Let the tricklers and silent connections meet their timeouts.
    const auto t0 = Clock::now();
    while (seconds_since(t0) < 30 &&
           (abuse.trickle_closed < abuse.trickle_started || abuse.silent_closed_by_referee < abuse.silent_open))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    abuse.stop = true;
    for (auto& t : abuse.threads) t.join();
    nlohmann::json a = dirty.json;
    a["latency_p50_ratio"] = dirty.p50 / clean.p50;
    a["latency_p99_ratio"] = dirty.p99 / clean.p99;
    a["rate_ratio"] = dirty.rate / clean.rate;
    a["peak_rss_ratio"] = static_cast<double>(dirty.peak_rss_kib) / static_cast<double>(clean.peak_rss_kib);
    std::lock_guard lock(abuse.mu);
    a["flood"] = {{"silent_connections", silent_count},
                  {"silent_admitted", abuse.silent_open.load()},
                  {"silent_refused_http", abuse.silent_refused.load()},
                  {"silent_dropped_unanswered", abuse.silent_other.load()},
                  {"silent_closed_by_referee", abuse.silent_closed_by_referee.load()},
                  {"oversized_frames_sent", abuse.big_sent.load()},
                  {"oversized_sessions_closed", abuse.big_closed.load()},
                  {"junk_connections", abuse.junk_connections.load()},
                  {"junk_frames_sent", abuse.junk_frames.load()},
                  {"junk_sessions_closed", abuse.junk_closed.load()},
                  {"tricklers", abuse.trickle_started.load()},
                  {"tricklers_closed", abuse.trickle_closed.load()},
                  {"trickler_close_seconds_max",
                   abuse.trickle_close_seconds.empty()
                       ? 0.0
                       : *std::max_element(abuse.trickle_close_seconds.begin(), abuse.trickle_close_seconds.end())},
                  {"close_codes_seen", abuse.close_codes}};
    result["abuse"] = a;
  }
  sampling = false;
  sampler.join();
  const ProcSample end = sample_proc(child);
  result["referee_vmhwm_mib"] = static_cast<double>(end.hwm_kib) / 1024;
  result["provider_errors"] = host.errors();

  kill(child, SIGTERM);
  std::string child_text;
  char buf[4096];
  for (ssize_t k; (k = read(pipe_fd[0], buf, sizeof buf)) > 0;) child_text.append(buf, static_cast<size_t>(k));
  int status = 0;
  waitpid(child, &status, 0);
  try {
    result["referee"] = nlohmann::json::parse(child_text);
  } catch (const std::exception&) {
    result["referee"] = "no report (exit status " + std::to_string(status) + ")";
  }
  ctx.stop();
  ctx.join();
  std::filesystem::remove_all(tmp);
  std::printf("%s\n", result.dump().c_str());
  const bool ok = result["clean"]["verdicts_correct"] == n &&
                  (!abuse_phase || result["abuse"]["verdicts_correct"] == n);
  return ok ? 0 : 1;
}
