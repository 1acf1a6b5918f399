// Runs a StepGraph node by node with the RepOps kernels. Node outputs live in buffers of the executor's
// pool, reused within a step (a value's buffer is free again once its last reader has run) and across
// steps (no allocation after the first step of a graph shape): docs/performance.md "Step memory".
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/numerics.h"
#include "engine/rounding_logs.h"
#include "engine/tensor_pool.h"
#include "ops/float32_gemm.h"
#include "ops/float64/float64.h"
#include "ops/thread_pool.h"

namespace tribunal {

/// Which shards of a sharded step graph (StepGraph::node_shards) this process computes, for data-
/// parallel training with equal blocks of shards per rank. Run first: the nodes within this block
/// (its shards' nodes and the tree combines of its shards alone); then `exchange`, which must fill the
/// values those nodes produce for every other block (exchange_partials, engine/data_parallel.h); then
/// the nodes that span several blocks or every shard. Nodes within another block are skipped. The
/// default computes every shard (one block). With at least as many shards in the block as threads,
/// the shards run side by side, one thread each (the kernels' bits do not depend on threads).
struct ShardRun {
  int64_t first = 0;   ///< the first shard computed here
  int64_t count = -1;  ///< how many shards from `first`, the size of every rank's block (-1: all)
  /// Called once, between the two passes: writes the other blocks' values (Executor::partial).
  std::function<void(class Executor&)> exchange;

  /// Whether `span` lies within one block of `count` shards (the rank that owns the block computes it).
  bool within_a_block(const ShardSpan& span) const {
    return span.first >= 0 && span.first / count == (span.first + span.count - 1) / count;
  }
  /// Whether `span` lies within this process's block.
  bool within_mine(const ShardSpan& span) const {
    return span.first >= first && span.first + span.count <= first + count;
  }
};

/// Where rounding-log steps' time goes (RoundingRun::profile; bench_rounding_log), in seconds summed
/// over the nodes run, per op kind: the float64 op (run_float64), its rounding quanta
/// (rounding_quanta), and the rounding of its outputs to float32 with the log (or by a replayed log).
/// Safe to share between the threads of shards run side by side.
struct RoundingProfile {
  enum Part : uint8_t { Float64, Quanta, Round, kParts };
  std::array<std::array<double, kParts>, kOpKindCount> seconds{};

  void add(OpKind op, Part part, double s) {
    const std::lock_guard<std::mutex> lock(mutex_);
    seconds[static_cast<size_t>(op)][part] += s;
  }

 private:
  std::mutex mutex_;
};

/// Rounding-log mode (docs/numerics.md "Rounding-log mode"): every node computes in float64 (`gemm`
/// for its contractions, ops/float64/float64.h) and rounds its outputs to float32 with its op's τ,
/// logging the decisions near a boundary (ops/rounding_log.h).
struct RoundingRun {
  const NumericsSpec* numerics = nullptr;  ///< τ per op kind; must outlive the run
  Float64Gemm gemm = Float64Gemm::Naive;
  const StepRoundingLog* replay = nullptr;  ///< round by these logs (another trainer's) instead
  StepRoundingLog* record = nullptr;        ///< receives every node's log (the replayed ones when replaying)
  /// Not replaying: called after node `n` is rounded with its float64 outputs, its log and its float32
  /// outputs, which it may rewrite (a cheater's step policy, engine/step_policy.h), with the op's τ and
  /// the node's rounding quanta.
  std::function<void(size_t n, std::span<const std::vector<double>> wide, RoundingLog& log,
                     std::span<Tensor* const> out, double tau, std::span<const std::vector<double>> quanta)>
      tamper;
  RoundingProfile* profile = nullptr;  ///< receives the nodes' times when set
  /// Replaying as an auditor (RoundingOptions::audit, engine/trainer.h): a direction beyond 2τ of a
  /// boundary at this trainer's value rounds to nearest instead of refusing the log.
  bool audit = false;
};

/// A replayed rounding log that this trainer's float64 values do not allow (rounding_allowed): the log
/// is not the step's — a cheat, or two trainers' kernels differing by more than τ/2.
class RoundingLogRefused : public EngineError {
 public:
  RoundingLogRefused(size_t node, uint64_t value, const std::string& what)
      : EngineError(what), node(node), value(value) {}
  size_t node;     ///< the node of the step graph
  uint64_t value;  ///< the index of the decision in the node's log
};

class Executor {
 public:
  /// `reference` selects the scalar reference kernels instead of the fast ones (tests); otherwise the
  /// nodes run on `device` (engine/device.h: the CPU's fast kernels, CUDA, or its emulation).
  explicit Executor(ThreadPool& pool, bool reference = false, Device device = Device::Cpu)
      : pool_(pool), reference_(reference), device_(device) {}

