// Rounding-log mode against RepOps, in the same run (docs/performance.md "Rounding-log mode"). Prints
// one JSON object.
// Usage: bench_rounding_log [--job FILE]... [--steps N] [--threads K] [--no-compare] [--no-referee]
//
// For each job (default: the Fashion-MNIST MLP and CNN and the GPT on text, scenarios/jobs/) the first N
// steps run four times from the initial state:
//  - RepOps (the job as written): the baseline step time;
//  - rounding-log mode with OpenBLAS's DGEMM ("trainer"), its logs written to a temporary directory:
//    per step the values rounded, the decisions logged, the packed and the file (zstd) bytes of the logs,
//    against the model's parameter bytes, and the step time (including the log file);
//  - rounding-log mode with the naive float64 loop, rounding its own values ("naive, own logs");
//  - the naive loop replaying the trainer's logs ("naive, replayed").
// The four runs interleave step by step (RepOps step t, then the trainer's, the naive loop's, the
// replay's), so that a load shared with other work falls on each alike; openblas_over_repops_by_step
// gives each step's ratio to the RepOps step just before it.
// The replay must reach the trainer's state bit for bit (replay_matches); whether the naive loop's
// own rounding does (own_matches) depends on whether a value straddled a rounding boundary between the
// two GEMMs. Step times are medians; the machine's load, CPU and OpenBLAS core type are recorded.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "bench/bench_stats.h"
#include "bench/cpu_model.h"
#include "engine/cost.h"
#include "engine/dataset.h"
#include "engine/step.h"
#include "engine/trainer.h"

