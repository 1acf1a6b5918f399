// What the delegate shows while it waits (docs/running.md, "Progress"; nodes/progress_poll.h): each
// provider's training step, rate and ETA from its /metrics, each dispute's level and round from the
// referee's /disputes.json — parsed with care (the answers are a peer's bytes) and, through real nodes
// on loopback, logged under the job's and the dispute's LogKeys with plausible values.
#include <doctest/doctest.h>

#include <fstream>
#include <mutex>
#include <regex>

#include "nodes/progress_poll.h"
#include "referee/report.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::nodes;
using testing::corrupt;
using testing::Network;

TEST_CASE("progress poll: a provider's training gauges, and what is refused of them") {
  const std::string text =
      "# TYPE tribunal_provider_training_step gauge\ntribunal_provider_training_step 120\n"
      "tribunal_provider_training_job_steps 937\ntribunal_provider_training_steps_per_second 3.125\n";
  const auto p = parse_training_progress(text);
  REQUIRE(p);
  CHECK(p->step == 120);
  CHECK(p->steps == 937);
  CHECK(p->steps_per_second == 3.125);
  // (937 − 120) / 3.125 = 261.44 s
  CHECK(training_progress_text(*p) == "step 120/937, 3.12 steps/s, ETA 4:21");
  CHECK(training_progress_text({0, 937, 0}) == "step 0/937");
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return parse_training_progress(t);
  };
  CHECK_FALSE(with("step 120", "step 938"));                           // beyond the job
  CHECK_FALSE(with("step 120", "step -1"));                            // negative
  CHECK_FALSE(with("step 120", "step NaN"));                           // not a number
  CHECK_FALSE(with("second 3.125", "second 1e300"));                   // beyond 2^53
  CHECK_FALSE(with("job_steps 937", "job_steps 0"));                   // none trains
  CHECK_FALSE(with("job_steps 937", "job_steps 9x"));                  // trailing junk
  CHECK_FALSE(with("tribunal_provider_training_job_steps", "other"));  // missing
}

TEST_CASE("progress poll: a dispute's level as /disputes.json gives it, and what is refused of it") {
  Digest open{}, decided{}, absent{};
  open[0] = 1;
  decided[0] = 2;
  absent[0] = 3;
  const std::vector<DisputeListing> list = {{open, false, std::nullopt, 7}, {decided, true, std::nullopt, 9}};
  const std::vector<std::optional<DisputeOutcome>> outcomes = {std::nullopt, std::nullopt};
  const std::vector<std::optional<DisputeProgress>> progress = {DisputeProgress{Phase::Steps, 5, 8, 16, 101},
                                                                std::nullopt};
  const std::string json = dispute_list_json(list, outcomes, progress);
  const auto d = parse_dispute_level(json, open);
  REQUIRE(d);
  CHECK(d->phase == "steps");
  CHECK(d->level == 2);
  CHECK(d->round == 5);
  CHECK(d->range == std::pair<uint64_t, uint64_t>{8, 16});
  CHECK(d->leaves == 101);
  CHECK(dispute_level_text(*d) == "level 2 (steps), round 5, range [8, 16) of 101");
  CHECK_FALSE(parse_dispute_level(json, decided));  // decided: no progress
  CHECK_FALSE(parse_dispute_level(json, absent));
  // A commit round: no range.
  const std::vector<std::optional<DisputeProgress>> commit = {DisputeProgress{Phase::StepCommit, 9, 0, 0, 0},
                                                              std::nullopt};
  const auto c = parse_dispute_level(dispute_list_json(list, outcomes, commit), open);
  REQUIRE(c);
  CHECK(dispute_level_text(*c) == "level 3 (step_commit), round 9");
  // Malformed bodies and entries are refused, never thrown.
  const std::string id = to_hex(open);
  for (const std::string& bad :
       {std::string("not json"), std::string("[]"), std::string(R"({"disputes": 3})"),
        R"({"disputes":[{"id":")" + id +
            R"(","progress":{"phase":"steps","level":4,"round":1,"leaves":2}}]})",
        R"({"disputes":[{"id":")" + id + R"(","progress":{"phase":"x y","level":1,"round":1,"leaves":2}}]})",
        R"({"disputes":[{"id":")" + id +
            R"(","progress":{"phase":"steps","level":2,"round":1,"leaves":2,"range":[1,9]}}]})",
        R"({"disputes":[{"id":")" + id +
            R"(","progress":{"phase":"steps","level":2,"round":-1,"leaves":2}}]})"})
    CHECK_FALSE(parse_dispute_level(bad, open));
}

