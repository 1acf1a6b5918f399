#include "engine/trainer.h"

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>

#include <fmt/format.h>

#include "engine/checkpoint_writer.h"
#include "engine/data_parallel.h"
#include "engine/error.h"
#include "engine/run_dir.h"
#include "protocol/tensor_hash.h"

namespace tribunal {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Checks that the output directory exists (creating it) and is writable, before any training.
void prepare_out_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw EngineError(fmt::format("{}: cannot create output directory: {}", dir.string(), ec.message()));
  const auto probe = dir / ".tribunal-write-test";
  FILE* f = std::fopen(probe.c_str(), "wb");
  if (!f)
    throw EngineError(
        fmt::format("{}: output directory is not writable: {}", dir.string(), std::strerror(errno)));
  std::fclose(f);
  std::filesystem::remove(probe, ec);
}

// The latest checkpoint of this job in dir, or -1.
int64_t latest_checkpoint(const std::filesystem::path& dir, const Digest& id, int64_t limit) {
  int64_t best = -1;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || entry.path().extension() != ".safetensors") continue;
    const CheckpointHeader h = read_checkpoint_header(entry.path());
    if (h.job_id == id && h.step <= limit && h.step > best) best = h.step;
  }
  if (ec) throw EngineError(fmt::format("{}: cannot list checkpoints: {}", dir.string(), ec.message()));
  return best;
}

// The records of DIR's losses.csv and resources.csv of the steps before `from` (a resumed run's).
std::pair<std::vector<LossRecord>, std::vector<ResourceSample>> earlier_run_logs(
    const std::filesystem::path& dir, int64_t from) {
  std::pair<std::vector<LossRecord>, std::vector<ResourceSample>> out;
  for (const LossRecord& x : read_loss_log(loss_log_path(dir)))
    if (x.step < from) out.first.push_back(x);
  for (const ResourceSample& x : read_resource_log(resource_log_path(dir)))
    if (x.step < from) out.second.push_back(x);
  return out;
}

// Writes losses.csv and resources.csv: a resumed run's earlier records (steps before the ones run
// now) followed by this call's, atomically (the appender's lines, whole and in one file each).
void write_run_logs(const std::filesystem::path& dir, const TrainResult& r,
                    std::optional<RunLogAppender>& appender) {
  appender.reset();  // its files are replaced by the same lines
  const int64_t from = r.losses.empty() ? r.resumed_from : r.losses.front().step;
  auto [losses, samples] = earlier_run_logs(dir, from);
  losses.insert(losses.end(), r.losses.begin(), r.losses.end());
  samples.insert(samples.end(), r.resources.begin(), r.resources.end());
  write_loss_log(loss_log_path(dir), losses);
  write_resource_log(resource_log_path(dir), samples);
}

}  // namespace

Trainer::Trainer(const JobSpec& job, const Dataset& train, ThreadPool& pool, StepPolicyPtr policy,
                 World* world, Device device, RoundingOptions rounding, FastOptions fast)
    : job_(job),
      train_(train),
      pool_(pool),
      shape_(data_shape_of(train)),
      job_id_(tribunal::job_id(job, train)),
      sampler_(job.seed, shape_.samples, job.batch_size),
      executor_(pool, false, device),
      policy_(policy ? policy->clone() : std::make_unique<HonestPolicy>()),
      state_(initial_state(job)),
      world_(world),
      shards_(world ? shards_of_rank(job, world->rank(), world->size()) : ShardRun{}),
      rounding_(std::move(rounding)) {
  check_job_against_dataset(job, train);
  if (job_.numerics.mode == NumericsMode::RoundingLog) {
    if (device != Device::Cpu)
      throw EngineError(
          fmt::format("{}: a rounding-log job computes in float64 on the CPU; --device {} is for RepOps "
                      "jobs",
                      job_.source, device_name(device)));
    if (world && world->size() > 1)
      throw EngineError(
          fmt::format("{}: a rounding-log job trains on one rank (each rank would hold only its "
                      "shards' logs); run it without mpirun",
                      job_.source));
    if (!float64_gemm_built(rounding_.gemm))
      throw EngineError(
          fmt::format("this build has no {} float64 GEMM (built: naive)", float64_gemm_name(rounding_.gemm)));
    executor_.set_rounding(
        RoundingRun{&job_.numerics, rounding_.gemm, nullptr, &rounding_log_, {}, rounding_.profile});
  }
  if (job_.numerics.mode == NumericsMode::Fast) {
    if (device != Device::Cpu || (world && world->size() > 1))
      throw EngineError(fmt::format("{}: a fast-mode job trains on one rank on the CPU", job_.source));
    if (!float32_gemm_built(fast.gemm))
      throw EngineError(fmt::format("this build has no {} float32 GEMM", float32_gemm_name(fast.gemm)));
    set_float32_gemm_threads(fast.blas_threads);
    executor_.set_fast(fast.gemm);
  }
  // A step holds only its live values: each node output's buffer is reused once its last reader has
  // run (traced_step keeps them all).
  executor_.set_keep_values(false);
  policy_->check(job_, shape_);
  policy_->initial_state(state_);
}

