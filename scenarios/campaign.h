// A randomized adversarial campaign on the sans-I/O game (docs/scenarios.md, after Arbitrum BoLD's tests):
// thousands of disputes on the counter program per second, each with a randomly drawn cheater — wrong
// work at a random step and node, a wrong initial state or a lying next state — who also lies in the
// bisection in a randomly drawn way. After every round the honest party must not have lost.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "protocol/messages.h"
#include "protocol/testing/counter.h"

namespace tribunal {

struct CampaignResult {
  uint64_t games = 0;
  uint64_t honest_losses = 0;                        ///< must be 0
  uint64_t cheater_caught = 0;                       ///< games the cheater lost
  uint64_t misplaced = 0;                            ///< must be 0: a verdict about the work that names
                                                     ///< another step, node or kind than the injected fault
  uint64_t loserless = 0;                            ///< must be 0: a finished dispute that convicted no one
  std::map<std::string, uint64_t> reasons;           ///< verdict reason → games
  std::map<std::string, uint64_t> strategies;        ///< lie strategy → games that drew it
  std::map<std::string, uint64_t> strategies_fired;  ///< lie strategy → games in which the lie was told
                                                     ///< (one drawn for a round after the game ended is not)
  double seconds = 0;
  std::string first_failure;  ///< a reproducible description of the first failed game
  /// Whether every game met the campaign's checks (no honest loss, no misplaced verdict, no
  /// loserless verdict, no unfinished game).
  bool ok() const { return honest_losses == 0 && misplaced == 0 && loserless == 0; }
};

/// Why a verdict about the work (wrong_output, wrong_post_state, wrong_initial_state) names another
/// place or kind than the injected `fault` (e.g. "wrong_output at step 3 node 1, the fault is at step
/// 3 node 2"); "" when it names the fault, or when the verdict is about the answers (timeout,
/// bad_proof, equivocation).
std::string misplacement(const Verdict& v, const toy::Fault& fault);

/// Plays `games` games from `seed` (game g uses seed + g, so any game can be replayed alone).
CampaignResult run_campaign(uint64_t games, uint64_t seed);

}  // namespace tribunal
