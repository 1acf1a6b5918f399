// The tolerance verifier (verifiers/tolerance.h) on the short fast-mode MLP: the calibrated boundary,
// an honest run on another GEMM accepted, a shortcut trainer refused, and the hide-in-the-noise
// manipulator accepted while its change stays inside the boundary and refused beyond it.
#include <doctest/doctest.h>

#include "cheats/attacks.h"
#include "engine/error.h"
#include "tests/temp_dir.h"
#include "tests/verifiers/verifier_fixture.h"
#include "verifiers/tolerance.h"

using namespace tribunal;
using namespace tribunal::verifiers;
using namespace tribunal::cheats;
using testing::mlp_train_set;
using testing::TempDir;

namespace {

const Calibration& calibration() {
  static const Calibration c = calibrate(testing::verifier_job("short_mlp_fast.toml"), mlp_train_set(), {});
  return c;
}

ToleranceReport check_all(const JobSpec& job, const std::filesystem::path& dir) {
  ToleranceOptions o;
  o.sample_fraction = 1.0;  // every interval opened
  o.kernel = {Float32Gemm::Naive, 0};
  return check_tolerance(job, dir, calibration(), o, &mlp_train_set());
}

}  // namespace

TEST_CASE("tolerance: fast mode differs across GEMMs; calibration measures it; the file round-trips") {
  const JobSpec job = testing::verifier_job("short_mlp_fast.toml");
  TempDir a("tol"), b("tol");
  const TrainResult ra = testing::train_into(job, a.path, {Float32Gemm::OpenBlas, 1});
  const TrainResult rb = testing::train_into(job, b.path, {Float32Gemm::Reversed, 0});
  CHECK(ra.job_id == rb.job_id);
  CHECK(ra.final_state_hash != rb.final_state_hash);  // not reproducible: the reason for a tolerance

  const Calibration& c = calibration();
  CHECK(c.intervals == 2);
  CHECK(c.distances.size() == 2 * 10);  // 5 kernels: 10 pairs per interval
  CHECK(c.max_distance > 0);
  CHECK(c.boundary == doctest::Approx(2.0 * c.max_distance));
  TempDir d("tol");
  write_calibration(d.path / "c.json", c);
  const Calibration back = read_calibration(d.path / "c.json", ra.job_id);
  CHECK(back.boundary == c.boundary);
  CHECK(back.kernels == c.kernels);
  CHECK_THROWS_AS(read_calibration(d.path / "c.json", Digest{}), EngineError);
  CHECK_THROWS_AS(calibrate(testing::verifier_job("short_mlp.toml"), mlp_train_set(), {}), EngineError);
}

TEST_CASE("tolerance: an honest run on another GEMM passes; a shortcut trainer does not") {
  const JobSpec job = testing::verifier_job("short_mlp_fast.toml");
  TempDir honest("tol"), lazy("tol");
  testing::train_into(job, honest.path, {Float32Gemm::Blocked, 0});
  const ToleranceReport h = check_all(job, honest.path);
  CHECK(h.passed);
  CHECK(h.opened.size() == 4);
  for (const OpenedInterval& o : h.opened) CHECK(o.distance <= calibration().boundary);

  train_shortcut(job, mlp_train_set(), lazy.path, ShortcutPlan{0.25, SkipMode::Extrapolate, false, 7},
                 {Float32Gemm::Blocked, 0});
  const ToleranceReport l = check_all(job, lazy.path);
  CHECK_FALSE(l.passed);
  CHECK(l.opened.at(0).passed);  // the first interval is honest
  CHECK_FALSE(l.opened.at(1).passed);
  CHECK(l.sent_bytes > 0);
}

TEST_CASE("tolerance: the hide-in-the-noise change passes inside the boundary, fails beyond it") {
  const JobSpec job = testing::verifier_job("short_mlp_fast.toml");
  const Calibration& c = calibration();
  TempDir inside("tol"), outside("tol");
  const AttackRun in =
      train_hide_in_noise(job, mlp_train_set(), inside.path, NoisePlan{c.boundary - c.max_distance, 3},
                          {Float32Gemm::OpenBlas, 1});
  CHECK(in.shift > 0);
  CHECK(check_all(job, inside.path).passed);
  train_hide_in_noise(job, mlp_train_set(), outside.path, NoisePlan{10 * c.boundary, 3},
                      {Float32Gemm::OpenBlas, 1});
  const ToleranceReport out = check_all(job, outside.path);
  CHECK_FALSE(out.passed);
  for (const OpenedInterval& o : out.opened) CHECK_FALSE(o.passed);
}