namespace {

using namespace tribunal;
using Clock = std::chrono::steady_clock;

struct Run {
  double step_s = 0;
  uint64_t values = 0, logged = 0, packed_bytes = 0, file_bytes = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_op;  // op name → (values, logged)
  Digest state{};
  std::vector<uint8_t> leaves;               // every node's rounding_log_leaf, step by step
  double log_write_s = 0;                    // writing the log files, per step
  std::unique_ptr<RoundingProfile> profile;  // the nodes' times, all steps
};

OpKind op_named(const std::string& name) {
  size_t k = 0;
  while (k < kOpKindCount && name != op_info(static_cast<OpKind>(k)).name) ++k;
  return static_cast<OpKind>(k);
}

// The float32 spacing (gap between the two float32 neighbours) at x.
double spacing(double x) {
  const float f = std::fabs(static_cast<float>(x));
  return static_cast<double>(std::nextafter(f, std::numeric_limits<float>::infinity())) -
         static_cast<double>(f);
}

// How far the two float64 GEMMs' results lie apart on step 0 of a rounding-log job, per op kind: each
// node of the step runs on the same inputs (the step's own values) with OpenBLAS and with the naive
// loop. "differing": values whose float64 bits differ; "max_spacings": the largest difference in units
// of the float32 spacing; "straddles": values the two would round to different float32 values;
// "expected_straddles": the sum of the differences in spacings, the expected number of straddles
// per step when the values' positions between float32 neighbours are uniform. With the node's rounding
// quantum q (ops/float64/float64.h): "max_steps", the largest difference in units of the grid step
// actually used (max(q, float32 spacing)), which τ/2 must cover; "max_over_quantum", the largest
// difference over q alone (the margin the job's quantum_bits leaves); "coarsened": values whose nearest
// grid value is not their nearest float32 (the precision the quantum costs), and
// "max_coarsened_relative", the largest such change relative to the value; "coarsened_beyond_float32":
// those among them whose grid value lies farther from the float64 value than the RepOps float32
// kernel's own result on the same inputs does (the quantum costs more than computing in float32).
nlohmann::json compare_gemms(const JobSpec& job, const Dataset& train, ThreadPool& pool) {
  Trainer trainer(job, train, pool, {}, nullptr, Device::Cpu, {Float64Gemm::OpenBlas, {}});
  const StepTrace tr = trainer.traced_step();
  const StepGraph& g = tr.graph;
  struct Tally {
    uint64_t values = 0, differing = 0, straddles = 0, coarsened = 0, coarsened_beyond_float32 = 0;
    double max_spacings = 0, expected_straddles = 0, max_steps = 0, max_over_quantum = 0,
           max_coarsened_relative = 0;
  };
  std::map<std::string, Tally> tally;
  for (const Node& node : g.nodes) {
    std::vector<const Tensor*> in;
    for (ValueId v : node.inputs) {
      const Value& val = g.values[v];
      if (val.source == ValueSource::Data)
        in.push_back(val.index == 0 ? &train.inputs : &train.labels);
      else if (val.source == ValueSource::Constant)
        in.push_back(&g.constants[val.index]);
      else
        in.push_back(&tr.values[v]);
    }
    std::vector<std::vector<double>> a(node.outputs.size()), b(node.outputs.size());
    run_float64(node.op, node.attrs, in, a, Float64Gemm::OpenBlas);
    run_float64(node.op, node.attrs, in, b, Float64Gemm::Naive);
    Tally& t = tally[op_info(node.op).name];
    std::vector<std::vector<double>> quanta(node.outputs.size());
    std::vector<Tensor> ref;  // the RepOps float32 result, for the gemm ops (those with quanta)
    if (rounding_quanta(node.op, node.attrs, in, quanta, job.numerics.quantum_bits)) {
      std::vector<Tensor*> ref_out;
      ref.reserve(node.outputs.size());
      for (ValueId v : node.outputs) ref_out.push_back(&ref.emplace_back(g.values[v].shape));
      run_reference(node.op, node.attrs, in, ref_out);
    }
    for (size_t i = 0; i < a.size(); ++i)
      for (size_t e = 0; e < a[i].size(); ++e) {
        ++t.values;
        const double q = quantum_at(quanta, i, e);
        const float on_grid = round_replayed(a[i][e], Rounding::Nearest, q);
        if (on_grid != static_cast<float>(a[i][e]) && std::isfinite(a[i][e])) {
          ++t.coarsened;
          t.coarsened_beyond_float32 += std::fabs(on_grid - a[i][e]) > std::fabs(ref[i][e] - a[i][e]);
          t.max_coarsened_relative =
              std::max(t.max_coarsened_relative, std::fabs(on_grid - a[i][e]) / std::fabs(a[i][e]));
        }
        if (a[i][e] == b[i][e]) continue;
        ++t.differing;
        const double diff = std::fabs(a[i][e] - b[i][e]);
        const double d = diff / spacing(a[i][e]);
        t.max_spacings = std::max(t.max_spacings, d);
        t.max_steps = std::max(t.max_steps, diff / std::max(q, spacing(a[i][e])));
        if (q > 0) t.max_over_quantum = std::max(t.max_over_quantum, diff / q);
        t.expected_straddles += std::min(d, 1.0);  // a midpoint falls between them with probability d
        t.straddles += static_cast<float>(a[i][e]) != static_cast<float>(b[i][e]);
      }
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [op, t] : tally)
    out[op] = {{"values", t.values},
               {"differing", t.differing},
               {"max_spacings", t.max_spacings},
               {"straddles", t.straddles},
               {"expected_straddles", t.expected_straddles},
               {"max_steps", t.max_steps},
               {"max_over_quantum", t.max_over_quantum},
               {"coarsened", t.coarsened},
               {"max_coarsened_relative", t.max_coarsened_relative},
               {"coarsened_beyond_float32", t.coarsened_beyond_float32}};
  return out;
}

// Where a rounding-log run's step time goes, per step (means over the steps; the step time is a
// median): the float64 ops, split into the gemm ops (those with rounding quanta) and the rest, the
// quanta, the rounding with its log, writing the log file, and the rest of the step (the graph's
// bookkeeping, hashing nothing: what step() does besides the nodes); per op kind the three parts.
nlohmann::json breakdown(const Run& r, int steps) {
  double gemm = 0, other = 0, quanta = 0, round = 0;
  nlohmann::json by_op = nlohmann::json::object();
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const auto& s = r.profile->seconds[k];
    if (s[RoundingProfile::Float64] + s[RoundingProfile::Quanta] + s[RoundingProfile::Round] == 0) continue;
    const OpInfo& info = op_info(static_cast<OpKind>(k));
    (info.quanta ? gemm : other) += s[RoundingProfile::Float64] / steps;
    quanta += s[RoundingProfile::Quanta] / steps;
    round += s[RoundingProfile::Round] / steps;
    by_op[info.name] = {{"float64_s", s[RoundingProfile::Float64] / steps},
                        {"quanta_s", s[RoundingProfile::Quanta] / steps},
                        {"round_s", s[RoundingProfile::Round] / steps}};
  }
  return {{"float64_gemm_ops_s", gemm},
          {"float64_other_ops_s", other},
          {"quanta_s", quanta},
          {"round_and_log_s", round},
          {"log_file_s", r.log_write_s},
          {"rest_s", r.step_s - gemm - other - quanta - round - r.log_write_s},
          {"by_op", by_op}};
}

