// The scenario runner's checks can fail (docs/scenarios.md): a scripted behaviour that never acts,
// or counts that differ from the script's, fail the scenario even when the verdict is the expected one.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "scenarios/runner.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using namespace tribunal::scenarios;

namespace {

const std::filesystem::path kSuite = tribunal::testing::source_dir() / "scenarios/suite";

// A suite script with `from` replaced by `to`, written beside a copy of its jobs directory's path.
Scenario edited(const std::string& file, const std::string& from, const std::string& to,
                const testing::TempDir& dir) {
  std::ifstream in(kSuite / file);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  s.replace(at, from.size(), to);
  const std::string job = "job = \"../jobs/";
  s.replace(s.find(job), job.size(), "job = \"" + (kSuite.parent_path() / "jobs").string() + "/");
  const auto path = dir.path / file;
  std::ofstream(path) << s;
  return load_scenario(path);
}

ScenarioResult run(const Scenario& s, const testing::TempDir& dir) {
  RunOptions o;
  o.work_dir = dir.path / "work";
  return run_scenario(s, o);
}

bool has(const std::vector<std::string>& lines, const std::string& needle) {
  for (const auto& l : lines)
    if (l.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("a crash that never happens fails its scenario, though the verdict is the expected one") {
  testing::TempDir dir("runner-crash");
  const ScenarioResult real = run(edited("live_crash_restart.toml", "round = 7", "round = 7", dir), dir);
  CHECK(real.passed);
  CHECK(real.crashes == 1);
  // The dispute has 16 rounds: round 999 never comes, the node never crashes.
  const ScenarioResult r = run(edited("live_crash_restart.toml", "round = 7", "round = 999", dir), dir);
  CHECK_FALSE(r.passed);
  CHECK(r.winner == "alice");  // the outcome alone would pass
  CHECK(r.crashes == 0);
  CHECK(has(r.mismatches, "provider alice: its answers behaviour 'crash_restart' never acted"));
  CHECK(has(r.mismatches, "crashes: expected 1, got 0"));
}

TEST_CASE("a malformed frame that is never sent fails its scenario") {
  testing::TempDir dir("runner-malformed");
  const ScenarioResult r =
      run(edited("mal_bad_signature.toml", "[provider.answers]\nkind = \"bad_signature\"\n",
                 "[provider.answers]\nkind = \"bad_signature\"\nround = 999\n", dir),
          dir);
  CHECK_FALSE(r.passed);
  CHECK(r.refused == 0);
  CHECK(has(r.mismatches, "its answers behaviour 'bad_signature' never acted"));
  CHECK(has(r.mismatches, "refused: expected 14, got 0"));
}

TEST_CASE("a scenario states how many disputes it plays") {
  testing::TempDir dir("runner-disputes");
  // Relabelling a sample with its own label changes nothing: one cheater fewer, one dispute fewer.
  const Scenario s = edited("three_providers.toml", "label = 9", "label = 9", dir);
  const ScenarioResult real = run(s, dir);
  CHECK(real.passed);
  CHECK(real.disputes == 2);
  Scenario no_op = s;
  no_op.providers[2].work.relabel_label = 2;  // the sample's true label
  const ScenarioResult r = run(no_op, dir);
  CHECK_FALSE(r.passed);
  CHECK(has(r.mismatches, "disputes: expected 2, got 1"));
}

// An imported model's scenario registers its model file on every node from [models] (docs/scenarios.md):
// with an absolute path the ResNet's cheater is convicted at the running-variance update it corrupted;
// without the table the job is refused as a node without --model refuses it; a value that is not a
// path is refused at its line.
TEST_CASE("a scenario's [models] registers an imported model's file on every node") {
  const std::string line = "resnet = \"../../tests/fixtures/onnx/resnet.onnx\"";
  testing::TempDir dir("runner-models");
  const Scenario s =
      edited("resnet_corrupt_running_var.toml", line,
             "resnet = \"" +
                 (kSuite.parent_path().parent_path() / "tests/fixtures/onnx/resnet.onnx").string() + "\"",
             dir);
  const ScenarioResult r = run(s, dir);
  CHECK(r.winner == "alice");
  REQUIRE(r.verdict);
  CHECK(r.verdict->node == 12);
  CHECK(r.verdict->step == 7);

  std::string missing;
  try {
    edited("resnet_corrupt_running_var.toml", line, "", dir);
  } catch (const std::exception& e) {
    missing = e.what();
  }
  CHECK(missing.find("model file 'resnet' (model.file) is not registered at this node") != std::string::npos);
  std::string bad;
  try {
    edited("resnet_corrupt_running_var.toml", line, "resnet = 3", dir);
  } catch (const std::exception& e) {
    bad = e.what();
  }
  CHECK(bad.find("resnet_corrupt_running_var.toml:9:10: models.resnet must be a path") != std::string::npos);
}
