// bench_load's providers (see the comment on ProviderHost).
#pragma once

#include <chrono>
#include <random>

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/load/latency.h"
#include "bench/load/load.h"
#include "cheats/fault.h"
#include "dispute/responder.h"
#include "engine/trainer.h"
#include "net/server.h"

namespace tribunal::load_bench {

/// One training run of the job: its result, its checkpoint store and the fault it trained with.
struct Trained {
  TrainResult result;
  std::filesystem::path store;
  cheats::Fault fault;
};

/// bench_load's providers: two servers (honest, cheater). Each connection is one provider identity in one
/// dispute, with ProviderDisputeSession's checks (its claim is in the opening, the dispute id matches,
/// one referee, increasing sequence numbers) and its own signing key and sequence; the answers come
/// from one DisputeResponder per role, shared by all its connections. Every dispute asks the same
/// questions of the same two trajectories, so after the first the responder answers from its caches:
/// this process stays cheap and the referee is what is measured (with a responder per connection,
/// recomputing the same intervals 1000 times, the provider side was the bottleneck on 2 cores).
/// Connections are spread over worker threads (so each connection's messages stay in order); each
/// reads its next message only once the worker has handled the last, so nothing queues without bound.
/// With a think time, each answer is sent that long after it was ready (a timer, no thread held),
/// drawn uniformly from [0, 2 × think) per question: a real provider's work on the question (a
/// recomputed interval, a checkpoint read) and its network's round trip, which take the disputes out of
/// the lockstep of answers from a cache.
class ProviderHost {
 public:
  /// Starts both servers on free loopback ports and `workers` worker threads. `job`, `data`, both runs
  /// and `latency` must outlive the host; `honest` signs the honest claims.
  ProviderHost(NetContext& ctx, const JobSpec& job, const Digest& job_id, const Dataset& data,
               const KeyPair& honest, const Trained& honest_run, const Trained& cheater_run, int workers,
               Latency& latency, std::chrono::milliseconds think = {});
  ~ProviderHost();  ///< stops the servers and joins the workers
  /// One more cheater identity (all sign the same faulty claim); call before any connection.
  void add_cheater_key(const KeyPair& key) { cheater_keys_[key.public_key] = key; }
  /// The ws:// URL of role 0 (honest) or 1 (cheater).
  std::string url(int role) const { return "ws://127.0.0.1:" + std::to_string(ports_[role]) + "/"; }
  /// Messages it refused (each closed its connection), over both roles.
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

  void accept(int role, std::shared_ptr<Session> s);
  void work(Worker& w);
  // Handles one message; returns true when the connection may read its next one now (false: a
  // think-time timer sends the answers and resumes its reading).
  bool handle(const std::shared_ptr<Connection>& c, const std::vector<uint8_t>& bytes,
              Clock::time_point received);

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
  std::chrono::milliseconds think_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_{0x7468696e6bULL};  // fixed seed: the same delays run to run
};

}  // namespace tribunal::load_bench
