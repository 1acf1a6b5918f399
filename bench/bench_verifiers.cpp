// Every verifier against every cheater and against honest providers (issue 19, docs/verifiers.md):
// the exact refereed dispute (RepOps job), the same dispute on the job's rounding-log variant, the
// tolerance verifier (fast-mode variant: calibrated boundary, optimistic sampling; and with every
// interval opened, "tolerance_all_intervals", which shows what the boundary alone catches) and the Lab Apex
// audits (RepOps run directories), on the short MLP and GPT jobs, several seeds each. Prints one JSON
// object: per job and verifier, per cheater the attack success rate (the cheater's run accepted) and
// for honest providers the rate wrongly flagged, the verifier's CPU seconds, the evidence bytes the
// provider stores and the bytes sent to the verifier (means per run).
//
//   bench_verifiers [--jobs mlp,gpt] [--seeds 3] [--sample-fraction 0.25]
//
// A seed varies the verifier's sampling (audit rows, opened intervals), the honest provider's kernel
// in fast mode (blocked, reversed, OpenBLAS on 2 threads, by seed) and its training threads (1, 2).
// The cheaters: shortcut (extrapolates the second half of every later interval), idle shortcut (skips
// every later step, idles instead), loss forger (the idle shortcut with forged logs), hide-in-the-noise
// (raises one output bias by boundary − the largest honest distance after every interval), and engine
// faults as scenarios/suite/ plays them (work_corrupt_forward, work_relabel, work_bf16_linear,
// work_weight_decay_hidden, work_swap_sample). In the exact disputes a cheater outside cheats/fault.h
// plays its first deviation as a Fault (shortcut_fault; the bias raise as a corrupted optimizer
// output), which is all the dispute sees; its logs play no part there.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "cheats/attacks.h"
#include "cheats/fault_policy.h"
#include "dispute/job_oracle.h"
#include "dispute/opening.h"
#include "dispute/provider_session.h"
#include "engine/error.h"
#include "referee/local_dispute.h"
#include "referee/referee_dispute.h"
#include "verifiers/audit.h"
#include "verifiers/evidence.h"
#include "verifiers/tolerance.h"

using namespace tribunal;
using namespace tribunal::verifiers;
using namespace tribunal::cheats;

namespace {

const std::filesystem::path kJobs = std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs";

std::filesystem::path scratch(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("tribunal-bench-verifiers-" + std::to_string(getpid()) + "-" + name);
}

uint64_t dir_bytes(const std::filesystem::path& dir) {
  uint64_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += file_bytes(e.path());
  return n;
}

// One cheater: how it trains (an engine fault, or an attack of cheats/attacks.h) and the fault its
// exact dispute plays.
struct Cheater {
  std::string name;
  std::optional<Fault> fault;            // trains with run_training and this fault
  std::optional<ShortcutPlan> shortcut;  // trains with train_shortcut
  bool noise = false;                    // trains with train_hide_in_noise
};

// The optimizer node of parameter `index` at step t and its output slot 0 (the next parameter).
int64_t optimizer_node(const JobSpec& job, const DataShape& shape, int64_t t, size_t index) {
  const StepGraph g = JobOracle(job, shape).graph(static_cast<uint64_t>(t));
  const std::string name = "next/" + state_layout(job).names[index];
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op == OpKind::AdamW || g.nodes[n].op == OpKind::SgdMomentum)
      if (g.values[g.nodes[n].outputs[0]].name.starts_with(name)) return static_cast<int64_t>(n);
  throw EngineError("no optimizer node for " + name);
}

std::vector<Cheater> cheaters(const JobSpec& job, const DataShape& shape) {
  const int64_t mid = job.steps / 2, s = job.stride;
  std::vector<Cheater> out;
  out.push_back(
      {"shortcut_extrapolate", std::nullopt, ShortcutPlan{0.5, SkipMode::Extrapolate, false, 7}, false});
  out.push_back({"shortcut_idle", std::nullopt, ShortcutPlan{1.0, SkipMode::Unchanged, false, 7}, false});
  out.push_back({"loss_forger", std::nullopt, ShortcutPlan{1.0, SkipMode::Unchanged, true, 7}, false});
  out.push_back({"hide_in_noise", std::nullopt, std::nullopt, true});
  Fault f;
  f.step = mid, f.node = 2, f.element = -1, f.delta = 1e-3f;
  out.push_back({"suite_corrupt_forward", f, std::nullopt, false});
  f = {};
  f.relabel_step = mid, f.relabel_position = 0, f.relabel_label = 1;
  if (shape.label_width == 0) out.push_back({"suite_relabel", f, std::nullopt, false});
  f = {};
  f.bf16_from = mid, f.bf16_op = OpKind::Linear;
  out.push_back({"suite_bf16_linear", f, std::nullopt, false});
  f = {};
  f.hparam_from = mid, f.wd_scale = 0.0f, f.hparam_hidden = true;
  out.push_back({"suite_weight_decay_hidden", f, std::nullopt, false});
  f = {};
  f.swap_step = s + 1, f.swap_position = 0, f.swap_row = 0;
  out.push_back({"suite_swap_sample", f, std::nullopt, false});
  return out;
}