// The referee's re-execution of one node as dispute/job_oracle.cpp does it, in a forked child so that
// its peak resident memory is its own: the inputs copied from the step's values (what the referee
// receives) and the outputs; RepOps: the fast kernel on one thread; rounding-log: the float64 op with
// the default GEMM, the quanta, and both parties' logs (copies of the trainer's) replayed. CPU: the
// least thread CPU time of 3 runs; memory: the rise of the child's peak resident set (with its large
// allocations mapped afresh).
struct Reexec {
  double cpu_s = 0;
  uint64_t peak_bytes = 0;
};

template <class F>
Reexec in_child(F f) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    // Allocations above 128 KiB mapped afresh (glibc's threshold would have grown with the trainers'
    // frees, and the heap's free memory, already resident, would hide the node's).
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    rusage r0{}, r1{};
    getrusage(RUSAGE_SELF, &r0);
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < 3; ++i) {
      timespec a{}, b{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
      f();
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
      best = std::min(
          best, static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec));
    }
    getrusage(RUSAGE_SELF, &r1);
    const Reexec r{best, static_cast<uint64_t>(r1.ru_maxrss - r0.ru_maxrss) * 1024};
    if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  Reexec r;
  const bool got = read(fds[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  if (!got) throw std::runtime_error("re-execution child failed");
  return r;
}

// Per class (contractions, other ops), the step's heaviest node by node_work (nodes that read the data
// set excepted), re-executed by the referee in both modes: CPU and memory, their ratios, and the
// bound's (engine/cost.h: node_reexecution_work's factor, node_memory in rounding-log mode).
nlohmann::json referee_costs(const JobSpec& rlog, const Dataset& train, ThreadPool& pool) {
  Trainer trainer(rlog, train, pool, {}, nullptr, Device::Cpu, {default_float64_gemm(), {}});
  const StepTrace tr = trainer.traced_step();
  const StepGraph& g = tr.graph;
  size_t best[2] = {g.nodes.size(), g.nodes.size()};
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    bool data = false;
    for (ValueId v : g.nodes[n].inputs) data = data || g.values[v].source == ValueSource::Data;
    if (data) continue;
    const int cls = op_info(g.nodes[n].op).fma_chain != nullptr ? 0 : 1;
    if (best[cls] == g.nodes.size() || node_work(g, g.nodes[n]) > node_work(g, g.nodes[best[cls]]))
      best[cls] = n;
  }
  nlohmann::json out = nlohmann::json::object();
  for (int cls = 0; cls < 2; ++cls) {
    if (best[cls] == g.nodes.size()) continue;
    const Node& node = g.nodes[best[cls]];
    std::vector<const Tensor*> given;
    for (ValueId v : node.inputs)
      given.push_back(g.values[v].source == ValueSource::Constant ? &g.constants[g.values[v].index]
                                                                  : &tr.values[v]);
    const RoundingLog& log = tr.rounding_log.nodes[best[cls]];
    const auto reexecute = [&](bool rounding) {
      std::vector<Tensor> owned;
      owned.reserve(given.size());
      std::vector<const Tensor*> in;
      for (const Tensor* t : given) in.push_back(&owned.emplace_back(t->shape(), t->values()));
      std::vector<Tensor> outputs;
      outputs.reserve(node.outputs.size());
      std::vector<Tensor*> out;
      for (ValueId v : node.outputs) out.push_back(&outputs.emplace_back(g.values[v].shape));
      if (!rounding) {
        ThreadPool one(1);
        run_fast(node.op, node.attrs, in, out, one);
        return;
      }
      const std::vector<uint8_t> logs[2] = {log.packed, log.packed};
      std::vector<std::vector<double>> wide(out.size()), quanta(out.size());
      run_float64(node.op, node.attrs, in, wide, default_float64_gemm());
      rounding_quanta(node.op, node.attrs, in, quanta, rlog.numerics.quantum_bits);
      for (const std::vector<uint8_t>& packed : logs)
        if (round_outputs_replayed(wide, RoundingLog{log.count, packed}, out, rlog.numerics.tau_of(node.op),
                                   quanta))
          throw std::runtime_error("the trainer's log does not replay");
    };
    const Reexec repops = in_child([&] { reexecute(false); });
    const Reexec rounding = in_child([&] { reexecute(true); });
    const uint64_t bound_cpu = node_reexecution_work(g, node, NumericsMode::RoundingLog) / node_work(g, node);
    out[cls == 0 ? "contraction" : "other"] = {
        {"node", fmt::format("{} '{}'", op_info(node.op).name, g.values[node.outputs[0]].name)},
        {"work", node_work(g, node)},
        {"repops_cpu_s", repops.cpu_s},
        {"rounding_log_cpu_s", rounding.cpu_s},
        {"cpu_ratio", rounding.cpu_s / repops.cpu_s},
        {"bound_cpu_factor", bound_cpu},
        {"repops_peak_bytes", repops.peak_bytes},
        {"rounding_log_peak_bytes", rounding.peak_bytes},
        {"memory_ratio", static_cast<double>(rounding.peak_bytes) /
                             static_cast<double>(std::max<uint64_t>(repops.peak_bytes, 1))},
        {"bound_repops_bytes", node_memory(g, node, NumericsMode::RepOps)},
        {"bound_rounding_log_bytes", node_memory(g, node, NumericsMode::RoundingLog)},
        {"within_bound", rounding.cpu_s / repops.cpu_s <= static_cast<double>(bound_cpu) &&
                             rounding.peak_bytes <= node_memory(g, node, NumericsMode::RoundingLog)}};
  }
  return out;
}