  /// Runs the following steps in rounding-log mode (`run` set) or with the RepOps kernels (nullopt,
  /// the default). Replay logs must have one log per node of the graph run.
  void set_rounding(std::optional<RoundingRun> run) { rounding_ = run; }

  /// Fast mode (engine/numerics.h NumericsMode::Fast): Linear and Matmul nodes run through this float32
  /// GEMM (ops/float32_gemm.h), every other node through its RepOps kernel; nullopt (the default): RepOps.
  void set_fast(std::optional<Float32Gemm> gemm) { fast_ = gemm; }

  /// Called after node `index` ran, with its output tensors (may modify them: fault injection).
  using NodeHook = std::function<void(size_t index, std::span<Tensor* const> outputs)>;

  /// Runs every node of `g`. `state[i]` binds g.state_inputs[i], `data[i]` binds g.data_inputs[i];
  /// both must outlive the next call. Throws OpError from a kernel (e.g. a bad label).
  /// `shards` selects the shards computed here (sharded graphs only). `after_node` may then be called
  /// from several threads at once, for nodes of different shards.
  void run(const StepGraph& g, std::span<const Tensor* const> state, std::span<const Tensor* const> data,
           const NodeHook& after_node = {}, const ShardRun& shards = {});

  /// As run(), and the state is consumed where it can be updated in place (what Trainer::step runs):
  /// with keep_values() false, on the CPU, without rounding logs, a state tensor whose last reader is
  /// an optimizer node that writes its next value (OpInfo::in_place; g.state_outputs[i] for state[i])
  /// gives its storage to that output, so the step allocates and first-touches no memory for the next
  /// parameters and optimizer state (AdamW: 12 bytes per parameter; docs/performance.md, "Step
  /// memory and step 0"). The same bits as run(). Until take_next_state, such a `state[i]` is empty and
  /// value() of its state input answers the next value; after an exception, the state is unspecified
  /// (partly updated or empty: resume from a checkpoint).
  void run_updating(const StepGraph& g, std::span<Tensor* const> state, std::span<const Tensor* const> data,
                    const NodeHook& after_node = {}, const ShardRun& shards = {});

  /// Takes, and writes once, every buffer a run_updating(g, state, data) would take from the pool,
  /// without running a node, and gives them back to the pool for the next run: a training run's first
  /// step then finds its memory already backed, as every later step does (fresh memory cost 1.4 s per
  /// GB on a VM whose host backs each page on its first write: docs/performance.md "Step memory and
  /// step 0"), and a step that does not fit in memory fails here, before training. The state is read
  /// for its shapes only; nothing is computed or updated, and value() answers nothing meaningful until
  /// the next run. Does nothing for a sharded graph (which keeps every value), with keep_values() true,
  /// or in rounding-log mode (whose float64 working values are not the pool's).
  void reserve(const StepGraph& g, std::span<Tensor* const> state, std::span<const Tensor* const> data);

  /// Whether run() keeps every value until the next run (true, the default: value() and take_value()
  /// answer for any value afterwards — traced steps, tests), or releases each node output's buffer to
  /// the pool as soon as the last node reading it has run (false: a step holds its live values alone,
  /// what Trainer::step runs with). Released or not, the graph's loss and next state are kept. A sharded
  /// graph always keeps every value (its shards run side by side and its exchange reads partials).
  void set_keep_values(bool keep) { keep_values_ = keep; }
  bool keep_values() const { return keep_values_; }

