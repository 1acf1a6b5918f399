// The Lab Apex audits (verifiers/audit.h) on a short honest run (every check passes) and on runs that
// must fail one: missing and extra losses, forged losses, a shortcut trainer; and the loss forger that
// passes them all (the audits' blind spot, docs/verifiers.md).
#include <doctest/doctest.h>

#include <algorithm>

#include "cheats/attacks.h"
#include "engine/run_log.h"
#include "tests/temp_dir.h"
#include "tests/verifiers/verifier_fixture.h"
#include "verifiers/audit.h"

using namespace tribunal;
using namespace tribunal::verifiers;
using namespace tribunal::cheats;
using testing::mlp_train_set;
using testing::TempDir;

namespace {

const CheckResult& check(const AuditReport& r, const std::string& name) {
  const auto it =
      std::find_if(r.checks.begin(), r.checks.end(), [&](const CheckResult& c) { return c.name == name; });
  REQUIRE(it != r.checks.end());
  return *it;
}

double figure(const CheckResult& c, const std::string& name) {
  for (const auto& [n, v] : c.figures)
    if (n == name) return v;
  FAIL("no figure " << name);
  return 0;
}

AuditReport audit(const JobSpec& job, const std::filesystem::path& dir) {
  return run_audit(job, dir, AuditOptions{}, &mlp_train_set());
}

/// Every check but the resource check passes. That one reads CPU-time samples measured while the test
/// trained, which a loaded machine makes noisy (docs/verifiers.md: it flags honest runs); it is tested
/// on fixed samples instead.
void every_check_but_resources_passes(const AuditReport& r) {
  for (const char* name : {"loss_count", "pev", "vmo"}) {
    CAPTURE(name);
    CHECK(check(r, name).passed);
  }
  CHECK(figure(check(r, "resource_utilisation"), "samples") == 30);
}

}  // namespace

TEST_CASE("audit: tribunal train's run logs, and every check passes on an honest run") {
  const JobSpec job = testing::verifier_job("short_mlp.toml");
  TempDir dir("audit");
  const TrainResult t = testing::train_into(job, dir.path);
  const std::vector<LossRecord> losses = read_loss_log(loss_log_path(dir.path));
  REQUIRE(losses.size() == 30);
  CHECK(losses.front().step == 0);
  CHECK(losses.back().step == 29);
  CHECK(losses.front().loss == t.loss_first);  // printed with 9 digits: the float comes back exactly
  CHECK(losses.back().loss == t.loss_last);
  CHECK(read_resource_log(resource_log_path(dir.path)).size() == 30);

  for (const ResourceSample& x : read_resource_log(resource_log_path(dir.path))) {
    CHECK(x.utilisation >= 0);
    CHECK(x.utilisation <= 1);
  }

  const AuditReport r = audit(job, dir.path);
  every_check_but_resources_passes(r);
  CHECK(figure(check(r, "loss_count"), "logged") == 30);
  CHECK(figure(check(r, "pev"), "checkpoints") == 5);
  CHECK(figure(check(r, "vmo"), "intervals_replayed") == 1);  // 30 steps: less than one epoch
  CHECK(figure(check(r, "vmo"), "worst_distance") == 0);      // RepOps: the replay is bitwise the checkpoint
  CHECK(r.evidence_bytes > 0);
}

TEST_CASE("audit: missing, extra and forged losses fail") {
  const JobSpec job = testing::verifier_job("short_mlp.toml");
  TempDir dir("audit");
  testing::train_into(job, dir.path);
  const std::vector<LossRecord> honest = read_loss_log(loss_log_path(dir.path));

  std::vector<LossRecord> fewer(honest.begin(), honest.end() - 1);
  write_loss_log(loss_log_path(dir.path), fewer);
  const AuditReport missing = audit(job, dir.path);
  CHECK_FALSE(check(missing, "loss_count").passed);
  CHECK(figure(check(missing, "loss_count"), "missing") == 1);

  std::vector<LossRecord> more = honest;
  more.push_back({29, 1.0f});
  write_loss_log(loss_log_path(dir.path), more);
  const AuditReport extra = audit(job, dir.path);
  CHECK_FALSE(check(extra, "loss_count").passed);
  CHECK(figure(check(extra, "loss_count"), "duplicates") == 1);

  std::vector<LossRecord> forged = honest;
  for (LossRecord& x : forged) x.loss *= 0.5f;  // a run that claims to learn twice as well
  write_loss_log(loss_log_path(dir.path), forged);
  const AuditReport halved = audit(job, dir.path);
  CHECK(check(halved, "loss_count").passed);
  CHECK_FALSE(check(halved, "pev").passed);
  CHECK(figure(check(halved, "pev"), "worst_relative_difference") > 0.3);
}

