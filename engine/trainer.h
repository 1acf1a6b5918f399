// The training engine: runs step graphs over the state, commits stride checkpoints, evaluates.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/executor.h"
#include "engine/job.h"
#include "engine/rounding_logs.h"
#include "engine/run_log.h"
#include "engine/sampler.h"
#include "engine/state.h"
#include "engine/step_policy.h"
#include "engine/world.h"
#include "protocol/messages.h"

namespace tribunal {

/// One step as a dispute sees it.
struct StepTrace {
  StepGraph graph;
  std::vector<Digest> value_hashes;  ///< by value id: tensor leaf (dataset_root for data tables)
  std::vector<Tensor> values;        ///< by value id: state inputs and node outputs (data left empty)
  std::vector<NodeRecord> records;   ///< one per node
  std::vector<Digest> pre_state, post_state;  ///< tensor leaves of states t and t+1
  /// Rounding-log jobs: every node's log (the last output hash of its record is its leaf), which a
  /// provider opens in a dispute (QueryKind::OpenLog); empty (step −1) for a RepOps job.
  StepRoundingLog rounding_log;
};

/// How a rounding-log job trains here (docs/numerics.md "Rounding-log mode"); RepOps jobs ignore it.
struct RoundingOptions {
  Float64Gemm gemm = default_float64_gemm();  ///< the float64 GEMM this trainer has
  /// Replay the rounding logs of another run directory (another trainer's, or this provider's own
  /// when it answers a dispute) instead of logging its own decisions. Empty: log.
  std::filesystem::path replay_dir;
  /// Replay as an auditor of a job with roles (docs/numerics.md "Trainer and auditors"): a logged
  /// direction is followed where this trainer's value is within 2τ of a boundary (the 3τ/2 the referee
  /// allows plus the τ/2 two contract kernels may differ by), elsewhere the value rounds to nearest;
  /// the replayed log is recorded either way. So the auditor never refuses a log the referee would
  /// allow, and deviates only where the referee refuses the trainer's decision.
  bool audit = false;
  RoundingProfile* profile = nullptr;  ///< receives where each step's time goes when set (benches)
};

/// How a fast-mode job trains here (docs/numerics.md "Fast mode"); other jobs ignore it.
struct FastOptions {
  Float32Gemm gemm = Float32Gemm::OpenBlas;  ///< Linear and Matmul through this float32 GEMM
  int blas_threads = 0;                      ///< OpenBLAS threads (0: as OPENBLAS_NUM_THREADS says)
  bool operator==(const FastOptions&) const = default;
};

/// Steps one job's state forward with the fast RepOps kernels. Deterministic: the same job gives
/// the same bits for any thread count, compiler, optimization level or -march.
class Trainer {
 public:
  /// `train` must be the job's training set (checked by check_job_against_data) and outlive this.
  /// A `policy` other than the honest default makes this a cheating trainer (engine/step_policy.h;
  /// it runs its own clone). Throws EngineError when the job does not fit the data or the policy's
  /// parameters do not fit the job (StepPolicy::check). With a `world` of K > 1 ranks (outliving this),
  /// step() computes this rank's shards only and exchanges the partials (engine/data_parallel.h); EngineError
  /// when K does not divide the job's shards. The step graphs' nodes run on `device` (engine/device.h). A
  /// rounding-log job trains on one rank on the CPU (EngineError otherwise) with `rounding`; a fast-mode job
  /// likewise, with `fast` (EngineError when its GEMM is not built).
  Trainer(const JobSpec& job, const Dataset& train, ThreadPool& pool, StepPolicyPtr policy = {},
          World* world = nullptr, Device device = Device::Cpu, RoundingOptions rounding = {},
          FastOptions fast = {});

  const JobSpec& job() const { return job_; }
  const Digest& job_id() const { return job_id_; }
  const DataShape& data_shape() const { return shape_; }
  State& state() { return state_; }

  /// Replaces the state (e.g. with a loaded checkpoint).
  void set_state(State state) { state_ = std::move(state); }

  /// The graph of step t (what step() runs when state().step() == t): the job's, or the policy's
  /// batch and graph attributes where it deviates.
  StepGraph step_graph(int64_t t);