TEST_CASE("progress poll: the delegate logs each provider's training and its dispute's level as it narrows") {
  RefereeNodeOptions options;
  testing::TempDir store("progress-poll");
  options.data_dir = store.path;  // /disputes.json comes from the store
  Network net(options);
  // Long enough to be watched: 600 steps; the cheater's answers each wait 60 ms, so the dispute's
  // rounds take a while.
  net.job_file = net.dir.path / "long.toml";
  {
    std::ifstream in(testing::kShortJob);
    std::ostringstream text;
    text << in.rdbuf();
    std::string job = text.str();
    job.replace(job.find("steps = 30"), 10, "steps = 600");
    job.replace(job.find("stride = 8"), 10, "stride = 60");
    std::ofstream(net.job_file) << job;
  }
  const std::string honest = net.provider(cheats::Fault{});
  auto slow = std::make_unique<ProviderNode>(net.ctx, generate_keypair(), net.config(corrupt(200, 4)),
                                             quiet_logger());
  slow->reply_filter = [](const QueryContext&, std::vector<std::vector<uint8_t>> answers) {
    return ProviderReply{std::move(answers), std::chrono::milliseconds(60)};
  };
  const std::string cheater = "ws://127.0.0.1:" + std::to_string(slow->listen("127.0.0.1", 0)) + "/";
  net.providers.push_back(std::move(slow));

  struct Line {
    std::string text;
    LogKeys keys;
  };
  std::mutex mu;
  std::vector<Line> lines;
  DelegateRequest request = net.request({honest, cheater});
  request.progress_every = std::chrono::milliseconds(20);
  const DelegateOutcome o = delegate_job(net.ctx, request, line_logger("delegate", [&](const std::string& l) {
                                           std::lock_guard lock(mu);
                                           lines.push_back({l, current_log_keys()});
                                         }));
  REQUIRE(o.accepted);
  REQUIRE(o.verdicts.size() == 1);
  const Verdict v = net.verify(o.verdicts[0]);
  CHECK(v.step == 200);

  const std::regex training(
      R"(delegate: provider (ws://127\.0\.0\.1:\d+/) step (\d+)/600(, [0-9.]+ steps/s, ETA [0-9:.]+( s)?)?)");
  const std::regex level(
      R"(delegate: dispute ([0-9a-f]{16}) level ([123]) \(([a-z_]+)\), round (\d+)(, range \[(\d+), (\d+)\) of (\d+))?)");
  int trainings = 0, levels = 0, last_level = 0;
  uint64_t last_round = 0;
  for (const Line& l : lines) {
    std::smatch m;
    if (std::regex_match(l.text, m, training)) {
      ++trainings;
      CHECK((m[1] == honest || m[1] == cheater));
      CHECK(std::stoi(m[2]) <= 600);
      CHECK(l.keys.job == to_hex(v.job_id));
      CHECK(l.keys.dispute.empty());
    } else if (std::regex_match(l.text, m, level)) {
      ++levels;
      CHECK(m[1] == to_hex(v.dispute_id).substr(0, 16));
      // The dispute narrows: its level and round never go back.
      const int lv = std::stoi(m[2]);
      const uint64_t round = std::stoull(m[4]);
      CHECK(lv >= last_level);
      CHECK(round >= last_round);
      CHECK(round >= 1);
      CHECK(round <= v.rounds);
      last_level = lv;
      last_round = round;
      if (m[5].matched) {
        CHECK(std::stoull(m[6]) < std::stoull(m[7]));
        CHECK(std::stoull(m[7]) <= std::stoull(m[8]));
        if (lv == 1) CHECK(std::stoull(m[8]) == 11);  // checkpoints 0, 60, …, 600
      }
      CHECK(l.keys.dispute == to_hex(v.dispute_id));
      CHECK(l.keys.job == to_hex(v.job_id));
    }
  }
  CHECK_MESSAGE(trainings >= 1, "no provider progress line");
  CHECK_MESSAGE(levels >= 2, "fewer than two dispute level lines");
}
