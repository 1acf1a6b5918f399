// `tribunal scenario run FILE... [--json]`: plays cheater scenario scripts over real loopback
// WebSocket connections and checks each outcome against its expectation (docs/scenarios.md).
// `tribunal scenario graph JOB.toml`: the node table of a job's step graph, to pick a `node = N`.
// `tribunal scenario faults [--games N] [--seed S]`: the network-fault campaign (scenarios/fault_campaign.h).
#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/job.h"
#include "engine/step.h"
#include "net/error.h"
#include "nodes/train_set.h"
#include "scenarios/fault_campaign.h"
#include "scenarios/runner.h"

namespace tribunal::cli {
namespace {

nlohmann::json to_json(const scenarios::Scenario& s, const scenarios::ScenarioResult& r) {
  nlohmann::json expected = {{"winner", s.expect.winner}};
  if (s.expect.dispute) expected["dispute"] = *s.expect.dispute;
  if (s.expect.reason) expected["reason"] = reason_name(*s.expect.reason);
  if (s.expect.step) expected["step"] = *s.expect.step;
  if (s.expect.node) expected["node"] = *s.expect.node;
  if (s.expect.op) expected["op"] = *s.expect.op;
  for (auto [key, value] :
       {std::pair{"disputes", s.expect.disputes}, std::pair{"crashes", s.expect.crashes},
        std::pair{"refused", s.expect.refused}, std::pair{"reconnects", s.expect.reconnects}})
    if (value) expected[key] = *value;
  nlohmann::json actual = {{"winner", r.winner},         {"disputes", r.disputes},
                           {"crashes", r.crashes},       {"refused", r.refused},
                           {"reconnects", r.reconnects}, {"behaviours", nlohmann::json::array()}};
  for (size_t i = 0; i < r.behaviours.size() && i < s.providers.size(); ++i) {
    const scenarios::BehaviourCounts& c = r.behaviours[i];
    actual["behaviours"].push_back({{"provider", s.providers[i].name},
                                    {"acts", c.acts},
                                    {"frames_injected", c.frames_injected},
                                    {"frames_withheld", c.frames_withheld},
                                    {"disconnects", c.disconnects},
                                    {"link_delayed", c.link_delayed},
                                    {"link_dropped", c.link_dropped}});
  }
  if (r.verdict) {
    const Verdict& v = *r.verdict;
    actual["reason"] = reason_name(v.reason);
    actual["step"] = v.step;
    actual["node"] = v.node;
    actual["op"] = scenarios::located_op(v);
    actual["rounds"] = v.rounds;
    actual["detail"] = v.detail;
  }
  nlohmann::json j = {{"name", r.name},       {"file", r.file.string()}, {"passed", r.passed},
                      {"expected", expected}, {"actual", actual},        {"seconds", r.seconds}};
  if (!r.mismatches.empty()) j["mismatches"] = r.mismatches;
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

int run_graph(const std::filesystem::path& job_path, const DataRegistry& registry) {
  if (job_path.empty()) throw UsageError("give a job file");
  const JobSpec job = load_job(job_path, registry);
  const DataShape shape = expected_data_shape(job);
  const StepGraph g =
      build_step_graph(job, shape, 0, std::vector<int64_t>(static_cast<size_t>(job.batch_size), 0));
  std::printf("node  op                              first output\n");
  for (size_t i = 0; i < g.nodes.size(); ++i)
    std::printf("%4zu  %-30s  %s\n", i, op_name(g.nodes[i].op), g.values[g.nodes[i].outputs[0]].name.c_str());
  std::printf("%4zu  (post-state: state_hash(t+1))\n", g.nodes.size());
  return 0;
}

// What `scenario run` is given.
struct RunSettings {
  std::vector<std::string> files;
  bool json = false, verbose = false;
  scenarios::RunOptions options;
  RunSettings() { options.work_dir = std::filesystem::temp_directory_path() / "tribunal-scenarios"; }
};

int run_scenarios(RunSettings& settings) {
  const std::vector<std::string>& files = settings.files;
  const bool json = settings.json, verbose = settings.verbose;
  scenarios::RunOptions& options = settings.options;
  if (files.empty()) throw UsageError("give at least one scenario file");
  // Parse everything first: a typo in the 20th file should not cost the first 19 runs.
  std::vector<scenarios::Scenario> list;
  for (const auto& f : files) list.push_back(scenarios::load_scenario(f));
  // Every node of every run shares one copy of each training set; keep them loaded between runs.
  std::vector<std::shared_ptr<const Dataset>> keep;
  {
    ThreadPool pool(2);
    for (const auto& s : list) keep.push_back(nodes::shared_train_set(load_job(s.job, s.registry), pool));
  }

  FILE* human = json ? stderr : stdout;
  const auto started = std::chrono::steady_clock::now();
  if (verbose)
    options.log = [human, started](const std::string& line) {
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      std::fprintf(human, "    [%8.3f] %s\n", t, line.c_str());
    };
  else
    set_net_log_sink([](std::string_view) {});
  nlohmann::json report = nlohmann::json::array();
  size_t passed = 0;
  for (const auto& s : list) {
    std::fprintf(human, "%-40s ", s.name.c_str());
    std::fflush(human);
    const scenarios::ScenarioResult r = scenarios::run_scenario(s, options);
    passed += r.passed;
    std::string what = fmt::format("{} stands, no dispute", r.winner);
    if (r.verdict) {
      const Verdict& v = *r.verdict;
      const std::string at = v.level == Level::Nodes   ? fmt::format("step {} node {}", v.step, v.node)
                             : v.level == Level::Steps ? fmt::format("level 2, step {}", v.step)
                                                       : std::string("level 1");
      what = fmt::format("{} {}: {} at {}", r.winner, r.winner == "none" ? "stands" : "wins",
                         reason_name(v.reason), at);
    }
    std::fprintf(human, "%s  %5.1f s  %s\n", r.passed ? "PASS" : "FAIL", r.seconds, what.c_str());
    for (const auto& m : r.mismatches) std::fprintf(human, "    mismatch: %s\n", m.c_str());
    if (!r.error.empty()) std::fprintf(human, "    error: %s\n", r.error.c_str());
    std::fflush(human);
    report.push_back(to_json(s, r));
  }
  std::fprintf(human, "%zu of %zu scenarios passed\n", passed, list.size());
  if (json)
    std::printf(
        "%s\n",
        nlohmann::json{{"passed", passed}, {"total", list.size()}, {"scenarios", report}}.dump().c_str());
  return passed == list.size() ? 0 : 1;
}

// `scenario faults`: prints one line per game, then a summary (or JSON); exit 1 unless every game's
// honest provider won with its faults acting.
int run_faults(scenarios::FaultCampaignOptions o, bool json) {
  set_net_log_sink([](std::string_view) {});
  FILE* human = json ? stderr : stdout;
  o.progress = [human](const std::string& line) {
    std::fprintf(human, "%s\n", line.c_str());
    std::fflush(human);
  };
  const auto started = std::chrono::steady_clock::now();
  const scenarios::FaultCampaignReport r = scenarios::run_fault_campaign(o);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::fprintf(
      human,
      "%zu games (seed %llu, %d CPU hogs, %zu flooding connections per node) in %.0f s: %zu honest losses, "
      "%zu cheater claims accepted, %zu games whose faults never acted, %zu errors\n",
      r.games.size(), static_cast<unsigned long long>(o.seed), o.cpu_hogs, o.flood_connections, seconds,
      r.honest_losses, r.cheater_accepted, r.faults_idle, r.errors);
  if (json) {
    nlohmann::json games = nlohmann::json::array();
    for (const auto& g : r.games)
      games.push_back({{"game", g.index},
                       {"scenario", g.scenario},
                       {"schedule", g.schedule},
                       {"winner", g.winner},
                       {"expected", g.expected},
                       {"reason", g.reason},
                       {"faults_acted", g.faults_acted},
                       {"flood_accepted", g.flood_accepted},
                       {"passed", g.passed},
                       {"error", g.error},
                       {"seconds", g.seconds}});
    std::printf("%s\n", nlohmann::json{{"games", r.games.size()},
                                       {"seed", o.seed},
                                       {"cpu_hogs", o.cpu_hogs},
                                       {"flood_connections", o.flood_connections},
                                       {"seconds", seconds},
                                       {"honest_losses", r.honest_losses},
                                       {"cheater_accepted", r.cheater_accepted},
                                       {"faults_idle", r.faults_idle},
                                       {"errors", r.errors},
                                       {"results", games}}
                            .dump()
                            .c_str());
  }
  return r.passed() ? 0 : 1;
}

}  // namespace

Command add_scenario(CLI::App& root) {
  auto run = std::make_shared<RunSettings>();
  auto graph_job = std::make_shared<std::filesystem::path>();
  CLI::App* app = root.add_subcommand("scenario",
                                      "cheater scenario scripts (docs/scenarios.md): run them, or list a "
                                      "job's graph nodes to write one");
  app->require_subcommand(0, 1);
  CLI::App* run_app = app->add_subcommand(
      "run",
      "play cheater scenario scripts over loopback WebSockets; exit 1 if an outcome differs from its expect");
  run_app->add_option("files", run->files, "scenario scripts (scenarios/suite/*.toml)")->type_name("FILE");
  run_app->add_flag("--json", run->json, "print one JSON report on stdout (the table goes to stderr)");
  run_app->add_flag("--verbose", run->verbose, "every node's log line, with seconds since the start");
  add_integer(*run_app, "--threads", run->options.threads, 1, 256, "training threads of each provider", "K");
  run_app->add_option("--work", run->options.work_dir, "the nodes' stores and data")
      ->type_name("DIR")
      ->default_str("$TMPDIR/tribunal-scenarios");
  CLI::App* graph_app = app->add_subcommand(
      "graph", "the node table of a job's step graph (the `node = N` of a scenario script)");
  graph_app->add_option("job", *graph_job, "the job file")->type_name("JOB.toml");
  auto graph_registry = std::make_shared<DataRegistry>(DataRegistry::debian());
  add_datasets(*graph_app, *graph_registry);
  auto faults = std::make_shared<scenarios::FaultCampaignOptions>();
  faults->work_dir = std::filesystem::temp_directory_path() / "tribunal-fault-campaign";
  auto faults_json = std::make_shared<bool>(false);
  CLI::App* faults_app = app->add_subcommand(
      "faults",
      "the network-fault campaign: the catalog's cheaters against an honest provider, each game through "
      "on-path proxies that drop, delay, duplicate frames and cut connections; exit 1 unless the honest "
      "provider wins every game");
  add_integer(*faults_app, "--games", faults->games, 1, 1000000, "games to play", "N");
  faults_app->add_option("--seed", faults->seed, "drives the choice of scenarios and faults")->default_val(1);
  add_integer(*faults_app, "--hogs", faults->cpu_hogs, 0, 64, "busy threads beside the nodes in every game",
              "K");
  add_integer(
      *faults_app, "--flood", faults->flood_connections, 0, 100000,
      "a stranger's idle connections from 127.0.0.2 to the referee and to each provider, in every game", "N");
  faults_app->add_option("--suite", faults->suite, "the scenario catalog")
      ->type_name("DIR")
      ->default_str("scenarios/suite");
  faults_app->add_option("--work", faults->work_dir, "the games' stores")
      ->type_name("DIR")
      ->default_str("$TMPDIR/tribunal-fault-campaign");
  faults_app->add_flag("--json", *faults_json, "print one JSON report on stdout (the lines go to stderr)");
  faults_app
      ->add_option("--skip", faults->skip, "scripts whose name starts with PREFIX do not play (repeatable)")
      ->type_name("PREFIX");
  return {app, [run_app, graph_app, faults_app, run, graph_job, graph_registry, faults, faults_json] {
            if (run_app->parsed()) return run_scenarios(*run);
            if (graph_app->parsed()) return run_graph(*graph_job, *graph_registry);
            if (faults_app->parsed()) return run_faults(*faults, *faults_json);
            throw UsageError("give 'run FILE...', 'faults' or 'graph JOB.toml'");
          }};
}

}  // namespace tribunal::cli
