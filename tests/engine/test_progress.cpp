// Training progress (engine/progress.h) and the run logs written as training goes (engine/run_log.h
// RunLogAppender).
#include <doctest/doctest.h>

#include <chrono>

#include "engine/progress.h"
#include "engine/run_log.h"
#include "tests/temp_dir.h"

using namespace tribunal;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("ProgressMeter: rate, elapsed and ETA from the first step it sees") {
  ProgressMeter m(seconds(10));
  const ProgressMeter::Clock::time_point t0{seconds(1000)};
  m.update(100, 1100, t0);  // a resumed run: its earlier 100 steps are not in the rate
  CHECK(m.steps_per_second() == 0);
  CHECK_FALSE(m.eta().has_value());
  CHECK(m.line() == "step 100/1100 (9.1 %), elapsed 0.0 s");
  m.update(300, 1100, t0 + seconds(4));
  CHECK(m.steps_per_second() == doctest::Approx(50.0));
  CHECK(m.elapsed().count() == doctest::Approx(4.0));
  REQUIRE(m.eta().has_value());
  CHECK(m.eta()->count() == doctest::Approx(16.0));
  CHECK(m.line() == "step 300/1100 (27.3 %), 50 steps/s, elapsed 4.0 s, ETA 16.0 s");
  m.update(1100, 1100, t0 + seconds(20));
  CHECK(m.line() == "step 1100/1100 (100.0 %), 50 steps/s, elapsed 20.0 s, ETA 0.0 s");
}

TEST_CASE("ProgressMeter: a line at the first step, once per interval and at the last") {
  ProgressMeter m(seconds(10));
  const ProgressMeter::Clock::time_point t0{seconds(5)};
  CHECK_FALSE(m.report_due());  // nothing seen yet
  int said = 0;
  for (int64_t step = 1; step <= 100; ++step) {
    m.update(step, 100, t0 + milliseconds(500 * step));  // 2 steps/s: 50 s in all
    if (m.report_due()) ++said;
  }
  // Step 1, then at 10 s intervals after it (steps 21, 41, 61, 81), then step 100.
  CHECK(said == 6);
  CHECK_FALSE(m.report_due());  // the last step is said once
  ProgressMeter every(milliseconds(0));
  for (int64_t step = 1; step <= 3; ++step) {
    every.update(step, 3, t0);
    CHECK(every.report_due());
  }
}

TEST_CASE("format_duration and format_rate") {
  CHECK(format_duration(std::chrono::duration<double>(0.04)) == "0.0 s");
  CHECK(format_duration(std::chrono::duration<double>(59.94)) == "59.9 s");
  CHECK(format_duration(seconds(74)) == "1:14");
  CHECK(format_duration(seconds(3 * 3600 + 62)) == "3:01:02");
  CHECK(format_rate(2410.4) == "2410 steps/s");
  CHECK(format_rate(12.345) == "12.3 steps/s");
  CHECK(format_rate(0.25) == "0.25 steps/s");
}

TEST_CASE("RunLogAppender: each step's lines are on disk as it goes, as write_*_log writes them") {
  testing::TempDir dir("run-log-appender");
  const std::vector<LossRecord> earlier = {{0, 2.5f}, {1, 2.25f}};
  const std::vector<ResourceSample> earlier_samples = {{0, seconds(1), seconds(2), 1.0},
                                                       {1, seconds(1), milliseconds(500), 0.25}};
  const LossRecord next{2, 0.1f};
  const ResourceSample next_sample{2, milliseconds(250), milliseconds(125), 0.5};
  {
    RunLogAppender appender(dir.path, earlier, earlier_samples);
    CHECK(read_loss_log(loss_log_path(dir.path)).size() == 2);
    appender.append(next, next_sample);
    // Read back while the appender is open: the step is there already.
    const auto losses = read_loss_log(loss_log_path(dir.path));
    REQUIRE(losses.size() == 3);
    CHECK(losses[2].step == 2);
    CHECK(losses[2].loss == 0.1f);  // exact: float32 printed with 9 significant digits
    const auto samples = read_resource_log(resource_log_path(dir.path));
    REQUIRE(samples.size() == 3);
    CHECK(samples[2].utilisation == 0.5);
  }
  // The same bytes as the atomic writers' (a finished run rewrites the files with those).
  const std::string appended = testing::read_text(loss_log_path(dir.path));
  const std::string appended_resources = testing::read_text(resource_log_path(dir.path));
  std::vector<LossRecord> all = earlier;
  all.push_back(next);
  std::vector<ResourceSample> all_samples = earlier_samples;
  all_samples.push_back(next_sample);
  write_loss_log(loss_log_path(dir.path), all);
  write_resource_log(resource_log_path(dir.path), all_samples);
  CHECK(testing::read_text(loss_log_path(dir.path)) == appended);
  CHECK(testing::read_text(resource_log_path(dir.path)) == appended_resources);
  CHECK(appended == "step,loss\n0,2.5\n1,2.25\n2,0.100000001\n");
}

TEST_CASE("RunLogAppender: an unwritable directory is named") {
  testing::TempDir dir("run-log-appender-missing");
  const auto missing = dir.path / "no" / "such";
  try {
    RunLogAppender appender(missing, {}, {});
    FAIL("no error");
  } catch (const std::exception& e) {
    CHECK(std::string(e.what()).find((missing / "losses.csv").string() + ": cannot write") == 0);
  }
}
