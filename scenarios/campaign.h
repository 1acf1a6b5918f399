// A randomized adversarial campaign on the sans-I/O game (DESIGN §9, after Arbitrum BoLD's tests):
// thousands of disputes on the counter program per second, each with a randomly drawn cheater — wrong
// work at a random step and node, a wrong initial state or a lying next state — who also lies in the
// bisection in a randomly drawn way. After every round the honest party must not have lost.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace tribunal {

struct CampaignResult {
  uint64_t games = 0;
  uint64_t honest_losses = 0;                  ///< must be 0
  uint64_t cheater_caught = 0;                 ///< games the cheater lost
  std::map<std::string, uint64_t> reasons;     ///< verdict reason → games
  std::map<std::string, uint64_t> strategies;  ///< lie strategy → games
  double seconds = 0;
  std::string first_failure;                   ///< a reproducible description of the first honest loss
};

/// Plays `games` games from `seed` (game g uses seed + g, so any game can be replayed alone).
CampaignResult run_campaign(uint64_t games, uint64_t seed);

}  // namespace tribunal
