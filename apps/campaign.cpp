// `tribunal campaign --games N --seed S`: the randomized adversarial campaign on the sans-I/O game.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "scenarios/campaign.h"

namespace tribunal::cli {

namespace {

// What the command line sets.
struct CampaignSettings {
  uint64_t games = 10000, seed = 1;
  bool json = true;  // --json is accepted; the output is always one JSON object
};

int run_campaign_command(const CampaignSettings& s) {
  const uint64_t games = s.games, seed = s.seed;
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

}  // namespace

Command add_campaign(CLI::App& root) {
  auto s = std::make_shared<CampaignSettings>();
  CLI::App* app = root.add_subcommand(
      "campaign",
      "random cheaters and bisection lies against the game; one JSON object with honest_losses (must be 0)");
  add_integer(*app, "--games", s->games, 1, int64_t{1} << 40, "disputes to play");
  add_integer(*app, "--seed", s->seed, 0, INT64_MAX, "seed of the cheaters and lies drawn", "S");
  app->add_flag("--json", s->json, "accepted for symmetry: the output is always one JSON object");
  return {app, [s] { return run_campaign_command(*s); }};
}

}  // namespace tribunal::cli