TEST_CASE("audit: shortcut trainers fail the resource check or the top-k replay") {
  const JobSpec job = testing::verifier_job("short_mlp.toml");
  TempDir idle("audit"), extrapolating("audit");
  // Skips every step after the first interval and idles through them: 22 of 30 samples near 0.
  ShortcutPlan all{1.0, SkipMode::Unchanged, false, 7};
  const AttackRun a = train_shortcut(job, mlp_train_set(), idle.path, all);
  CHECK(a.skipped_steps == 22);
  const AuditReport ra = audit(job, idle.path);
  CHECK(check(ra, "loss_count").passed);
  // Its idle steps sleep: their measured utilisation is below that of the steps it computed. (Whether
  // the α rule then fails depends on how noisy the computed steps' samples are on this machine; the
  // rule itself is tested on fixed samples below.)
  const std::vector<ResourceSample> samples = read_resource_log(resource_log_path(idle.path));
  REQUIRE(samples.size() == 30);
  double computed = 0, skipped = 0;
  for (const ResourceSample& x : samples) (x.step < 8 ? computed : skipped) += x.utilisation;
  CHECK(skipped / 22 < computed / 8);

  // Extrapolates half of every later interval: that interval moves most, so it is replayed.
  ShortcutPlan half{0.5, SkipMode::Extrapolate, false, 7};
  const AttackRun b = train_shortcut(job, mlp_train_set(), extrapolating.path, half);
  CHECK(b.skipped_steps == 10);  // 12-15, 20-23, 28-29
  AuditOptions two_intervals;
  two_intervals.top_k = 2;
  const AuditReport rb = run_audit(job, extrapolating.path, two_intervals, &mlp_train_set());
  CHECK_FALSE(check(rb, "vmo").passed);
  CHECK(figure(check(rb, "vmo"), "worst_distance") > 0);
}

TEST_CASE("audit: the loss forger that skips every later step passes all four checks") {
  const JobSpec job = testing::verifier_job("short_mlp.toml");
  TempDir dir("audit");
  ShortcutPlan forger{1.0, SkipMode::Unchanged, true, 7};
  const AttackRun a = train_shortcut(job, mlp_train_set(), dir.path, forger);
  CHECK(a.computed_steps == 8);
  // Its later intervals do not move, so the top-1 replay picks the honest first one; its logged
  // losses follow its own checkpoints; its resource samples are copied from real steps.
  const AuditReport r = audit(job, dir.path);
  every_check_but_resources_passes(r);
}

TEST_CASE("audit: the resource check on fixed samples: busy steps pass, idle ones fail") {
  const JobSpec job = testing::verifier_job("short_mlp.toml");
  TempDir dir("audit");
  testing::train_into(job, dir.path);
  std::vector<ResourceSample> busy;
  for (int64_t t = 0; t < 30; ++t) {
    const double u = t % 2 ? 0.97 : 0.95;  // half the samples above the mean
    busy.push_back({t, std::chrono::duration<double>(0.01), std::chrono::duration<double>(0.01 * u), u});
  }
  write_resource_log(resource_log_path(dir.path), busy);
  const AuditReport ok = audit(job, dir.path);
  CHECK(ok.passed());
  CHECK(figure(check(ok, "resource_utilisation"), "fraction_above_mean") == doctest::Approx(0.5));
  std::vector<ResourceSample> idle = busy;
  for (size_t t = 8; t < idle.size(); ++t) idle[t].utilisation = 0.01;  // 22 of 30 idle: 8 above the mean
  write_resource_log(resource_log_path(dir.path), idle);
  const AuditReport bad = audit(job, dir.path);
  CHECK_FALSE(check(bad, "resource_utilisation").passed);
  CHECK(figure(check(bad, "resource_utilisation"), "fraction_above_mean") == doctest::Approx(8.0 / 30));
}
