// The checkpoint writer (engine/checkpoint_writer.h) copies each submitted state into the buffers of a
// checkpoint it has already written: every checkpoint must still hold its own step's values, never
// the earlier state whose storage it reuses.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "engine/checkpoint_writer.h"
#include "engine/job.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;

namespace {

/// The state at `step` of this test: every element of tensor t is a value of (step, t, element).
void fill(State& state, int64_t step) {
  for (size_t t = 0; t + 2 < state.tensors.size(); ++t) {
    Tensor& x = state.tensors[t];
    for (int64_t i = 0; i < x.numel(); ++i)
      x[i] = static_cast<float>(step * 1000 + static_cast<int64_t>(t)) + static_cast<float>(i % 7) * 0.125f;
  }
  state.tensors[state.tensors.size() - 2][0] = static_cast<float>(step);  // the "step" tensor
}

bool same_bits(const State& a, const State& b) {
  if (a.tensors.size() != b.tensors.size()) return false;
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    const Tensor& x = a.tensors[t];
    const Tensor& y = b.tensors[t];
    if (x.shape() != y.shape() ||
        std::memcmp(x.data(), y.data(), sizeof(float) * static_cast<size_t>(x.numel())) != 0)
      return false;
  }
  return true;
}

}  // namespace

TEST_CASE("checkpoint writer: each checkpoint holds its own step's state when the writer reuses buffers") {
  const JobSpec job = load_job(testing::source_dir() / "scenarios/jobs/short_mlp.toml");
  const Digest job_id{};
  testing::TempDir dir("checkpoint-writer");
  ThreadPool pool(2);
  State state = initial_state(job);
  std::map<int64_t, Digest> expected;
  {
    CheckpointWriter writer(job, job_id, dir.path, 1);
    for (int64_t step : {0, 3, 6, 9}) {
      fill(state, step);
      expected[step] = state_hash(state, pool);
      // Odd checkpoints copy on the calling thread, even ones over the pool.
      writer.submit(state, step % 2 == 0 ? &pool : nullptr);
      // Waiting for the write leaves the written copy as the next submit's buffers.
      if (step == 3) writer.finish();
    }
    CHECK(writer.finish() == expected);
  }
  for (int64_t step : {0, 3, 6, 9}) {
    State want = initial_state(job);
    fill(want, step);
    const State got = load_checkpoint(checkpoint_path(dir.path, step), job, job_id, pool);
    CHECK_MESSAGE(same_bits(got, want), "checkpoint of step " << step);
  }
}

TEST_CASE("checkpoint writer: a state of tensors split over the pool hashes as the state submitted") {
  // Tensors of several MiB: the copy splits each over the pool's threads (1 MiB a range at least).
  State state;
  state.tensors.push_back(Tensor(Shape{3 * 1024 * 1024 + 5}));
  state.tensors.push_back(Tensor(Shape{777}));
  state.tensors.push_back(Tensor(Shape{}));  // step
  state.tensors.push_back(Tensor(Shape{}));  // loss
  const JobSpec job = load_job(testing::source_dir() / "scenarios/jobs/short_mlp.toml");
  ThreadPool pool(3);
  std::map<int64_t, Digest> expected;
  CheckpointWriter writer(job, Digest{}, {}, 2);  // hashes only
  for (int64_t step = 0; step < 5; ++step) {
    fill(state, step);
    expected[step] = state_hash(state, pool);
    writer.submit(state, &pool);
    if (step % 2 == 1) writer.finish();
  }
  CHECK(writer.finish() == expected);
}
