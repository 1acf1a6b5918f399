// Helpers of the engine tests: training a job to a directory, the pinned roots of the fixtures, and
// looking into step graphs.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/trainer.h"
#include "tests/source_dir.h"

namespace tribunal::testing {

/// run_training of `job` on `threads` threads into `out`, without evaluation; stop_at, resume and an
/// already loaded training set `data` as in TrainOptions.
inline TrainResult train(const JobSpec& job, int threads, const std::filesystem::path& out,
                         int64_t stop_at = -1, bool resume = false, const Dataset* data = nullptr) {
  TrainOptions o;
  o.train = data;
  o.threads = threads;
  o.out_dir = out;
  o.stop_at = stop_at;
  o.resume = resume;
  o.evaluate = false;
  return run_training(job, o);
}

/// The pinned trajectory root of `job_file` (relative to the source tree, e.g.
/// "scenarios/jobs/short_mlp.toml") in the fixture `roots_file` (tests/fixtures/golden_roots.txt or
/// sharded_roots.txt, which scripts read too): lines "job file, root (hex)", '#' comments.
inline std::string pinned_root(const std::string& roots_file, const std::string& job_file) {
  std::ifstream in(tribunal::testing::source_dir() / "tests/fixtures" / roots_file);
  REQUIRE(in);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string file, root;
    if (line.empty() || line[0] == '#' || !(fields >> file >> root)) continue;
    if (file == job_file) return root;
  }
  FAIL("no root for " << job_file << " in " << roots_file);
  return {};
}

/// The id of the graph value called `name` (fails the test when there is none).
inline ValueId value_named(const StepGraph& g, const std::string& name) {
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].name == name) return static_cast<ValueId>(v);
  FAIL("no value named " << name);
  return 0;
}

/// The batch rows 0 … n−1.
inline std::vector<int64_t> first_rows(int64_t n) {
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

}  // namespace tribunal::testing
