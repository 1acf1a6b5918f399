// The provider daemon: `tribunal provider` as a library (trains submitted jobs, answers the referees it
// trusts).
#pragma once

#include <atomic>
#include <map>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/data_registry.h"
#include "engine/device.h"
#include "engine/fault.h"
#include "net/context.h"
#include "net/server.h"
#include "nodes/log.h"
#include "nodes/metrics.h"
#include "nodes/reply_filter.h"

namespace tribunal::nodes {

/// A provider's connection limits: a referee opens one connection per live dispute, all from one
/// address, so the per-address cap equals the total cap (net/server.h defaults otherwise).
ServerOptions provider_server_options();

/// Caps on a submitted job: a provider refuses (ErrorMessage) what its operator did not agree to
/// train, before loading any data.
struct JobLimits {
  int64_t max_steps = int64_t{1} << 20;           ///< train.steps
  int64_t max_parameters = int64_t{1} << 27;      ///< the model's parameter count (caps widths, d_model, channels)
  uint64_t max_checkpoint_bytes = uint64_t{1} << 36;  ///< the job's stride checkpoints on disk (64 GiB)
};

class TrainingRanks;

/// What a provider's operator decides (the options of `tribunal provider`).
struct ProviderConfig {
  std::filesystem::path store;   ///< checkpoints of each job: STORE/<job_id>/
  int threads = 1;
  Device device = Device::Cpu;   ///< where it trains (engine/device.h); disputes re-run nodes on the CPU
  /// The data sets it serves, by name (a job never names a path).
  DataRegistry datasets = DataRegistry::debian();
  /// Referee keys whose queries it answers; a query signed by any other key is refused before
  /// anything is computed. None: it answers no dispute.
  std::vector<PublicKey> referees;
  /// Client keys whose JobSubmit it accepts; empty: any client, within `limits`.
  std::vector<PublicKey> clients;
  JobLimits limits;
  /// The ws:// or wss:// URL it signs into its claims (where referees reach it). Empty:
  /// "ws://HOST:PORT/" (wss:// with TLS) of listen(), which must then be a specific address, not
  /// 0.0.0.0 or ::.
  std::string endpoint;
  Fault fault;  ///< a cheater (demo, tests, scenarios)
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
  ProviderNode(NetContext& ctx, KeyPair key, ProviderConfig config, LogFn log);
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
  /// Also serves /healthz and /metrics on a separate HTTP-only address (`--metrics`; they are always
  /// served on the WebSocket port too). Returns the bound port. Throws NetError.
  uint16_t listen_metrics(const std::string& host, uint16_t port);
  /// The node's metrics (docs/running.md, "Monitoring"): what /metrics serves.
  const MetricsRegistry& metrics() const { return metrics_; }

  /// Set before listen(): how the node's answers leave it (default: as they are, at once).
  ReplyFilter reply_filter;

 private:
  struct Connection;
  struct Dispute;
  struct Meters;
  void on_message(const std::shared_ptr<Connection>& c, std::vector<uint8_t> bytes);
  void train(Connection& c, const Envelope& env);
  void answer(const std::shared_ptr<Connection>& c, const Envelope& env);
  std::shared_ptr<Dispute> dispute_for(const Connection& c, const PublicKey& referee);
  void forget(const Digest& dispute_id);

  NetContext& ctx_;
  KeyPair key_;
  ProviderConfig config_;
  LogFn log_;
  MetricsRegistry metrics_;
  std::unique_ptr<Meters> meters_;
  Server server_;
  std::unique_ptr<Server> metrics_server_;  // --metrics
  std::atomic<double> last_step_seconds_{0};
  std::mutex mu_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<Connection> connection;
  };
  std::vector<Worker> workers_;  // one per connection; finished ones are joined as new ones arrive
  // The disputes it answers, by dispute id and referee key: kept across connections, so a referee
  // that reconnects finds the steps already recomputed (docs/protocol.md, "Clocks").
  std::map<std::pair<Digest, PublicKey>, std::shared_ptr<Dispute>> disputes_;
};

}  // namespace tribunal::nodes