  /// Takes the executor's buffers for a step before the first one (Executor::reserve), so that the
  /// first step costs what the others do and a step that does not fit in memory fails now. Computes
  /// nothing; the state is unchanged. For a trainer of all the job's shards (one rank).
  void prepare();

  /// Runs one step: state t → state t+1. Returns the loss the new state records (the step's training
  /// loss; for a step whose state the policy claims otherwise, the claimed one).
  float step();

  /// Runs one step like step() and also returns everything a dispute about it needs: the graph,
  /// every value's hash and tensor, and the node records (docs/protocol.md "The game", level 3). post_state
  /// is the state the trainer claims (which its policy may make other than the outputs of its nodes).
  StepTrace traced_step();

  /// Rounding-log mode: the logs of the last step run (each node's, replayed or its own); nullptr for
  /// a RepOps job or before the first step.
  const StepRoundingLog* rounding_log() const { return rounding_log_.step >= 0 ? &rounding_log_ : nullptr; }

  /// state_hash of the current state.
  Digest hash_state() { return state_hash(state_, pool_); }

  /// Data parallel: bytes this rank sent and wall seconds it spent in the partials' exchange, summed
  /// over the steps run so far (0 on one rank).
  size_t exchanged_bytes() const { return exchanged_bytes_; }
  double exchange_seconds() const { return exchange_seconds_; }

 private:
  template <class Inspect, class Release>
  float run_step(const StepGraph& g, Inspect before_swap, Release after_swap, const ShardRun& shards = {});
  void replay_to(int64_t s);    // runs this trainer's trajectory from state 0 to s, then restores the state
  StepGraph next_step_graph();  // prepare()'s graph when it is this step's, else step_graph(t)

