// The randomized campaign: ≥ 10,000 games with random cheaters and bisection lies; the honest party
// never loses and every game ends with the cheater caught (or no dispute when the cheat has no effect).
#include <doctest/doctest.h>

#include "scenarios/campaign.h"

using namespace tribunal;

TEST_CASE("campaign: 10,000 random adversarial games, zero honest losses") {
  const CampaignResult r = run_campaign(10000, 20261122);
  MESSAGE(r.games << " games in " << r.seconds << " s, " << r.cheater_caught << " cheaters caught");
  for (const auto& [reason, n] : r.reasons) MESSAGE(reason << ": " << n);
  CHECK(r.games == 10000);
  CHECK(r.honest_losses == 0);
  CHECK(r.first_failure == "");
  // Every dispute ends with the cheater convicted; only cheats that change nothing need no dispute.
  const uint64_t no_dispute = r.reasons.count("claims_agree") ? r.reasons.at("claims_agree") : 0;
  CHECK(r.cheater_caught + no_dispute == r.games);
  // Every lie strategy was exercised.
  CHECK(r.strategies.size() == 8);
}