// One of the runs compared, stepped one step at a time from a fresh trainer so that the runs of a job
// interleave step by step (the machine's load, shared with other work, falls on every mode alike).
// With `log_dir`, each step's rounding log is written there, timed as part of the step.
class Runner {
 public:
  Runner(const JobSpec& job, const Dataset& train, ThreadPool& pool, RoundingOptions rounding,
         std::filesystem::path log_dir = {})
      : profile_(std::make_unique<RoundingProfile>()), log_dir_(std::move(log_dir)), pool_(&pool) {
    rounding.profile = profile_.get();
    trainer_ = std::make_unique<Trainer>(job, train, pool, StepPolicyPtr{}, nullptr, Device::Cpu,
                                         std::move(rounding));
  }

  void step() {
    const int64_t t = trainer_->state().step();
    const auto t0 = Clock::now();
    trainer_->step();
    const StepRoundingLog* log = trainer_->rounding_log();
    times_.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (log == nullptr) return;
    const StepGraph g = trainer_->step_graph(t);
    for (size_t n = 0; n < log->nodes.size(); ++n) {
      const RoundingLog& node = log->nodes[n];
      r_.values += node.count;
      r_.logged += count_logged(node);
      r_.packed_bytes += node.packed.size();
      const Digest leaf = rounding_log_leaf(node);
      r_.leaves.insert(r_.leaves.end(), leaf.begin(), leaf.end());
      auto& [values, logged] = r_.by_op[op_info(g.nodes[n].op).name];
      values += node.count;
      logged += count_logged(node);
    }
    if (log_dir_.empty()) return;
    const auto w0 = Clock::now();  // timed: a trainer writes its logs
    r_.file_bytes += write_rounding_log(rounding_log_path(log_dir_, t), *log, pool_);
    const double w = std::chrono::duration<double>(Clock::now() - w0).count();
    times_.back() += w;
    log_writes_.push_back(w);
  }