  JobSpec job_;
  const Dataset& train_;
  ThreadPool& pool_;
  DataShape shape_;
  Digest job_id_;
  BatchSampler sampler_;
  Executor executor_;
  std::unique_ptr<StepPolicy> policy_;  // this trainer's own clone
  State state_;
  bool claimed_ = false;  // the last step's claimed state is not its nodes' outputs
  World* world_;          // nullptr: this process alone
  ShardRun shards_;       // the shards this rank computes (default: all)
  size_t exchanged_bytes_ = 0;
  double exchange_seconds_ = 0;
  RoundingOptions rounding_;
  StepRoundingLog rounding_log_;  // the last step's (rounding-log mode)
  StepRoundingLog replayed_log_;  // the log being replayed (rounding_.replay_dir set)
  std::optional<std::pair<int64_t, StepGraph>> prepared_;  // prepare()'s graph of step t, for step()
};

/// Mean softmax cross-entropy (nats) of the state's parameters over every sample of `data` (GPT:
/// every prediction of every window), evaluated with the RepOps forward graph without dropout
/// (build_eval_loss_graph) in chunks of about 8192 predictions; the chunk means are combined in
/// binary64, weighted by their rows. Throws EngineError for an empty data set.
double evaluate_loss(const JobSpec& job, const State& state, const Dataset& data, ThreadPool& pool);

/// Test-set accuracy of the state's parameters: argmax of the logits (first maximum on ties) against
/// the labels, evaluated with the same RepOps forward graph in chunks of 1000 rows.
double evaluate_accuracy(const JobSpec& job, const State& state, const Dataset& test, ThreadPool& pool);

struct TrainOptions {
  int threads = 1;
  Device device = Device::Cpu;    ///< where the training steps run (engine/device.h); evaluation
                                  ///< always runs on the CPU kernels (same bits, much faster than
                                  ///< the emulation)
  int64_t stop_at = -1;           ///< stop when the state reaches this step (-1: the job's T)
  std::filesystem::path out_dir;  ///< checkpoint directory; empty: write no files
  bool commit = true;             ///< compute state hashes and the trajectory root
  bool resume = false;            ///< continue from the latest checkpoint in out_dir
  bool evaluate = true;           ///< at the end: test accuracy (mlp, cnn) or validation loss (gpt)
  RoundingOptions rounding;       ///< rounding-log jobs: the float64 GEMM, or logs to replay
  FastOptions fast;               ///< fast-mode jobs: the float32 GEMM and its threads
  StepPolicyPtr policy;           ///< train as a cheater (engine/step_policy.h); default honest. Its
                                  ///< claimed_steps replaces the job's T as the default stop_at
  std::function<void(int64_t step, int64_t total, float loss)> on_step;  ///< after each step
  const Dataset* train = nullptr;  ///< the job's training set if already loaded (else loaded here)
  /// Data parallel (engine/data_parallel.h): the ranks training together, or nullptr for this
  /// process alone. Every rank calls run_training with the same job; rank 0 alone writes checkpoints,
  /// resumes from them (sending the state to the others), calls on_step and evaluates.
  World* world = nullptr;
  /// Checked between steps (one process only: ignored with a world of more than one rank, whose
  /// ranks must all run the same steps): once true, the steps end, the checkpoints already queued are
  /// completed (each file is written whole and renamed, so the directory never holds a partial one)
  /// and run_training throws TrainingStopped. nullptr: train to the end.
  const std::atomic<bool>* stop = nullptr;
};

/// run_training was stopped through TrainOptions::stop: `step` is the state it had reached; the out
/// directory holds only complete checkpoints (a later resume starts from the latest of them).
class TrainingStopped : public EngineError {
 public:
  TrainingStopped(int64_t reached, int64_t target);
  int64_t step;
};

struct TrainResult {
  Digest job_id{};
  Digest dataset_root{};
  Digest trajectory_root{};  ///< over checkpoint_steps(steps, stride)
  Digest final_state_hash{};
  int64_t steps = 0;         ///< step of the final state (the policy's claimed_steps by default)
  int64_t resumed_from = 0;  ///< step of the state this run started from
  int64_t stride = 0;
  float loss_first = 0, loss_last = 0;  ///< losses of the first and last step run by this call
  double test_accuracy = -1;            ///< mlp, cnn: test-set accuracy; -1 when not evaluated
  double validation_loss = -1;          ///< gpt: mean cross-entropy (nats) on the held-out windows; mse
                                        ///< jobs: the mean squared error on the test split; -1 when
                                        ///< not evaluated or there are none
  double unigram_entropy = -1;          ///< gpt: entropy (nats) of the training targets' byte frequencies,
                                        ///< the loss of the best unigram model; -1 when not evaluated
  double eval_seconds = 0;              ///< wall time of loading the test split and evaluating
  double seconds = 0;                   ///< wall time of the training loop (commitments included)
  double load_seconds = 0;              ///< wall time to read and hash the data sets
  int threads = 1;
  Device device = Device::Cpu;
  int ranks = 1;                          ///< data-parallel ranks (world size)
  double exchange_bytes_per_step = 0;     ///< bytes this rank sent per step in the partials' exchange
  double exchange_seconds = 0;            ///< wall time this rank spent in the exchange (of `seconds`)
  std::vector<Digest> checkpoint_hashes;  ///< state hashes at checkpoint_steps(steps, stride)
  /// Rounding-log jobs, over the steps this call ran: output values rounded, decisions logged (not
  /// "nearest"), the logs' packed bytes (5 decisions per byte) and their zstd files' bytes (0 when no
  /// out_dir). Without rounding-log mode all 0.
  uint64_t rounded_values = 0, logged_decisions = 0, rounding_log_packed_bytes = 0,
           rounding_log_file_bytes = 0;
  /// The loss and a resource sample of every step this call ran (engine/run_log.h); with an out_dir
  /// they are also in its losses.csv and resources.csv (with a resumed run's earlier steps).
  std::vector<LossRecord> losses;
  std::vector<ResourceSample> resources;
};

/// Loads the data, trains the job (or resumes it), writes checkpoints, evaluates. Throws EngineError
/// for bad data, unwritable output or unusable checkpoints. On ranks other than 0 of options.world the
/// result carries no commitments (trajectory_root and hashes stay zero) and no evaluation. With a
/// world of several ranks it is one lockstep region (engine/world.h): when any rank fails, every rank
/// throws RankFailure naming it and its error, and the ranks stay in step for their next collective.
TrainResult run_training(const JobSpec& job, const TrainOptions& options);

}  // namespace tribunal