  /// The value's tensor after run() (state/data/constant values resolve to what they are bound to).
  /// Throws std::logic_error for a node output released during the run (set_keep_values(false)) or
  /// moved out (take_value).
  const Tensor& value(ValueId v) const {
    if (!bound_.at(v)) throw_released(v);
    return *bound_[v];
  }

  /// Bytes of node outputs the last run() held at once: its peak working set (float32 elements of the
  /// buffers in use, capacity counted).
  uint64_t peak_live_bytes() const { return peak_live_bytes_; }
  /// Bytes the executor holds now: the live node outputs and its pool of free buffers.
  uint64_t held_bytes() const { return live_bytes_ + free_.free_bytes(); }
  /// Bytes of the buffers the executor has allocated so far (fresh memory, first written by it).
  uint64_t made_bytes() const { return free_.made_bytes(); }

  /// The storage of node output `v` during ShardRun::exchange, for writing a value received from
  /// another rank (already shaped).
  Tensor& partial(ValueId v) { return slots_.at(v); }

  /// Moves the tensors of g.state_outputs into `state` (swapping storage, no copy for node outputs).
  /// Afterwards the slot of a node-computed state output holds the state tensor it replaced (an empty
  /// one where run_updating updated it in place).
  void take_next_state(const StepGraph& g, std::span<Tensor* const> state);

  /// Moves node output `v`'s storage out of the executor (no copy), leaving the slot empty; the next
  /// run() takes another buffer for it. For keeping a step's values past the step (Trainer::traced_step)
  /// without holding them twice. Throws std::out_of_range for a value that is not a node output of the last
  /// run.
  Tensor take_value(ValueId v);

 private:
  static void round_audited(std::span<const std::vector<double>> wide, const RoundingLog& log,
                            std::span<Tensor* const> out, double tau,
                            std::span<const std::vector<double>> quanta);
  /// Node n in rounding-log mode: its float64 kernel and its rounding split over `pool` (the same bits
  /// for any thread count).
  void run_rounded(size_t n, const Node& node, std::span<const Tensor* const> in,
                   std::span<Tensor* const> out, ThreadPool& pool);
  [[noreturn]] static void throw_released(ValueId v);
  /// Fills in_place_ for run_updating (empty: nothing updated in place); `last` from last_uses, empty
  /// when every value is kept.
  void plan_in_place(const StepGraph& g, const std::vector<size_t>& last);
  /// Binds node output `v` to the storage of `state` (moved in), and the state input `input` to it.
  void take_state(ValueId v, ValueId input, Tensor& state);
  /// Binds node output `v` to a buffer of the pool (TensorPool::take) or a new one, first touched on
  /// `threads`.
  void acquire(ValueId v, const Shape& shape, ThreadPool& threads);
  /// Returns node output `v`'s buffer to the pool, stamped with this run; value(v) throws afterwards.
  void release(ValueId v);

  ThreadPool& pool_;
  bool reference_;
  Device device_;
  std::optional<RoundingRun> rounding_;
  std::optional<Float32Gemm> fast_;
  bool keep_values_ = true;
  bool dry_ = false;              // reserve(): nodes take and release buffers, none runs
  std::vector<Tensor> slots_;     // storage of node outputs, by value id
  std::vector<size_t> capacity_;  // elements of slots_[v]'s buffer; 0: none
  TensorPool free_;  // the free buffers; those idle since before the last run are freed at a run's start
  uint64_t runs_ = 0, live_bytes_ = 0, peak_live_bytes_ = 0;
  std::vector<const Tensor*> bound_;   // every value's tensor, by value id
  std::span<Tensor* const> updating_;  // run_updating's state, during the run; empty otherwise
  std::vector<int64_t> in_place_;      // by value id: the state index whose storage it takes, or −1
  std::vector<std::unique_ptr<ThreadPool>> shard_pools_;  // one-thread pools of shards run side by side
};

}  // namespace tribunal