  /// The step times so far, by step.
  const std::vector<double>& times() const { return times_; }

  /// The run's totals: the median step time, the mean log-writing time, the state's digest.
  Run finish() {
    r_.step_s = bench::median(times_);
    for (double w : log_writes_) r_.log_write_s += w / static_cast<double>(log_writes_.size());
    r_.state = trainer_->hash_state();
    r_.profile = std::move(profile_);
    return std::move(r_);
  }

 private:
  std::unique_ptr<RoundingProfile> profile_;
  std::filesystem::path log_dir_;
  ThreadPool* pool_;  // the trainer's, which also compresses the log files
  std::unique_ptr<Trainer> trainer_;
  Run r_;
  std::vector<double> times_, log_writes_;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> jobs = {TRIBUNAL_SOURCE_DIR "/scenarios/jobs/fashion_mlp.toml",
                                   TRIBUNAL_SOURCE_DIR "/scenarios/jobs/fashion_cnn.toml",
                                   TRIBUNAL_SOURCE_DIR "/scenarios/jobs/gpt_chars.toml"};
  int steps = 3, threads = 1;
  bool compare = true, referee = true;
  CLI::App app(
      "Rounding-log mode against RepOps in the same run: logged fraction, log bytes, step time, and "
      "replays across float64 GEMMs; prints one JSON object",
      "bench_rounding_log");
  app.add_option("--job", jobs, "job files (repeatable)")->type_name("FILE");
  app.add_option("--steps", steps, "steps per run (from the initial state)")->check(CLI::Range(1, 1000));
  app.add_option("--threads", threads, "RepOps training threads (OpenBLAS's come from OPENBLAS_NUM_THREADS)")
      ->check(CLI::Range(1, 256));
  app.add_flag("!--no-compare", compare, "skip the comparison of the two GEMMs on step 0 (gemms_step0)");
  app.add_flag("!--no-referee", referee, "skip the referee's re-execution costs (referee)");
  bench::parse_command_line(app, argc, argv);

