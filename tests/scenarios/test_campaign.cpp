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
  CHECK(r.misplaced == 0);  // every verdict about the work names the injected fault's step and node
  CHECK(r.loserless == 0);
  CHECK(r.ok());
  CHECK(r.first_failure == "");
  // Every dispute ends with the cheater convicted; only cheats that change nothing need no dispute.
  const uint64_t no_dispute = r.reasons.count("claims_agree") ? r.reasons.at("claims_agree") : 0;
  CHECK(r.cheater_caught + no_dispute == r.games);
  // Every lie strategy was drawn, and told in some game (a lie drawn for a round after the game ended
  // is not counted as told).
  CHECK(r.strategies.size() == 8);
  CHECK(r.strategies_fired.size() == 8);
  for (const auto& [lie, fired] : r.strategies_fired) {
    MESSAGE(lie << ": drawn " << r.strategies.at(lie) << ", told " << fired);
    CHECK(fired > 0);
    CHECK(fired <= r.strategies.at(lie));
  }
}

TEST_CASE("campaign: a verdict that lands elsewhere than the injected fault is caught") {
  toy::Fault fault;
  fault.step = 3;
  fault.node = 2;
  Verdict v;
  v.reason = VerdictReason::WrongOutput;
  v.losers = {0};
  v.step = 3;
  v.node = 2;
  CHECK(misplacement(v, fault) == "");
  v.node = 1;
  CHECK(misplacement(v, fault) == "wrong_output at step 3 node 1, the fault is at step 3 node 2");
  v.node = 2;
  v.step = 4;
  CHECK(misplacement(v, fault) == "wrong_output at step 4 node 2, the fault is at step 3 node 2");
  v.reason = VerdictReason::WrongPostState;
  CHECK(misplacement(v, fault) == "wrong_post_state for a fault that is not a lying next state");
  v.reason = VerdictReason::WrongInitialState;
  CHECK(misplacement(v, fault) == "wrong_initial_state for a fault at a step");
  v.reason = VerdictReason::Timeout;  // about the answers: any place
  CHECK(misplacement(v, fault) == "");
  toy::Fault post;
  post.step = 5;
  post.lie_post_state = true;
  v.reason = VerdictReason::WrongPostState;
  v.step = 5;
  CHECK(misplacement(v, post) == "");
  v.step = 6;
  CHECK(misplacement(v, post) == "wrong_post_state at step 6, the fault is at step 5");
}
