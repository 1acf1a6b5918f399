// The provider daemon: `tribunal provider` as a library (trains submitted jobs, answers the referees it
// trusts).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/data_registry.h"
#include "engine/device.h"
#include "engine/rounding_logs.h"
#include "engine/step_policy.h"
#include "engine/trainer.h"
#include "net/context.h"
#include "net/server.h"
#include "nodes/log.h"
#include "nodes/metrics.h"
#include "nodes/reply_filter.h"
#include "nodes/state_source.h"

namespace tribunal::nodes {

/// A provider's connection limits (docs/running.md, "Connection limits"): strangers get a small
/// per-address cap (16) and, when a cap is reached, the oldest stranger connection is evicted rather
/// than the newcomer refused; a connection whose first Query verifies under a trusted referee key
/// moves to the trusted pool (Server::trust), outside those caps: a referee opens one connection per
/// live dispute, all from one address.
ServerOptions provider_server_options();

/// Caps on a submitted job: a provider refuses (ErrorMessage) what its operator did not agree to
/// train, before loading any data. The work and memory terms are engine/training_cost.h's estimates.
struct JobLimits {
  int64_t max_steps = int64_t{1} << 20;  ///< train.steps
  int64_t max_parameters = int64_t{1}
                           << 27;  ///< the model's parameter count (caps widths, d_model, channels)
  uint64_t max_checkpoint_bytes = uint64_t{1} << 36;  ///< the job's stride checkpoints on disk (64 GiB)
  uint64_t max_step_work = uint64_t{1}
                           << 36;  ///< TrainingCost::step_work: multiply-adds (or elements) per step
  uint64_t max_total_work = uint64_t{1} << 50;  ///< TrainingCost::total_work: step_work × steps
  uint64_t max_memory_bytes = uint64_t{16}
                              << 30;  ///< TrainingCost::memory_bytes: one step's values and the states
  uint64_t max_graph_nodes = uint64_t{1}
                             << 15;  ///< TrainingCost::nodes of one step graph (grows with train.shards)
  int max_concurrent_jobs = 1;       ///< jobs trained at once; further ones wait
  int max_queued_jobs = 4;  ///< jobs waiting for a training slot; beyond them a submission is refused
};

/// The [dispute] terms a provider can meet (docs/protocol.md, "Clocks"): a JobSubmit whose terms ask
/// for less time, or a faster link, is refused, so the provider never agrees to a clock it would lose on.
struct TermFloors {
  std::chrono::milliseconds base{250};  ///< base_seconds at least
  std::chrono::milliseconds step{10};   ///< step_seconds at least
  /// min_bytes_per_second at most: the rate at which this provider can stream an answer.
  uint64_t link_bytes_per_second = uint64_t{64} << 20;
  /// Once the provider has trained a job of the same model kind: step_seconds at least its measured
  /// seconds per unit of step work × this job's step work × this factor. 0: no measured floor.
  double safety_factor = 2.0;
};

/// What a provider does with a job being trained (or waiting) when the connection that submitted it
/// closes and no other submission of the same job waits for it.
enum class ClientLeaves {
  Continue,  ///< train to the end (the checkpoints stay in STORE/<job_id>/; no claim is sent)
  Stop,      ///< stop between steps, as on SIGTERM
};

class TrainingRanks;

/// What a provider's operator decides (the options of `tribunal provider`).
struct ProviderConfig {
  std::filesystem::path store;  ///< checkpoints of each job: STORE/<job_id>/
  int threads = 1;
  Device device = Device::Cpu;  ///< where it trains (engine/device.h); disputes re-run nodes on the CPU
  /// The data sets it serves, by name (a job never names a path).
  DataRegistry datasets = DataRegistry::debian();
  /// Referee keys whose queries it answers; a query signed by any other key is refused before
  /// anything is computed. None: it answers no dispute.
  std::vector<PublicKey> referees;
  /// Client keys whose JobSubmit it accepts; empty: any client, within `limits`.
  std::vector<PublicKey> clients;
  JobLimits limits;
  TermFloors terms;  ///< the [dispute] terms it accepts
  ClientLeaves if_client_leaves = ClientLeaves::Stop;
  /// A connection that has not proven a trusted referee key and has no job of its own in training is
  /// closed after this long without a message (1008 "idle"), so idle strangers do not hold slots.
  std::chrono::milliseconds stranger_idle{10000};
  /// The ws:// or wss:// URL it signs into its claims (where referees reach it). Empty:
  /// "ws://HOST:PORT/" (wss:// with TLS) of listen(), which must then be a specific address, not
  /// 0.0.0.0 or ::.
  std::string endpoint;
  StepPolicyPtr policy;  ///< a cheater (demo, tests, scenarios: cheats/); empty: honest
  /// Under mpirun: the ranks that train each job with this node (rank 0) data parallel
  /// (nodes/training_ranks.h); nullptr: this process alone.
  TrainingRanks* ranks = nullptr;
  /// Connection limits (a scenario's misbehaving node raises max_message_bytes to send oversized frames).
  ServerOptions server = provider_server_options();
  /// TLS (docs/running.md, "TLS"): with `cert` and `key` the provider serves wss:// (and /metrics over
  /// https://), and the endpoint it signs by default is wss://HOST:PORT/.
  TlsFiles tls;
};

/// `tribunal provider`: trains submitted jobs into STORE/<job_id>/ and answers a trusted referee's
/// queries about them (docs/protocol.md, "Threat model").
class ProviderNode {
 public:
  ProviderNode(NetContext& ctx, KeyPair key, ProviderConfig config, Logger log);
  /// Stops accepting and closes every open connection (going away); in-flight answers are dropped.
  ~ProviderNode();
  /// Binds and starts accepting; returns the bound port. Throws NetError when no endpoint was
  /// configured and `host` is a wildcard address (the claims would name no reachable URL).
  uint16_t listen(const std::string& host, uint16_t port);
  const PublicKey& public_key() const { return key_.public_key; }
  /// The URL this node signs into its claims (set once listening).
  const std::string& endpoint() const { return config_.endpoint; }
  /// Seconds per training step of the last job trained.
  double last_step_seconds() const { return last_step_seconds_; }
  /// Training runs of submitted jobs started so far (a job submitted again while it trains shares its
  /// run; one submitted again after its claim was sent is answered with that claim, untrained).
  int64_t trainings_started() const { return trainings_started_; }
  /// JobSubmit messages received so far (whatever became of them).
  int64_t jobs_received() const { return jobs_received_; }
  /// Trusted connections (proven referees) and evicted stranger connections so far (net/server.h).
  size_t trusted_connections() const { return server_.trusted_count(); }
  size_t evicted_connections() const { return server_.evicted_count(); }
  /// Stops every training between two steps (as SIGTERM does through the NetContext's shutdown):
  /// their submissions are answered with an error; no new job is taken. Thread-safe, idempotent.
  void stop_training();
  /// Also serves /healthz and /metrics on a separate HTTP-only address (`--metrics`; they are always
  /// served on the WebSocket port too). Returns the bound port. Throws NetError.
  uint16_t listen_metrics(const std::string& host, uint16_t port);
  /// The node's metrics (docs/running.md, "Monitoring"): what /metrics serves.
  const MetricsRegistry& metrics() const { return metrics_; }

