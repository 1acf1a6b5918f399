// Plays a scenario script over real loopback WebSocket connections: a referee, one provider node per
// [[provider]] with its work, answer behaviour and link, and a delegating client; then compares the
// outcome with the script's expectation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "nodes/log.h"
#include "scenarios/behaviour.h"
#include "scenarios/fault_proxy.h"
#include "scenarios/scenario.h"

namespace tribunal::scenarios {

struct RunOptions {
  int threads = 1;                 ///< training threads per provider
  std::filesystem::path work_dir;  ///< stores and verdicts go under work_dir/<scenario name>
  nodes::LogFn log;                ///< every node's log lines (may be empty: quiet)
  /// Set: each provider (by [[provider]] index) is reached by the referee through a FaultProxy with
  /// this filter, the on-path attacker of plain ws:// (docs/protocol.md, "Lost frames"); the provider
  /// signs the proxy's URL as its endpoint. The client reaches the providers directly.
  std::function<FrameFilter(size_t provider)> link_faults;
  /// A flooding stranger: before the job is delegated, this many idle WebSocket connections are
  /// opened from 127.0.0.2 to the referee and to each provider, and held until the run ends.
  size_t flood_connections = 0;
};

/// What happened, and whether it is what the script expects.
struct ScenarioResult {
  std::string name;
  std::filesystem::path file;
  bool passed = false;
  std::vector<std::string> mismatches;  ///< one line per expectation not met
  std::string error;                    ///< the run itself failed (exception text)
  std::string winner = "none";          ///< the standing claim's provider, or "none"
  size_t disputes = 0;
  std::optional<Verdict> verdict;  ///< the last verdict (verified with the referee's key)
  uint32_t rounds = 0;             ///< of the last dispute
  size_t crashes = 0;              ///< provider crash-restarts that happened
  uint64_t refused = 0;            ///< provider frames the referee refused, over all disputes
  uint64_t reconnects = 0;         ///< provider connections the referee re-established
  /// What each provider's behaviour did, in [[provider]] order (scenarios/behaviour.h).
  std::vector<BehaviourCounts> behaviours;
  /// With RunOptions::link_faults: what each provider's proxy did, in [[provider]] order.
  std::vector<ProxyCounts> proxies;
  /// With RunOptions::flood_connections: the stranger's connections that were accepted.
  size_t flood_accepted = 0;
  double seconds = 0;
};

/// The op kind name of the verdict's located node, or "none" when the dispute did not end at a node
/// (level 1 or 2, or the post-state leaf G of a wrong_post_state verdict).
std::string located_op(const Verdict& v);

/// Runs one scenario. Never throws for a failing run: the error is in the result.
ScenarioResult run_scenario(const Scenario& scenario, const RunOptions& options);

}  // namespace tribunal::scenarios
