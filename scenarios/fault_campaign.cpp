// The network-fault campaign. See fault_campaign.h.
#include "scenarios/fault_campaign.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/job.h"
#include "nodes/train_set.h"

namespace tribunal::scenarios {
namespace {

// One scheduled fault: what happens to the `index`-th frame (over all connections) going `direction`
// on one provider's link.
struct ScheduledFault {
  Direction direction = Direction::ToReferee;
  uint64_t index = 0;
  FrameFault fault;
};

const char* kind_name(FrameFault::Kind k) {
  switch (k) {
    case FrameFault::Kind::Forward:
      return "delay";
    case FrameFault::Kind::Drop:
      return "drop";
    case FrameFault::Kind::Duplicate:
      return "duplicate";
    case FrameFault::Kind::Cut:
      return "cut";
  }
  return "?";
}

// A provider's link as the campaign plays it: the frames counted per direction over every connection,
// the faults scheduled on them, and how many of those acted.
struct LinkPlan {
  std::vector<ScheduledFault> faults;
  std::array<std::atomic<uint64_t>, 2> frames{};
  std::atomic<uint64_t> acted{0};
};

FrameFilter filter_of(std::shared_ptr<LinkPlan> plan) {
  return [plan](Direction d, uint64_t, uint64_t, const std::vector<uint8_t>&) {
    const uint64_t index = plan->frames[static_cast<size_t>(d)]++;
    for (const ScheduledFault& f : plan->faults)
      if (f.direction == d && f.index == index) {
        ++plan->acted;
        return f.fault;
      }
    return FrameFault{};
  };
}

// Whether `s` is a game of an honest provider against a cheater: its expected winner answers, links
// and computes as an honest node does (its clock then has the whole allowance for the faults).
bool playable(const Scenario& s) {
  if (s.expect.winner == "none" || (s.expect.dispute && !*s.expect.dispute) ||
      s.network.latency.count() != 0 || s.network.drop_rate != 0 || s.network.bytes_per_second != 0)
    return false;
  for (const ProviderSpec& p : s.providers)
    if (p.name == s.expect.winner)
      return p.work_kind == "honest" && p.answers.kind == AnswerKind::Honest && p.link.latency.count() == 0 &&
             p.link.drop_rate == 0 && p.link.bytes_per_second == 0 && p.slowdown == 1 &&
             p.device == Device::Cpu;
  return false;
}

// The time terms the scenario's job is played with: its [dispute] table's base (for the delays).
std::chrono::milliseconds base_of(const Scenario& s) {
  const JobSpec job = parse_job(s.job_text, s.file.string());
  return job.dispute.base;
}

}  // namespace

FaultCampaignReport run_fault_campaign(const FaultCampaignOptions& o) {
  std::vector<Scenario> catalog;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(o.suite))
    if (entry.path().extension() == ".toml") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    Scenario s = load_scenario(f);
    const bool skipped = std::any_of(o.skip.begin(), o.skip.end(),
                                     [&](const std::string& prefix) { return s.name.rfind(prefix, 0) == 0; });
    if (playable(s) && !skipped) catalog.push_back(std::move(s));
  }
  if (catalog.empty())
    throw EngineError("fault campaign: no scenario of " + o.suite.string() + " has an honest winner to play");

  // Every node of every game shares one copy of each training set (nodes/train_set.h).
  std::vector<std::shared_ptr<const Dataset>> keep;
  {
    ThreadPool pool(2);
    for (const Scenario& s : catalog)
      keep.push_back(nodes::shared_train_set(load_job(s.job, s.registry), pool));
  }
  std::mt19937_64 rng(o.seed);
  FaultCampaignReport report;
  for (size_t g = 0; g < o.games; ++g) {
    Scenario s = catalog[rng() % catalog.size()];
    s.cpu_hogs += o.cpu_hogs;
    const auto base = base_of(s);
    // One to four faults, on either provider's link, in either direction, among its first frames
    // (every dispute of the catalog has more: at least a dozen rounds).
    std::vector<std::shared_ptr<LinkPlan>> plans;
    for (size_t p = 0; p < s.providers.size(); ++p) plans.push_back(std::make_shared<LinkPlan>());
    std::string schedule;
    const size_t faults = 1 + rng() % 4;
    for (size_t k = 0; k < faults; ++k) {
      const size_t p = rng() % s.providers.size();
      ScheduledFault f;
      f.direction = rng() % 2 ? Direction::ToReferee : Direction::ToProvider;
      // The first fault acts at once (every dispute puts two frames on each link, the DisputeOpen and
      // the first question, and gets an answer); the others anywhere among the first dozen frames.
      f.index = k == 0 ? rng() % 2 : rng() % 12;
      if (k == 0) f.direction = Direction::ToProvider;
      const uint64_t roll = rng() % 100;
      if (roll < 35) {
        f.fault.kind = FrameFault::Kind::Drop;
      } else if (roll < 60) {
        // Held back (the frames behind it pass: reordered), at most half the base allowance.
        f.fault.kind = FrameFault::Kind::Forward;
        f.fault.delay = std::chrono::milliseconds(
            20 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, base.count() / 2))));
      } else if (roll < 80) {
        f.fault.kind = FrameFault::Kind::Duplicate;
        f.fault.delay = std::chrono::milliseconds(rng() % 200);
      } else {
        f.fault.kind = FrameFault::Kind::Cut;
      }
      schedule += fmt::format("{}{} {} #{} {}{}", schedule.empty() ? "" : "; ", s.providers[p].name,
                              f.direction == Direction::ToReferee ? "→ referee" : "← referee", f.index,
                              kind_name(f.fault.kind),
                              f.fault.delay.count() ? fmt::format(" {} ms", f.fault.delay.count()) : "");
      plans[p]->faults.push_back(f);
    }
    RunOptions run;
    run.work_dir = o.work_dir;
    run.flood_connections = o.flood_connections;
    run.link_faults = [&plans](size_t provider) { return filter_of(plans.at(provider)); };
    const ScenarioResult r = run_scenario(s, run);

    FaultGame game;
    game.index = g;
    game.scenario = s.name;
    game.schedule = schedule;
    game.winner = r.winner;
    game.expected = s.expect.winner;
    game.reason = r.verdict ? reason_name(r.verdict->reason) : "";
    game.error = r.error;
    game.seconds = r.seconds;
    for (const auto& plan : plans) game.faults_acted += plan->acted;
    game.flood_accepted = r.flood_accepted;
    game.passed = r.error.empty() && r.winner == s.expect.winner && game.faults_acted > 0;
    if (!r.error.empty()) ++report.errors;
    if (r.error.empty() && r.winner != s.expect.winner) ++report.honest_losses;
    if (r.error.empty() && r.winner != s.expect.winner && r.winner != "none") ++report.cheater_accepted;
    if (r.error.empty() && game.faults_acted == 0) ++report.faults_idle;
    if (o.progress)
      o.progress(fmt::format(
          "game {:4} {:<34} {} {:5.1f} s  {} wins ({})  faults: {}{}{}", g, s.name,
          game.passed ? "PASS" : "FAIL", game.seconds, game.winner,
          game.reason.empty() ? "no dispute" : game.reason, schedule,
          o.flood_connections ? fmt::format("; flood: {} connections held", game.flood_accepted) : "",
          game.error.empty() ? "" : "  error: " + game.error));
    report.games.push_back(std::move(game));
  }
  return report;
}

}  // namespace tribunal::scenarios