StepGraph Trainer::step_graph(int64_t t) {
  const std::vector<int64_t> batch = policy_->batch(t, sampler_);
  const GraphAttributes attrs = policy_->graph_attributes(t, job_);
  return build_step_graph(attrs.job ? *attrs.job : job_, shape_, t, batch);
}

void Trainer::replay_to(int64_t s) {
  State saved = std::move(state_);
  state_ = initial_state(job_);
  policy_->initial_state(state_);
  while (state_.step() < s) step();
  state_ = std::move(saved);
}

// Runs graph g over the state; returns the loss the next state records. `before_swap` sees the
// executor with every value of the step still in place; `after_swap` sees it once the next state has
// been taken (Executor::take_next_state), before a cheating policy may replace that state.
template <class Inspect, class Release>
float Trainer::run_step(const StepGraph& g, Inspect before_swap, Release after_swap, const ShardRun& shards) {
  const int64_t t = state_.step();
  // A policy that claims a state other than the nodes' outputs (or learns from them) sees the pre-state.
  std::optional<State> pre;
  if (policy_->begin_step(t, [this](int64_t s) { replay_to(s); })) pre = state_;

  const std::vector<Tensor*> state = state_.pointers();
  const Tensor* data[] = {&train_.inputs, &train_.labels};
  const Executor::NodeHook hook = policy_->node_hook(t, g);
  if (job_.numerics.mode == NumericsMode::RoundingLog) {
    rounding_log_.step = -1;
    RoundingRun run{&job_.numerics, rounding_.gemm, nullptr, &rounding_log_, {}, rounding_.profile};
    if (StepPolicy::RoundingTamper tamper = policy_->rounding_tamper(t)) {
      // A cheater's tampered step is logged afresh with the same tampering, even when replaying its
      // own logs: its float64 values would refuse the tampered log (engine/step_policy.h).
      run.tamper = std::move(tamper);
    } else if (!rounding_.replay_dir.empty()) {
      std::vector<uint64_t> counts;
      for (const Node& node : g.nodes) {
        uint64_t c = 0;
        for (ValueId v : node.outputs) c += static_cast<uint64_t>(g.values[v].shape.numel());
        counts.push_back(c);
      }
      replayed_log_ = read_rounding_log(rounding_log_path(rounding_.replay_dir, t), t, counts);
      run.replay = &replayed_log_;
      run.audit = rounding_.audit;
    }
    executor_.set_rounding(run);
  }
  executor_.run_updating(g, state, data, hook, shards);  // the next state in the state's own storage
  if (job_.numerics.mode == NumericsMode::RoundingLog) rounding_log_.step = t;
  float loss = executor_.value(g.loss)[0];
  before_swap(executor_);
  executor_.take_next_state(g, state);
  after_swap(executor_);

  claimed_ = pre && policy_->claimed_state(t, *pre, state_);
  if (claimed_) loss = state_.tensors.back()[0];  // "loss" is the state's last tensor (engine/step.h)
  return loss;
}

