// A provider run under mpirun (docs/running.md "A provider on a cluster"): rank 0 is the provider node;
// ranks ≥ 1 train each job it accepts together with it, data parallel (engine/data_parallel.h). Only
// training spans the ranks: disputes are answered by rank 0 from its checkpoints, as on one process.
#pragma once

#include <mutex>
#include <string>

#include "engine/job.h"
#include "engine/trainer.h"
#include "engine/world.h"
#include "nodes/log.h"
#include "nodes/provider_node.h"

namespace tribunal::nodes {

/// The ranks of a provider and the one job they train at a time.
class TrainingRanks {
 public:
  explicit TrainingRanks(World& world) : world_(world) {}

  World& world() { return world_; }

  /// Whether the ranks can share `job`: its train.shards is a multiple of the rank count. A job they
  /// cannot share is trained by rank 0 alone (a SoloWorld), so no job a client sends stops the ranks.
  bool shares(const JobSpec& job) const { return job.shards % world_.size() == 0; }

  /// Rank 0: sends `job_toml` to the other ranks, then trains it with them (`options.world` is set
  /// here). Serialized: one job at a time uses the ranks. The caller has checked the job (limits, data
  /// set, shares()) so that every rank can train it. Throws RankFailure (engine/world.h) when any rank
  /// failed, this one included: the job failed on every rank, and the ranks can take the next one.
  TrainResult lead(const std::string& job_toml, const JobSpec& job, TrainOptions options);

  /// Ranks ≥ 1: trains every job rank 0 leads with the provider's `config` (data sets, threads,
  /// fault), until stop(). A job that fails on any rank (e.g. its data set is not registered on this
  /// rank's machine, or rank 0 cannot write a checkpoint) fails on every rank with that error
  /// (RankFailure, engine/world.h), which `log` reports here; the ranks then wait for the next job.
  void follow(const ProviderConfig& config, const Logger& log);

  /// Rank 0: ends the other ranks' follow().
  void stop();

 private:
  void send(const std::string& text);  // rank 0: length, then bytes (length 0: stop)
  std::string receive();
  World& world_;
  std::mutex mu_;
};

}  // namespace tribunal::nodes
