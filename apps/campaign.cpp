// `tribunal campaign --games N --seed S`: the randomized adversarial campaign on the sans-I/O game.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "scenarios/campaign.h"

namespace tribunal::cli {

int campaign_main(Args& args) {
  uint64_t games = 10000, seed = 1;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--games") games = static_cast<uint64_t>(args.integer(a, 1, int64_t{1} << 40));
    else if (a == "--seed") seed = static_cast<uint64_t>(args.integer(a, 0, INT64_MAX));
    else if (a == "--json") continue;  // the output is always one JSON object
    else throw UsageError("campaign: unknown option '" + std::string(a) + "'");
  }
  const CampaignResult r = run_campaign(games, seed);
  const nlohmann::json out = {{"games", r.games},
                              {"seed", seed},
                              {"honest_losses", r.honest_losses},
                              {"cheaters_caught", r.cheater_caught},
                              {"misplaced", r.misplaced},
                              {"loserless", r.loserless},
                              {"reasons", r.reasons},
                              {"strategies", r.strategies},
                              {"strategies_fired", r.strategies_fired},
                              {"seconds", r.seconds},
                              {"games_per_second", static_cast<double>(r.games) / r.seconds},
                              {"first_failure", r.first_failure}};
  std::printf("%s\n", out.dump().c_str());
  return r.ok() ? 0 : 1;
}

}  // namespace tribunal::cli