struct Provider {
  KeyPair key = generate_keypair();
  std::filesystem::path store;
  Fault fault;
  std::vector<uint8_t> claim;
  Digest root{};
};

Provider provide(const JobSpec& job, const Dataset& data, const Fault& fault, const std::string& name,
                 int threads, const std::filesystem::path& replay = {}) {
  Provider p;
  p.fault = fault;
  p.store = scratch(name);
  std::filesystem::remove_all(p.store);
  TrainOptions o;
  o.out_dir = p.store;
  o.evaluate = false;
  o.policy = fault_policy(fault);
  o.train = &data;
  o.threads = threads;
  if (job.numerics.mode == NumericsMode::RoundingLog && !replay.empty()) o.rounding.replay_dir = replay;
  if (job.numerics.mode == NumericsMode::RoundingLog && replay.empty() && threads == 2)
    o.rounding.gemm = Float64Gemm::Naive;  // the second honest provider's other float64 kernel
  const TrainResult r = run_training(job, o);
  p.root = r.trajectory_root;
  p.claim = seal(p.key, r.job_id, 1,
                 Claim{r.job_id, static_cast<uint64_t>(r.steps), r.trajectory_root, r.final_state_hash,
                       "ws://" + name + ".invalid/"});
  return p;
}

struct DisputeOutcome {
  bool cheater_lost = false, honest_lost = false, disputed = false;
  double referee_cpu = 0;
  uint64_t bytes = 0;  // sent to the referee: the opening and every answer
};

DisputeOutcome dispute(const std::string& job_text, const JobSpec& job, const Dataset& data,
                       const Provider& honest, const Provider& other) {
  DisputeOutcome out;
  if (honest.root == other.root) return out;  // equal claims: accepted, no dispute
  out.disputed = true;
  const DisputeOpen d = dispute_open(job_text, data, honest.claim, other.claim);
  const KeyPair client = generate_keypair(), referee_key = generate_keypair();
  const std::vector<uint8_t> open = seal(client, dispute_id(d), 1, d);
  ThreadPool pool(1);
  RefereeDispute referee(referee_key, open_envelope(open));
  const Provider* providers[2] = {&honest, &other};
  std::unique_ptr<ProviderDisputeSession> sessions[2];
  std::array<LocalParty, 2> parties;
  for (int p = 0; p < 2; ++p)
    parties[static_cast<size_t>(p)] = [&, p](const Envelope& env) -> std::vector<std::vector<uint8_t>> {
      if (env.kind != MessageKind::DisputeOpen) return sessions[p]->on_envelope(env);
      sessions[p] = std::make_unique<ProviderDisputeSession>(
          providers[p]->key, env, job, data, providers[p]->store, pool,
          std::vector<PublicKey>{referee_key.public_key}, fault_policy(providers[p]->fault));
      return {};
    };
  const LocalRun run = play_local(referee, parties);
  const Verdict v = verify_verdict(run.verdict, referee_key.public_key);
  for (uint8_t l : v.losers) (l == 0 ? out.honest_lost : out.cheater_lost) = true;
  out.referee_cpu = run.referee_cpu_seconds;
  out.bytes = open.size() + run.bytes_in;
  return out;
}

// Per (verifier, cheater): runs, accepted runs, and the cost sums.
struct Tally {
  int runs = 0, accepted = 0;
  double cpu = 0;
  double stored = 0, sent = 0;
  std::map<std::string, int> failed_checks;  // audits: how often each check failed
  void add(bool ok, double c, double st, double se) {
    ++runs, accepted += ok, cpu += c, stored += st, sent += se;
  }
  nlohmann::json json(bool honest) const {
    const double n = runs > 0 ? runs : 1;
    nlohmann::json j = {{"runs", runs},
                        {"verifier_cpu_seconds", cpu / n},
                        {"evidence_bytes_stored", stored / n},
                        {"evidence_bytes_sent", sent / n}};
    if (!failed_checks.empty()) j["failed_checks"] = failed_checks;
    if (honest)
      j["wrongly_flagged_rate"] = (runs - accepted) / n;
    else
      j["attack_success_rate"] = accepted / n;
    return j;
  }
};

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