  /// Set before listen(): how the node's answers leave it (default: as they are, at once).
  ReplyFilter reply_filter;
  /// Set before a delivery is asked for: rewrites the chunks of a delivered final state before they
  /// are signed (tests: a provider serving altered bytes; default: none, the honest path).
  DeliveryFilter delivery_filter;
  /// How this node, as the trainer of a job with roles, answers its auditors' LogRequests (tests and
  /// scenarios; the default is the honest path: the logs as recorded, signed with the node's key).
  struct LogServing {
    /// Changes a step's logs before they are leaved, chunked and signed (a trainer serving other logs
    /// than its records commit to); throwing ProtocolError withholds them.
    std::function<void(StepRoundingLog&)> alter;
    /// Signs the answers instead of the node's key (a trainer hiding its logs behind a throwaway key).
    std::optional<KeyPair> signer;
  };
  /// Set before an auditor asks.
  LogServing log_serving;

 private:
  struct Connection;
  struct Dispute;
  struct Meters;
  struct JobRun;
  TrainResult run_job(Connection& c, const JobSpec& job, const Digest& id,
                      const std::shared_ptr<const Dataset>& data, const std::string& toml,
                      const std::filesystem::path& audit_logs = {});
  void check_terms(const JobSpec& job, uint64_t step_work) const;
  void on_message(const std::shared_ptr<Connection>& c, std::vector<uint8_t> bytes,
                  std::chrono::steady_clock::time_point arrived);
  void train(Connection& c, const Envelope& env);
  /// A claim kept in the store (claim.bin) with the state hashes of its checkpoints.
  struct HeldCheckpoints {
    Claim claim;
    std::vector<Digest> checkpoint_hashes;
  };
  std::optional<HeldCheckpoints> held_claim(const Digest& id, const JobSpec& job) const;
  void keep_claim(const Digest& id, const std::vector<uint8_t>& claim_envelope) const;
  void answer(const std::shared_ptr<Connection>& c, const Envelope& env,
              std::chrono::steady_clock::time_point arrived);
  static bool superseded(Connection& c, const Envelope& query);
  std::shared_ptr<Dispute> dispute_for(const Connection& c, const PublicKey& referee);
  void forget(const Digest& dispute_id);
  void hold_claim(const JobSpec& job, const Claim& claim, const std::vector<Digest>& checkpoint_hashes);
  void deliver(Connection& c, const Envelope& env);
  // A LogRequest: the rounding logs of one step of a job with roles that this node trained.
  void serve_logs(Connection& c, const Envelope& env);

