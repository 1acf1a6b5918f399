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
//              [--no-pin] [--opening-memory BYTES] [--think-ms MS]
//
// --opening-memory: the referee's budget of opened bytes in flight (tribunal referee --opening-memory).
// --think-ms: each provider answer waits uniformly [0, 2 × MS) before it is sent (provider_host.h);
// by default answers come from a cache at once and every dispute moves in lockstep.
//
// --silent: how many silent connections the flooder opens from one address (more than the referee's
// per-address limit, so that some are refused). --verbose: the referee's log lines on stderr.
//
// End-to-end latency: per dispute, from the provider sending the last answer of a round to a
// provider receiving the referee's next question (referee handling + loopback both ways + this
// process's receive path); p50/p99 over all rounds of all disputes. The referee's own latency
// ("referee_handling"): its tribunal_referee_handling_seconds histogram (a provider frame's arrival
// to the write of the question it caused), read from its /metrics before and after each phase. With
// two CPUs or more the referee runs on the first CPU this process may use and everything else (the
// providers, clients, flooder) on the others (--no-pin: anywhere). Referee memory is its RSS sampled
// from /proc every 20 ms (peak per phase) and its VmHWM; its CPU and minor page faults from /proc/<pid>/stat,
// and the time its threads waited for a CPU (runnable, not running) from /proc/<pid>/task/*/schedstat.
//
// The parts, one file each in bench/load/: the referee process (referee_process.h), its /proc
// readings (proc_sample.h), the providers (provider_host.h) with the latency samples (latency.h), the
// clients (clients.h) and the flooder (flooder.h); this file runs the phases and prints the result.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "bench/cpu_model.h"
#include "bench/load/clients.h"
#include "bench/load/flooder.h"
#include "bench/load/load.h"
#include "bench/load/proc_sample.h"
#include "bench/load/provider_host.h"
#include "bench/load/referee_metrics.h"
#include "bench/load/referee_process.h"
#include "cheats/fault_policy.h"
#include "engine/trainer.h"
#include "net/error.h"
#include "nodes/referee_node.h"

using namespace tribunal;
using namespace tribunal::load_bench;
using namespace tribunal::cheats;

namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct PhaseResult {
  nlohmann::json json;
  double p50 = 0, p99 = 0, rate = 0;
  uint64_t peak_rss_kib = 0;
};

// The CPUs this process may run on, ascending.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

void run_on(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) throw std::runtime_error("sched_setaffinity failed");
}

