// A campaign under network faults (docs/scenarios.md, "Network-fault campaign"): games of the
// scenario catalog's cheaters against an honest provider, each played through the real nodes with a
// FaultProxy (scenarios/fault_proxy.h) on both providers' links that drops, delays (reorders),
// duplicates frames and cuts connections at random positions in both directions, optionally with
// busy threads beside the nodes and a stranger flooding every node with idle connections. Each game must end
// with the honest provider's claim accepted, and its scheduled faults must have acted.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nodes/log.h"
#include "scenarios/runner.h"

namespace tribunal::scenarios {

struct FaultCampaignOptions {
  size_t games = 50;
  uint64_t seed = 1;
  /// The catalog: every script of this directory whose expected winner is a provider that behaves
  /// honestly (no answer behaviour, link condition or slowdown of its own) plays; the others are skipped.
  std::filesystem::path suite = "scenarios/suite";
  int cpu_hogs = 0;                ///< busy threads beside the nodes in every game (besides a script's own)
  std::vector<std::string> skip;   ///< scripts whose name starts with one of these do not play (e.g. "cnn/")
  size_t flood_connections = 0;    ///< a flooding stranger's idle connections to each node, per game
  std::filesystem::path work_dir;  ///< the games' stores (each game replaces the previous one's)
  nodes::LogFn progress;           ///< one line per game (may be empty)
};

/// One game of the campaign.
struct FaultGame {
  size_t index = 0;
  std::string scenario;
  std::string schedule;  ///< the faults scheduled, e.g. "alice→referee #3 drop; referee→mallory #1 cut"
  std::string winner;    ///< the standing claim's provider, or "none"
  std::string expected;  ///< the honest provider
  std::string reason;    ///< of the last verdict ("" without one)
  uint64_t faults_acted = 0;  ///< frames the proxies dropped, delayed, duplicated or cut at
  size_t flood_accepted = 0;  ///< the flooding stranger's connections the nodes accepted
  bool passed = false;
  std::string error;
  double seconds = 0;
};

struct FaultCampaignReport {
  std::vector<FaultGame> games;
  size_t honest_losses = 0;     ///< games whose honest provider's claim did not stand
  size_t cheater_accepted = 0;  ///< games in which a cheater's claim was accepted
  size_t faults_idle = 0;       ///< games in which no scheduled fault acted
  size_t errors = 0;            ///< games that failed to run
  bool passed() const {
    return honest_losses == 0 && cheater_accepted == 0 && faults_idle == 0 && errors == 0;
  }
};

/// Plays the campaign. Throws EngineError when the suite holds no playable script.
FaultCampaignReport run_fault_campaign(const FaultCampaignOptions& options);

}  // namespace tribunal::scenarios