  ThreadPool pool(threads);
  const std::filesystem::path tmp = std::filesystem::temp_directory_path() / "bench_rounding_log";
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& path : jobs) {
    JobSpec job = load_job(path);
    job.numerics.mode = NumericsMode::RepOps;
    const Dataset train = load_dataset(job, Split::Train, pool);
    uint64_t param_bytes = 0;
    const StateLayout layout = state_layout(job);
    for (size_t p = 0; p < layout.num_params; ++p)
      param_bytes += 4 * static_cast<uint64_t>(layout.shapes[p].numel());

    JobSpec rlog = job;
    rlog.numerics.mode = NumericsMode::RoundingLog;
    const std::filesystem::path dir = tmp / std::filesystem::path(path).stem();
    std::filesystem::remove_all(dir);
    // The four runs step by step in turn: RepOps, the trainer (which writes step t's log), the naive
    // loop on its own, the naive loop replaying step t's log.
    Runner runners[4] = {{job, train, pool, {}},
                         {rlog, train, pool, {Float64Gemm::OpenBlas, {}}, dir},
                         {rlog, train, pool, {Float64Gemm::Naive, {}}},
                         {rlog, train, pool, {Float64Gemm::Naive, dir}}};
    for (int i = 0; i < steps; ++i)
      for (Runner& runner : runners) runner.step();
    std::vector<double> step_ratios;  // the trainer's step over the RepOps step just before it
    for (int i = 0; i < steps; ++i)
      step_ratios.push_back(runners[1].times()[static_cast<size_t>(i)] /
                            runners[0].times()[static_cast<size_t>(i)]);
    const Run repops = runners[0].finish(), trainer = runners[1].finish(), own = runners[2].finish(),
              replay = runners[3].finish();
    std::filesystem::remove_all(dir);
    nlohmann::json by_op = nlohmann::json::object();
    for (const auto& [op, counts] : trainer.by_op)
      by_op[op] = {
          {"values_per_step", static_cast<double>(counts.first) / steps},
          {"logged_fraction",
           counts.first ? static_cast<double>(counts.second) / static_cast<double>(counts.first) : 0.0},
          {"tau", rlog.numerics.tau_of(op_named(op))}};

    const double per_step = 1.0 / steps;
    results.push_back({
        {"job", std::filesystem::path(path).filename().string()},
        {"steps", steps},
        {"parameter_bytes", param_bytes},
        {"values_per_step", static_cast<double>(trainer.values) * per_step},
        {"logged_fraction", static_cast<double>(trainer.logged) / static_cast<double>(trainer.values)},
        {"logged_per_step", static_cast<double>(trainer.logged) * per_step},
        {"log_packed_bytes_per_step", static_cast<double>(trainer.packed_bytes) * per_step},
        {"log_file_bytes_per_step", static_cast<double>(trainer.file_bytes) * per_step},
        {"log_packed_over_parameters",
         static_cast<double>(trainer.packed_bytes) * per_step / static_cast<double>(param_bytes)},
        {"log_file_over_parameters",
         static_cast<double>(trainer.file_bytes) * per_step / static_cast<double>(param_bytes)},
        {"repops_step_s", repops.step_s},
        {"rounding_log_openblas_step_s", trainer.step_s},
        {"rounding_log_naive_step_s", own.step_s},
        {"openblas_over_repops", trainer.step_s / repops.step_s},
        {"openblas_over_repops_by_step", step_ratios},
        {"openblas_breakdown_per_step", breakdown(trainer, steps)},
        {"naive_breakdown_per_step", breakdown(own, steps)},
        {"naive_over_repops", own.step_s / repops.step_s},
        {"replay_matches", replay.state == trainer.state},
        // The digests of the state after the steps and of the logs' leaves, to compare builds.
        {"openblas_state", to_hex(trainer.state)},
        {"openblas_logs", to_hex(blake3_256(std::as_bytes(std::span(trainer.leaves))))},
        {"naive_state", to_hex(own.state)},
        {"naive_logs", to_hex(blake3_256(std::as_bytes(std::span(own.leaves))))},
        {"own_matches", own.state == trainer.state},
        {"by_op", by_op},
    });
    if (compare) results.back()["gemms_step0"] = compare_gemms(rlog, train, pool);
    if (referee) results.back()["referee"] = referee_costs(rlog, train, pool);
  }
  const nlohmann::json out = {{"bench", "rounding_log"},
                              {"cpu", bench::cpu_model()},
                              {"openblas_core", openblas_get_corename()},
                              {"openblas_config", openblas_get_config()},
                              {"repops_threads", threads},
                              {"loadavg", bench::loadavg()},
                              {"results", results}};
  std::printf("%s\n", out.dump(2).c_str());
  bool ok = true;
  for (const auto& r : results) ok = ok && r["replay_matches"].get<bool>();
  return ok ? 0 : 1;
}