void Trainer::prepare() {
  if (shards_.count >= 0) return;  // a rank of a World: a sharded step graph keeps every value anyway
  const int64_t t = state_.step();
  prepared_.emplace(t, step_graph(t));  // step() runs this graph: the policy is asked once per step
  const Tensor* data[] = {&train_.inputs, &train_.labels};
  executor_.reserve(prepared_->second, state_.pointers(), data);
}

StepGraph Trainer::next_step_graph() {
  const int64_t t = state_.step();
  std::optional<std::pair<int64_t, StepGraph>> prepared = std::exchange(prepared_, std::nullopt);
  return prepared && prepared->first == t ? std::move(prepared->second) : step_graph(t);
}

float Trainer::step() {
  const auto none = [](const Executor&) {};
  const StepGraph g = next_step_graph();
  if (shards_.count < 0) return run_step(g, none, none);
  ShardRun run = shards_;
  run.exchange = [&](Executor& ex) {
    const auto t0 = Clock::now();
    exchanged_bytes_ += exchange_partials(g, ex, *world_, run);
    exchange_seconds_ += since(t0);
  };
  return run_step(g, none, none, run);
}

StepTrace Trainer::traced_step() {
  StepTrace tr;
  const int64_t t = state_.step();
  tr.graph = step_graph(t);
  const StepGraph& g = tr.graph;
  // The step's values are kept without a second copy of its activations: the hashes are taken in
  // place, then each node output is moved out of the executor (Executor::take_value). Only the next
  // state is copied, since the trainer keeps it. Peak memory is one step's values, not two.
  std::vector<char> copy_before_swap(g.values.size(), 0);
  for (size_t i = 0; i < g.state_outputs.size(); ++i)
    if (g.values[g.state_outputs[i]].source != ValueSource::Node) {
      copy_before_swap[g.state_inputs[i]] = 1;  // its storage is overwritten, not swapped
      copy_before_swap[g.state_outputs[i]] = 1;
    }
  const auto hash_values = [&](const Executor& ex) {
    tr.value_hashes.resize(g.values.size());
    tr.values.resize(g.values.size());
    pool_.parallel_for(static_cast<int64_t>(g.values.size()), [&](int64_t v0, int64_t v1) {
      for (int64_t v = v0; v < v1; ++v) {
        const Value& val = g.values[static_cast<size_t>(v)];
        if (val.source == ValueSource::Data) {
          tr.value_hashes[static_cast<size_t>(v)] = train_.root;
          continue;
        }
        const Tensor& t = ex.value(static_cast<ValueId>(v));
        tr.value_hashes[static_cast<size_t>(v)] = tensor_leaf(DType::F32, t.shape().dims(), t.bytes());
        if (copy_before_swap[static_cast<size_t>(v)] && val.source != ValueSource::Constant)
          tr.values[static_cast<size_t>(v)] = t;
      }
    });
  };
  const auto keep_values = [&](Executor& ex) {
    std::vector<char> state_output(g.values.size(), 0);
    for (ValueId v : g.state_outputs) state_output[v] = 1;
    for (size_t i = 0; i < g.state_outputs.size(); ++i) {
      const ValueId out = g.state_outputs[i];
      if (g.values[out].source != ValueSource::Node) continue;
      tr.values[out] = state_.tensors[i];                 // the next state, which the trainer keeps
      tr.values[g.state_inputs[i]] = ex.take_value(out);  // the state it replaced (take_next_state)
    }
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].source == ValueSource::Node && !state_output[v])
        tr.values[v] = ex.take_value(static_cast<ValueId>(v));
  };
  // Every value is hashed into the records and taken into the trace: the executor keeps them all.
  struct KeepValues {
    Executor& executor;
    explicit KeepValues(Executor& ex) : executor(ex) { executor.set_keep_values(true); }
    ~KeepValues() { executor.set_keep_values(false); }
    KeepValues(const KeepValues&) = delete;
    KeepValues& operator=(const KeepValues&) = delete;
  };
  {
    const KeepValues keep(executor_);
    run_step(g, hash_values, keep_values);
  }
  // Records that name the job's attributes rather than those the step ran with (a hidden change).
  std::optional<StepGraph> claimed;
  if (policy_->graph_attributes(t, job_).records_name_job)
    claimed.emplace(build_step_graph(job_, shape_, t, policy_->batch(t, sampler_)));
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    NodeRecord r;
    r.op = static_cast<uint8_t>(node.op);
    const std::vector<std::byte> attrs = encode_attrs(claimed ? claimed->nodes.at(n).attrs : node.attrs);
    r.attrs.resize(attrs.size());
    std::memcpy(r.attrs.data(), attrs.data(), attrs.size());
    for (ValueId v : node.inputs) r.inputs.push_back(tr.value_hashes[v]);
    for (ValueId v : node.outputs) r.outputs.push_back(tr.value_hashes[v]);
    // Rounding-log mode: the node's log is committed as one more output (docs/protocol.md).
    if (const StepRoundingLog* log = rounding_log()) r.outputs.push_back(rounding_log_leaf(log->nodes.at(n)));
    tr.records.push_back(std::move(r));
  }
  if (const StepRoundingLog* log = rounding_log()) tr.rounding_log = *log;
  for (ValueId v : g.state_inputs) tr.pre_state.push_back(tr.value_hashes[v]);
  if (claimed_) {  // the claimed next state is not made of the node outputs
    for (const Tensor& x : state_.tensors)
      tr.post_state.push_back(tensor_leaf(DType::F32, x.shape().dims(), x.bytes()));
  } else {
    for (ValueId v : g.state_outputs) tr.post_state.push_back(tr.value_hashes[v]);
  }
  return tr;
}