JobSpec load(const std::string& file, const std::string& text) {
  JobSpec job = parse_job(text, file);
  locate_data(job, DataRegistry::debian());
  return job;
}

nlohmann::json bench_job(const std::string& stem, int seeds, double sample_fraction) {
  const std::string repops_text = read_file(kJobs / (stem + ".toml")),
                    rlog_text = read_file(kJobs / (stem + "_rlog.toml")),
                    fast_text = read_file(kJobs / (stem + "_fast.toml"));
  const JobSpec repops = load(stem + ".toml", repops_text), rlog = load(stem + "_rlog.toml", rlog_text),
                fast = load(stem + "_fast.toml", fast_text);
  ThreadPool pool(1);
  const Dataset data = load_dataset(repops, Split::Train, pool);
  const DataShape shape = data_shape_of(data);
  const std::vector<Cheater> list = cheaters(repops, shape);
  std::map<std::string, std::map<std::string, Tally>> tally;  // verifier → cheater → tally

  // Tolerance: one calibration per job, the boundary the noise attacker spends.
  const Calibration cal = calibrate(fast, data, {});
  const double budget = cal.boundary - cal.max_distance;
  const size_t bias = output_bias_index(repops);
  const int64_t target = 3;
  double noise_shift = 0, rate_honest = 0, rate_attacked = 0;

  const std::vector<FastOptions> honest_kernels = {
      {Float32Gemm::Blocked, 0}, {Float32Gemm::Reversed, 0}, {Float32Gemm::OpenBlas, 2}};
  for (int seed = 0; seed < seeds; ++seed) {
    const int threads = 1 + seed % 2;
    // Exact and rounding-log disputes: an honest reference provider against each other provider.
    for (const auto& [name, job, text] :
         {std::tuple<std::string, const JobSpec&, const std::string&>{"exact_dispute", repops, repops_text},
          std::tuple<std::string, const JobSpec&, const std::string&>{"rounding_log_dispute", rlog,
                                                                      rlog_text}}) {
      const Provider ref = provide(job, data, Fault{}, name + "-ref", 1);
      const uint64_t stored = dir_bytes(ref.store);
      const Provider twin =
          provide(job, data, Fault{}, name + "-twin", threads,
                  job.numerics.mode == NumericsMode::RoundingLog ? ref.store : std::filesystem::path{});
      const DisputeOutcome h = dispute(text, job, data, ref, twin);
      tally[name]["honest"].add(!h.honest_lost && !h.cheater_lost, h.referee_cpu, static_cast<double>(stored),
                                static_cast<double>(h.bytes));
      for (const Cheater& c : list) {
        Fault f = c.fault ? *c.fault : Fault{};
        if (c.shortcut) f = shortcut_fault(job, *c.shortcut);
        if (c.noise)
          f.step = job.stride - 1, f.node = optimizer_node(job, shape, job.stride - 1, bias),
          f.element = target, f.delta = static_cast<float>(budget);
        const Provider bad = provide(job, data, f, name + "-" + c.name, 1);
        const DisputeOutcome o = dispute(text, job, data, ref, bad);
        tally[name][c.name].add(!o.cheater_lost, o.referee_cpu, static_cast<double>(stored),
                                static_cast<double>(o.bytes));
        std::filesystem::remove_all(bad.store);
      }
      std::filesystem::remove_all(ref.store);
      std::filesystem::remove_all(twin.store);
    }
    // Audits (RepOps runs) and the tolerance verifier (fast-mode runs).
    AuditOptions ao;
    ao.seed = static_cast<uint64_t>(seed) + 1;
    ToleranceOptions to;
    to.seed = static_cast<uint64_t>(seed) + 1;
    to.sample_fraction = sample_fraction;
    to.kernel = {Float32Gemm::OpenBlas, 1};
    const FastOptions honest_kernel = honest_kernels[static_cast<size_t>(seed) % honest_kernels.size()];
    const auto audit_run = [&](const std::string& who, const std::filesystem::path& dir) {
      const AuditReport r = run_audit(repops, dir, ao, &data);
      Tally& x = tally["audits"][who];
      x.add(r.passed(), r.cpu_seconds, static_cast<double>(r.evidence_bytes),
            static_cast<double>(r.read_bytes));
      for (const CheckResult& c : r.checks)
        if (!c.passed) ++x.failed_checks[c.name];
    };
    ToleranceOptions every = to;
    every.sample_fraction = 1.0;
    const auto tolerance_run = [&](const std::string& who, const std::filesystem::path& dir) {
      const ToleranceReport r = check_tolerance(fast, dir, cal, to, &data);
      tally["tolerance"][who].add(r.passed, r.cpu_seconds, static_cast<double>(r.evidence_bytes),
                                  static_cast<double>(r.sent_bytes));
      // Every interval opened: whether the boundary itself catches the cheat, sampling aside.
      const ToleranceReport all = check_tolerance(fast, dir, cal, every, &data);
      tally["tolerance_all_intervals"][who].add(all.passed, all.cpu_seconds,
                                                static_cast<double>(all.evidence_bytes),
                                                static_cast<double>(all.sent_bytes));
    };
    const std::filesystem::path a = scratch("audit"), t = scratch("tolerance");
    {
      TrainOptions o;
      o.evaluate = false, o.train = &data, o.threads = threads;
      o.out_dir = a;
      std::filesystem::remove_all(a);
      run_training(repops, o);
      audit_run("honest", a);
      o.out_dir = t;
      o.fast = honest_kernel;
      std::filesystem::remove_all(t);
      run_training(fast, o);
      tolerance_run("honest", t);
    }
    for (const Cheater& c : list) {
      if (c.fault) {
        TrainOptions o;
        o.evaluate = false, o.train = &data, o.policy = fault_policy(*c.fault);
        o.out_dir = a;
        std::filesystem::remove_all(a);
        run_training(repops, o);
        o.out_dir = t;
        o.fast = {Float32Gemm::OpenBlas, 1};
        std::filesystem::remove_all(t);
        run_training(fast, o);
      } else if (c.shortcut) {
        train_shortcut(repops, data, a, *c.shortcut);
        train_shortcut(fast, data, t, *c.shortcut, {Float32Gemm::OpenBlas, 1});
      } else {
        train_hide_in_noise(repops, data, a, {budget, target});
        const AttackRun run =
            train_hide_in_noise(fast, data, t, {budget, target}, {Float32Gemm::OpenBlas, 1});
        if (seed == 0) {
          // What the change does: the rate of predictions of the target class against an honest run's.
          noise_shift = run.shift;
          const Digest id = job_id(fast, data);
          const State attacked = load_checkpoint(checkpoint_path(t, fast.steps), fast, id, pool);
          const State honest =
              replay(fast, data, pool, initial_state(fast), fast.steps, {Float32Gemm::OpenBlas, 1});
          rate_attacked = prediction_rate(fast, attacked, data, target, 2000, pool);
          rate_honest = prediction_rate(fast, honest, data, target, 2000, pool);
        }
      }
      audit_run(c.name, a);
      tolerance_run(c.name, t);
    }
    std::filesystem::remove_all(a);
    std::filesystem::remove_all(t);
  }
  nlohmann::json verifiers = nlohmann::json::object();
  for (const auto& [verifier, by] : tally) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [who, x] : by) j[who] = x.json(who == "honest");
    verifiers[verifier] = j;
  }
  return {{"job", stem},
          {"steps", repops.steps},
          {"stride", repops.stride},
          {"seeds", seeds},
          {"calibration",
           {{"kernels", cal.kernels},
            {"intervals", cal.intervals},
            {"max_distance", cal.max_distance},
            {"margin", cal.margin},
            {"boundary", cal.boundary},
            {"cpu_seconds", cal.cpu_seconds}}},
          {"hide_in_noise",
           {{"budget_per_interval", budget},
            {"target", target},
            {"total_bias_shift", noise_shift},
            {"target_prediction_rate_honest", rate_honest},
            {"target_prediction_rate_attacked", rate_attacked}}},
          {"verifiers", verifiers}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "bench_verifiers: every verifier against every cheater and honest providers (docs/verifiers.md)");
  std::vector<std::string> jobs = {"mlp", "gpt"};
  int seeds = 3;
  double sample_fraction = 0.25;
  app.add_option("--jobs", jobs, "short jobs: mlp, gpt (scenarios/jobs/short_<job>{,_rlog,_fast}.toml)")
      ->delimiter(',');
  app.add_option("--seeds", seeds, "seeds per job")->check(CLI::Range(1, 100));
  app.add_option("--sample-fraction", sample_fraction, "tolerance verifier: fraction of intervals opened")
      ->check(CLI::Range(0.0, 1.0));
  bench::parse_command_line(app, argc, argv);
  const auto t0 = std::chrono::steady_clock::now();
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& j : jobs) results.push_back(bench_job("short_" + j, seeds, sample_fraction));
  const nlohmann::json out = {
      {"bench", "verifiers"},
      {"sample_fraction", sample_fraction},
      {"results", results},
      {"seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
