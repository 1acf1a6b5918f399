// `tribunal scenario run FILE... [--json]`: plays cheater scenario scripts over real loopback
// WebSocket connections and checks each outcome against its expectation (docs/scenarios.md).
// `tribunal scenario graph JOB.toml`: the node table of a job's step graph, to pick a `node = N`.
#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/job.h"
#include "engine/step.h"
#include "net/error.h"
#include "nodes/train_set.h"
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
  for (auto [key, value] : {std::pair{"disputes", s.expect.disputes}, std::pair{"crashes", s.expect.crashes},
                            std::pair{"refused", s.expect.refused}, std::pair{"reconnects", s.expect.reconnects}})
    if (value) expected[key] = *value;
  nlohmann::json actual = {{"winner", r.winner},   {"disputes", r.disputes},     {"crashes", r.crashes},
                           {"refused", r.refused}, {"reconnects", r.reconnects}, {"behaviours", nlohmann::json::array()}};
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

int graph_main(Args& args) {
  if (args.done()) throw UsageError("scenario graph: give a job file");
  const JobSpec job = load_job(args.next());
  if (!args.done()) throw UsageError("scenario graph: one job file");
  const DataShape shape = expected_data_shape(job);
  const StepGraph g = build_step_graph(job, shape, 0, std::vector<int64_t>(static_cast<size_t>(job.batch_size), 0));
  std::printf("node  op                              first output\n");
  for (size_t i = 0; i < g.nodes.size(); ++i)
    std::printf("%4zu  %-30s  %s\n", i, op_name(g.nodes[i].op), g.values[g.nodes[i].outputs[0]].name.c_str());
  std::printf("%4zu  (post-state: state_hash(t+1))\n", g.nodes.size());
  return 0;
}

}  // namespace

int scenario_main(Args& args) {
  if (args.done()) throw UsageError("scenario: give 'run FILE...' or 'graph JOB.toml'");
  const std::string_view sub = args.next();
  if (sub == "graph") return graph_main(args);
  if (sub != "run") throw UsageError("scenario: unknown subcommand '" + std::string(sub) + "'");
  std::vector<std::string> files;
  bool json = false, verbose = false;
  scenarios::RunOptions options;
  options.work_dir = std::filesystem::temp_directory_path() / "tribunal-scenarios";
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--json") json = true;
    else if (a == "--verbose") verbose = true;
    else if (a == "--threads") options.threads = static_cast<int>(args.integer(a, 1, 256));
    else if (a == "--work") options.work_dir = args.value(a);
    else if (a.starts_with("--")) throw UsageError("scenario run: unknown option '" + std::string(a) + "'");
    else files.emplace_back(a);
  }
  if (files.empty()) throw UsageError("scenario run: give at least one scenario file");
  // Parse everything first: a typo in the 20th file should not cost the first 19 runs.
  std::vector<scenarios::Scenario> list;
  for (const auto& f : files) list.push_back(scenarios::load_scenario(f));
  // Every node of every run shares one copy of each training set; keep them loaded between runs.
  std::vector<std::shared_ptr<const Dataset>> keep;
  {
    ThreadPool pool(2);
    for (const auto& s : list) keep.push_back(nodes::shared_train_set(load_job(s.job), pool));
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
      what = fmt::format("{} {}: {} at {}", r.winner, r.winner == "none" ? "stands" : "wins", reason_name(v.reason), at);
    }
    std::fprintf(human, "%s  %5.1f s  %s\n", r.passed ? "PASS" : "FAIL", r.seconds, what.c_str());
    for (const auto& m : r.mismatches) std::fprintf(human, "    mismatch: %s\n", m.c_str());
    if (!r.error.empty()) std::fprintf(human, "    error: %s\n", r.error.c_str());
    std::fflush(human);
    report.push_back(to_json(s, r));
  }
  std::fprintf(human, "%zu of %zu scenarios passed\n", passed, list.size());
  if (json) std::printf("%s\n", nlohmann::json{{"passed", passed}, {"total", list.size()}, {"scenarios", report}}.dump().c_str());
  return passed == list.size() ? 0 : 1;
}

}  // namespace tribunal::cli