double evaluate_accuracy(const JobSpec& job, const State& state, const Dataset& test, ThreadPool& pool) {
  const DataShape shape = data_shape_of(test);
  const int64_t chunk = 1000;
  Executor executor(pool);
  executor.set_keep_values(false);  // only the logits or loss are read
  const std::vector<const Tensor*> params = eval_state_inputs(job, state);
  int64_t correct = 0;
  for (int64_t r0 = 0; r0 < shape.samples; r0 += chunk) {
    const int64_t rows = std::min(chunk, shape.samples - r0);
    const StepGraph g = build_eval_graph(job, shape, rows);
    Tensor x(Shape{rows, shape.features}, std::span<const float>(test.inputs.data() + r0 * shape.features,
                                                                 static_cast<size_t>(rows * shape.features)));
    const Tensor* data[] = {&x};
    executor.run(g, params, data);
    const Tensor& logits = executor.value(g.loss);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t arg = 0;
      for (int64_t c = 1; c < shape.classes; ++c)
        if (logits[r * shape.classes + c] > logits[r * shape.classes + arg]) arg = c;
      correct += static_cast<float>(arg) == test.labels[r0 + r];
    }
  }
  return static_cast<double>(correct) / static_cast<double>(shape.samples);
}

double evaluate_loss(const JobSpec& job, const State& state, const Dataset& data, ThreadPool& pool) {
  const DataShape shape = data_shape_of(data);
  if (shape.samples == 0)
    throw EngineError(fmt::format("{}: no samples to evaluate the loss on", job.source));
  // About 8192 predictions per chunk: the attention scores of a chunk stay a few MiB.
  const int64_t per_row = std::max<int64_t>(shape.label_width, 1);
  const int64_t chunk = std::max<int64_t>(1, 8192 / per_row);
  Executor executor(pool);
  executor.set_keep_values(false);  // only the logits or loss are read
  const std::vector<const Tensor*> params = eval_state_inputs(job, state);
  double total = 0.0;
  std::optional<StepGraph> graph;
  for (int64_t r0 = 0; r0 < shape.samples; r0 += chunk) {
    const int64_t rows = std::min(chunk, shape.samples - r0);
    if (!graph || graph->values.at(graph->data_inputs[0]).shape[0] != rows)
      graph = build_eval_loss_graph(job, shape, rows);
    Tensor x(Shape{rows, shape.features}, std::span<const float>(data.inputs.data() + r0 * shape.features,
                                                                 static_cast<size_t>(rows * shape.features)));
    const Shape label_shape = shape.label_width > 0 ? Shape{rows, shape.label_width} : Shape{rows};
    Tensor y(label_shape,
             std::span<const float>(data.labels.data() + r0 * per_row, static_cast<size_t>(rows * per_row)));
    const Tensor* inputs[] = {&x, &y};
    executor.run(*graph, params, inputs);
    total += static_cast<double>(executor.value(graph->loss)[0]) * static_cast<double>(rows);
  }
  return total / static_cast<double>(shape.samples);
}