constexpr const char* kHandling = "tribunal_referee_handling_seconds";

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
  bool no_abuse = false;
  size_t silent_count = 1200;
  bool verbose = false, no_pin = false;
  uint64_t opening_memory = nodes::RefereeNodeOptions{}.opening_memory;
  int64_t think_ms = 0;
  CLI::App app(
      "The referee under load: N concurrent disputes over loopback WebSockets, clean and under a flood; "
      "prints one JSON object (exit 1 unless every verdict is correct).",
      "bench_load");
  app.add_option("--disputes", n, "concurrent disputes per phase [1, 1048576]")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{1} << 20).description(""));
  app.add_option("--referee-threads", referee_threads, "the referee's I/O threads [1, 256]")
      ->type_name("K")
      ->capture_default_str()
      ->check(CLI::Range(1, 256).description(""));
  app.add_option("--provider-workers", provider_workers,
                 "worker threads answering for the providers [1, 256]")
      ->type_name("W")
      ->capture_default_str()
      ->check(CLI::Range(1, 256).description(""));
  app.add_option("--silent", silent_count, "silent connections the flooder opens from one address")
      ->type_name("N")
      ->capture_default_str();
  app.add_option(
         "--opening-memory", opening_memory,
         "the referee's opened bytes in flight across its disputes (tribunal referee --opening-memory)")
      ->type_name("BYTES")
      ->capture_default_str();
  app.add_option(
         "--think-ms", think_ms,
         "each provider answer is sent after a delay drawn uniformly from [0, 2 x MS) ms: the provider's "
         "work and network round trip (0: at once, every dispute in lockstep)")
      ->type_name("MS")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{600000}).description(""));
  app.add_flag("--no-abuse", no_abuse, "run the clean phase only");
  app.add_flag("--no-pin", no_pin,
               "run the referee and the load on any CPU (by default, with two CPUs or more, the referee on "
               "the first one and the load on the others)");
  app.add_flag("--verbose", verbose, "the referee's log lines on stderr");
  bench::parse_command_line(app, argc, argv);
  const bool abuse_phase = !no_abuse;
  const size_t fd_limit = raise_fd_limit();
  const KeyPair referee_key = generate_keypair();

  // The referee, forked before any thread exists, on a CPU of its own; this process on the rest.
  std::vector<int> load_cpus = allowed_cpus();
  const int referee_cpu = !no_pin && load_cpus.size() >= 2 ? load_cpus.front() : -1;
  if (referee_cpu >= 0) load_cpus.erase(load_cpus.begin());
  std::optional<RefereeProcess> referee;
  try {
    referee.emplace(referee_key, referee_threads, verbose, referee_cpu, opening_memory);
    if (referee_cpu >= 0) run_on(load_cpus);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_load: %s\n", e.what());
    return 1;
  }
  const pid_t child = referee->pid();
  const uint16_t referee_port = referee->port();
  const std::string referee_url = "ws://127.0.0.1:" + std::to_string(referee_port) + "/";
  std::atomic<uint64_t> net_log_lines{0};
  set_net_log_sink([&](std::string_view) { ++net_log_lines; });

  // The job, trained once honestly and once with a fault.
  const std::string toml = read_text(kJobFile);
  const JobSpec job = load_job(kJobFile);
  ThreadPool pool(1);
  const Dataset data = load_dataset(job, Split::Train, pool);
  const Digest id = job_id(job, data);
  const auto tmp =
      std::filesystem::temp_directory_path() / ("tribunal-bench-load-" + std::to_string(getpid()));
  auto train = [&](Fault fault, const std::string& name) {
    Trained t;
    t.fault = fault;
    t.store = tmp / name;
    TrainOptions o;
    o.out_dir = t.store;
    o.evaluate = false;
    o.policy = fault_policy(fault);
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
                Claim{id, static_cast<uint64_t>(t.result.steps), t.result.trajectory_root,
                      t.result.final_state_hash, endpoint});
  };

  // Declared before the context: the flooder's sessions may end (and report to it) until ctx stops.
  Abuse abuse;
  NetContext ctx(2, false);
  Latency latency;
  ProviderHost host(ctx, job, id, data, honest_key, honest, cheater, provider_workers, latency,
                    std::chrono::milliseconds(think_ms));
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
  PeakRss peak_rss(child);
  const ProcSample idle = sample_proc(child);

  auto run_phase = [&](const std::vector<Dispute>& disputes, Abuse* abuse) {
    latency.reset();
    peak_rss.reset(sample_proc(child).rss_kib);
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
    const HistogramScrape handling0 = scrape_histogram(referee_url, kHandling);
    const ProcSample before = sample_proc(child);
    const double waited0 = runqueue_wait_seconds(child);
    const auto t0 = Clock::now();
    open_disputes(ctx, referee_url, referee_key.public_key, disputes, out);
    {
      std::unique_lock lock(out->mu);
      out->cv.wait_for(lock, std::chrono::minutes(10), [&] { return out->done == disputes.size(); });
    }
    const double wall = std::chrono::duration<double>(out->last - t0).count();
    const ProcSample after = sample_proc(child);
    const double waited = runqueue_wait_seconds(child) - waited0;
    const HistogramScrape handling1 = scrape_histogram(referee_url, kHandling);
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
    r.peak_rss_kib = peak_rss.peak();
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
              {"referee_handling", histogram_delta(handling0, handling1)},
              {"referee_peak_rss_mib", static_cast<double>(r.peak_rss_kib) / 1024},
              {"referee_cpu_seconds", after.cpu_seconds - before.cpu_seconds},
              {"referee_minor_faults", after.minor_faults - before.minor_faults},
              {"referee_runqueue_wait_seconds", waited}};
    if (abuse)
      r.json["during_disputes"] = {
          {"junk_frames_sent", abuse->junk_frames - junk0},
          {"oversized_frames_sent", abuse->big_sent - big0},
          {"silent_connections_held", abuse->silent_open - abuse->silent_closed_by_referee}};
    return r;
  };

  const PhaseResult clean = run_phase(clean_disputes, nullptr);
  nlohmann::json result = {{"bench", "load"},
                           {"referee_threads", referee_threads},
                           {"provider_workers", provider_workers},
                           {"opening_memory", opening_memory},
                           {"think_ms", think_ms},
                           {"cpu", bench::cpu_model()},
                           {"referee_cpu", referee_cpu >= 0 ? nlohmann::json(referee_cpu) : "any"},
                           {"load_cpus", load_cpus},
                           {"fd_limit", fd_limit},
                           {"job", "scenarios/jobs/short_mlp.toml"},
                           {"cheat", {{"step", kFaultStep}, {"node", kFaultNode}}},
                           {"referee_idle_rss_mib", static_cast<double>(idle.rss_kib) / 1024},
                           {"clean", clean.json}};
  if (abuse_phase) {
    const PhaseResult dirty = run_phase(abuse_disputes, &abuse);
    // Let the tricklers and silent connections meet their timeouts.
    const auto t0 = Clock::now();
    while (seconds_since(t0) < 30 && (abuse.trickle_closed < abuse.trickle_started ||
                                      abuse.silent_closed_by_referee < abuse.silent_open))
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
                  {"trickler_close_seconds_max", abuse.trickle_close_seconds.empty()
                                                     ? 0.0
                                                     : *std::max_element(abuse.trickle_close_seconds.begin(),
                                                                         abuse.trickle_close_seconds.end())},
                  {"close_codes_seen", abuse.close_codes}};
    result["abuse"] = a;
  }
  peak_rss.stop();
  const ProcSample end = sample_proc(child);
  result["referee_vmhwm_mib"] = static_cast<double>(end.hwm_kib) / 1024;
  result["provider_errors"] = host.errors();

  result["referee"] = referee->stop();
  ctx.stop();
  ctx.join();
  std::filesystem::remove_all(tmp);
  std::printf("%s\n", result.dump().c_str());
  const bool ok =
      result["clean"]["verdicts_correct"] == n && (!abuse_phase || result["abuse"]["verdicts_correct"] == n);
  return ok ? 0 : 1;
}