  NetContext& ctx_;
  KeyPair key_;
  ProviderConfig config_;
  Logger log_;
  MetricsRegistry metrics_;
  std::unique_ptr<Meters> meters_;
  Server server_;
  std::unique_ptr<Server> metrics_server_;  // --metrics
  std::atomic<double> last_step_seconds_{0};
  // The job training now, for /metrics: steps done and T, and its start (steady clock, seconds).
  std::atomic<int64_t> progress_step_{0}, progress_total_{0};
  std::atomic<double> progress_started_{0};
  std::atomic<int64_t> trainings_started_{0};
  std::atomic<int64_t> jobs_received_{0};
  uint64_t closer_id_ = 0;  // the NetContext's shutdown stops training (stop_training)
  std::mutex mu_;
  // Submitted jobs (guarded by mu_): by job id while waiting or training, so a second submission of
  // one job shares the first's run; the queue in submission order; how many train now.
  std::map<Digest, std::shared_ptr<JobRun>> runs_;
  std::deque<std::shared_ptr<JobRun>> queue_;
  int training_ = 0;
  bool stopping_ = false;
  // Measured speed by model kind (guarded by mu_): seconds per unit of TrainingCost::step_work.
  std::map<ModelKind, double> seconds_per_work_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<Connection> connection;
  };
  std::vector<Worker> workers_;  // one per connection; finished ones are joined as new ones arrive
  // The disputes it answers, by dispute id and referee key: kept across connections, so a referee
  // that reconnects finds the steps already recomputed (docs/protocol.md, "Clocks").
  std::map<std::pair<Digest, PublicKey>, std::shared_ptr<Dispute>> disputes_;
  // The claims this node signed, by job id (guarded by mu_), so it can deliver their final states
  // (StateRequest); how many deliveries stream now.
  std::map<Digest, std::shared_ptr<const HeldClaim>> held_;
  int delivering_ = 0;
};

}  // namespace tribunal::nodes