TrainingStopped::TrainingStopped(int64_t reached, int64_t target)
    : EngineError(fmt::format("training stopped at step {} of {}", reached, target)), step(reached) {}

namespace {

// run_training on one rank; run_training makes it a lockstep region of the ranks.
TrainResult train_job(const JobSpec& job, const TrainOptions& options) {
  // A cheater claiming another trajectory length trains that many steps (engine/step_policy.h).
  const int64_t claimed = options.policy ? options.policy->claimed_steps(job) : job.steps;
  const int64_t target = options.stop_at < 0 ? claimed : options.stop_at;
  if (target > claimed)
    throw EngineError(fmt::format("--steps {} exceeds the job's {} steps", target, claimed));
  if (options.resume && options.out_dir.empty()) throw EngineError("resuming needs an output directory");
  SoloWorld solo;
  World& world = options.world ? *options.world : solo;
  const bool lead = world.rank() == 0;  // rank 0 alone writes, resumes, reports and evaluates
  if (lead && !options.out_dir.empty()) prepare_out_dir(options.out_dir);

  require_device(options.device);
  ThreadPool pool(options.threads);
  TrainResult result;
  result.threads = options.threads;
  result.device = options.device;
  result.ranks = world.size();
  result.stride = job.stride;

  auto t0 = Clock::now();
  std::optional<Dataset> loaded;
  if (!options.train) loaded = load_dataset(job, Split::Train, pool);
  const Dataset& train = options.train ? *options.train : *loaded;
  result.load_seconds = since(t0);
  Trainer trainer(job, train, pool, options.policy, &world, options.device, options.rounding, options.fast);
  if (world.size() > 1) check_same_job(world, trainer.job_id());
  result.job_id = trainer.job_id();
  result.dataset_root = train.root;
  // A run directory holds one job's run: another job's checkpoints there would mix two runs (and
  // their logs would be overwritten), so the run is refused before a step is taken.
  if (lead && !options.out_dir.empty()) require_run_of_job(options.out_dir, trainer.job_id(), "train --out");

  // State hashes by step: every checkpoint written or read. The trajectory's leaves are picked from
  // here at the end, so a resumed run commits exactly what a straight run would.
  std::map<int64_t, Digest> committed;
  if (options.resume && lead) {
    const int64_t from = latest_checkpoint(options.out_dir, trainer.job_id(), target);
    if (from < 0)
      throw EngineError(fmt::format("{}: no checkpoint of job {} to resume from", options.out_dir.string(),
                                    to_hex(trainer.job_id())));
    const auto path = checkpoint_path(options.out_dir, from);
    trainer.set_state(load_checkpoint(path, job, trainer.job_id(), pool));
    committed[from] = read_checkpoint_header(path).state_hash;
    for (uint64_t c64 : checkpoint_steps(static_cast<uint64_t>(from), static_cast<uint64_t>(job.stride))) {
      const auto c = static_cast<int64_t>(c64);
      if (c == from) break;
      const auto earlier = checkpoint_path(options.out_dir, c);
      const CheckpointHeader h = read_checkpoint_header(earlier);
      if (h.job_id != trainer.job_id() || h.step != c)
        throw EngineError(
            fmt::format("{}: cannot resume: checkpoint of another job or step", earlier.string()));
      committed[c] = h.state_hash;
    }
  }
  if (options.resume && world.size() > 1) broadcast_state(world, trainer.state());
  result.resumed_from = trainer.state().step();

  // The run logs grow by a line per step while it trains (engine/run_log.h), a resumed run's first.
  std::optional<RunLogAppender> appender;
  if (lead && !options.out_dir.empty()) {
    const auto [losses, samples] = earlier_run_logs(options.out_dir, result.resumed_from);
    appender.emplace(options.out_dir, losses, samples);
  }
  std::optional<CheckpointWriter> writer;
  const bool commit = options.commit && lead;
  if (commit) writer.emplace(job, trainer.job_id(), options.out_dir);
  t0 = Clock::now();
  int64_t t = trainer.state().step();
  if (writer && !options.resume) writer->submit(trainer.state(), &pool);
  if (t < target) trainer.prepare();  // the first step's memory taken now, as every later step finds it
  const std::atomic<bool>* stop = world.size() == 1 ? options.stop : nullptr;
  for (bool first = true; t < target; first = false) {
    if (stop && stop->load()) {
      if (writer) writer->finish();  // what was queued is written whole; nothing half-done counts
      if (lead && !options.out_dir.empty()) write_run_logs(options.out_dir, result, appender);
      throw TrainingStopped(t, target);
    }
    const StepMeter meter(t);
    const float loss = trainer.step();
    result.resources.push_back(meter.done(options.threads));
    result.losses.push_back({t, loss});
    if (appender) appender->append(result.losses.back(), result.resources.back());
    if (const StepRoundingLog* log = trainer.rounding_log()) {
      for (const RoundingLog& node : log->nodes) {
        result.rounded_values += node.count;
        result.logged_decisions += count_logged(node);
        result.rounding_log_packed_bytes += node.packed.size();
      }
      if (lead && !options.out_dir.empty())
        result.rounding_log_file_bytes +=
            write_rounding_log(rounding_log_path(options.out_dir, t), *log, &pool);
    }
    ++t;
    if (first) result.loss_first = loss;
    result.loss_last = loss;
    if (writer && (t % job.stride == 0 || t == target)) writer->submit(trainer.state(), &pool);
    if (options.on_step && lead) options.on_step(t, target, loss);
  }
  if (writer) committed.merge(writer->finish());
  result.seconds = since(t0);
  if (lead && !options.out_dir.empty()) write_run_logs(options.out_dir, result, appender);
  result.steps = t;
  result.exchange_seconds = trainer.exchange_seconds();
  if (t > result.resumed_from)
    result.exchange_bytes_per_step =
        static_cast<double>(trainer.exchanged_bytes()) / static_cast<double>(t - result.resumed_from);

  if (commit) {
    // A prefix run (stop at t < T) commits like a trajectory of T = t: its last state is the last leaf.
    for (uint64_t c : checkpoint_steps(static_cast<uint64_t>(t), static_cast<uint64_t>(job.stride)))
      result.checkpoint_hashes.push_back(committed.at(static_cast<int64_t>(c)));
    result.trajectory_root = trajectory_root(result.checkpoint_hashes);
    result.final_state_hash = committed.at(t);
  }
  if (options.evaluate && lead) {
    const auto t_eval = Clock::now();
    const Dataset test = load_dataset(job, Split::Test, pool);
    if (label_width(job) > 0) {  // next-token prediction or mse: the held-out windows' or test split's loss
      result.unigram_entropy = train.unigram_entropy;
      if (test.samples() > 0) result.validation_loss = evaluate_loss(job, trainer.state(), test, pool);
    } else if (test.samples() > 0) {  // a tensors data set may have no test split
      result.test_accuracy = evaluate_accuracy(job, trainer.state(), test, pool);
    }
    result.eval_seconds = since(t_eval);
  }
  return result;
}

}  // namespace

TrainResult run_training(const JobSpec& job, const TrainOptions& options) {
  // Every rank's failure — rank 0 writing a checkpoint to a full disk as much as a follower's — ends
  // the job on every rank with that error (engine/world.h): none waits in a collective for a rank
  // that threw.
  SoloWorld solo;
  return lockstep(options.world ? *options.world : solo, [&] { return train_job(job, options); });
}

}  // namespace tribunal
