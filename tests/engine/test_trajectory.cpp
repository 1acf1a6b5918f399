// Exactness of whole trajectories on the real Fashion-MNIST data: the trajectory root of a short
// job is a golden value, independent of the thread count and of the SIMD path, and a resumed run
// commits exactly what a straight run does. (.ci/run also compares the roots across compilers, -O
// levels, -march and on arm64 under qemu: scripts/check_roots.sh.)
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/error.h"
#include "engine/trainer.h"
#include "ops/simd.h"
#include "tests/engine/engine_helpers.h"
#include "tests/source_dir.h"
#include "tests/temp_dir.h"

using namespace tribunal;

namespace {

const std::filesystem::path kSource = tribunal::testing::source_dir();

/// The golden trajectory root of a short job file (relative to the source tree), from
/// tests/fixtures/golden_roots.txt, which scripts/check_roots.sh reads too.
std::string golden_root(const std::string& job_file) {
  return testing::pinned_root("golden_roots.txt", job_file);
}

// The AdamW job is scenarios/jobs/short_mlp.toml (scripts/check_roots.sh runs the same file); the SGD
// job differs only in its optimizer.
JobSpec short_job(OptimizerKind kind) {
  JobSpec job = load_job(kSource / "scenarios/jobs/short_mlp.toml");
  if (kind == OptimizerKind::Sgd) {
    job.optimizer = OptimizerSpec{};
    job.optimizer.kind = OptimizerKind::Sgd;
    job.optimizer.lr = 0.05f;
    job.optimizer.momentum = 0.9f;
    job.optimizer.weight_decay = 0.001f;
  }
  return job;
}

using testing::TempDir;

using testing::train;

// Golden values: regression pins recorded from this code's own output, not known answers derived
// independently of it (tools/commitment_kat.py is that, for the commitment layer alone). They show
// that the bits did not change, not that they were right: any change to an op, the data pipeline,
// the init or the commitment scheme changes them (and must bump kRepOpsContractVersion). The AdamW
// root is short_mlp.toml's in tests/fixtures/golden_roots.txt.
constexpr const char* kSgdRoot = "f594381a4ebf503539819035bffa6ff32f35097f894982ebe1f12d37203dafbb";

}  // namespace

TEST_CASE("a short job's trajectory root is golden and independent of threads") {
  for (OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
    const JobSpec job = short_job(kind);
    TempDir d1("t1"), d2("t2"), d3("t3");
    const TrainResult one = train(job, 1, d1.path);
    const TrainResult two = train(job, 2, d2.path);
    const TrainResult three = train(job, 3, d3.path);
    MESSAGE(to_hex(one.trajectory_root));
    CHECK(one.steps == 30);
    CHECK(one.checkpoint_hashes.size() == 5);  // steps 0, 8, 16, 24, 30
    CHECK(one.loss_last < one.loss_first);
    CHECK(two.trajectory_root == one.trajectory_root);
    CHECK(three.trajectory_root == one.trajectory_root);
    CHECK(two.final_state_hash == one.final_state_hash);
    CHECK(to_hex(one.trajectory_root) ==
          (kind == OptimizerKind::AdamW ? golden_root("scenarios/jobs/short_mlp.toml") : kSgdRoot));
    // The trajectory root is the Merkle root of the checkpoint files' recorded state hashes.
    for (int64_t t : {0, 8, 16, 24, 30}) CHECK(std::filesystem::exists(checkpoint_path(d1.path, t)));
    CHECK(read_checkpoint_header(checkpoint_path(d1.path, 30)).state_hash == one.final_state_hash);
  }
}

TEST_CASE("resume from a checkpoint continues bit-exactly") {
  const JobSpec job = short_job(OptimizerKind::AdamW);
  TempDir straight_dir("straight"), split_dir("split"), stride_dir("stride");
  const TrainResult straight = train(job, 1, straight_dir.path);

  // Stop between checkpoints (13 is no multiple of the stride), then resume with other threads.
  const TrainResult first = train(job, 2, split_dir.path, 13);
  CHECK(first.steps == 13);
  CHECK(first.trajectory_root != straight.trajectory_root);
  const TrainResult rest = train(job, 1, split_dir.path, -1, true);
  CHECK(rest.resumed_from == 13);
  CHECK(rest.steps == 30);
  CHECK(rest.trajectory_root == straight.trajectory_root);
  CHECK(rest.final_state_hash == straight.final_state_hash);

  // Stop on a stride checkpoint, resume.
  train(job, 1, stride_dir.path, 16);
  const TrainResult rest2 = train(job, 2, stride_dir.path, -1, true);
  CHECK(rest2.resumed_from == 16);
  CHECK(rest2.trajectory_root == straight.trajectory_root);
}

TEST_CASE("a tampered checkpoint is refused") {
  const JobSpec job = short_job(OptimizerKind::Sgd);
  TempDir dir("tamper");
  train(job, 1, dir.path, 8);
  const auto path = checkpoint_path(dir.path, 8);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);  // inside the last tensor's bytes
    f.put('\x7f');
  }
  ThreadPool pool(1);
  const Digest id = read_checkpoint_header(path).job_id;
  CHECK_THROWS_WITH_AS(load_checkpoint(path, job, id, pool),
                       doctest::Contains("do not match the recorded state_hash"), EngineError);
  CHECK_THROWS_WITH_AS(train(job, 1, dir.path, -1, true), doctest::Contains("state_hash"), EngineError);
  Digest other = id;
  other[0] ^= 1;
  CHECK_THROWS_WITH_AS(load_checkpoint(path, job, other, pool), doctest::Contains("belongs to job"),
                       EngineError);
}

// Golden roots of the short GPT and CNN jobs (every transformer and CNN op, dropout, clipping, the
// cosine schedule, decay on matrices only), regression pins recorded from this code's own output as
// above: any change to one of those ops' order of operations, to the text windows or to the init
// changes them. scripts/check_roots.sh checks the same files across compilers, -O levels, -march,
// thread counts, SIMD paths, a resume, and on arm64 under qemu.
TEST_CASE("the short GPT and CNN jobs' trajectory roots are golden") {
  for (const std::string file : {"scenarios/jobs/short_gpt.toml", "scenarios/jobs/short_cnn.toml"}) {
    CAPTURE(file);
    const JobSpec job = load_job(kSource / file);
    TempDir dir("golden");
    const TrainResult r = train(job, 2, dir.path);
    CHECK(to_hex(r.trajectory_root) == golden_root(file));
  }
}

// Imported models (docs/onnx.md): tests/fixtures/onnx/{cnn,gpt2,llama,resnet}.onnx, exported from PyTorch by
// tools/onnx_export.py, lowered onto RepOps ops (the GPT-2 and the Llama fed token ids, their loss over
// every position). Their roots are pinned like the built-in models' and independent of the thread count;
// scripts/check_roots.sh checks them across builds, SIMD paths and arm64.
TEST_CASE("imported ONNX models' trajectory roots are golden and independent of threads") {
  for (const std::string name : {"cnn", "gpt2", "llama", "resnet"}) {
    const std::string file = "scenarios/jobs/short_onnx_" + name + ".toml";
    CAPTURE(file);
    DataRegistry registry = DataRegistry::debian();
    registry.add_model(name, kSource / "tests/fixtures/onnx" / (name + ".onnx"));
    const JobSpec job = load_job(kSource / file, registry);
    TempDir d1("onnx1"), d3("onnx3");
    const TrainResult one = train(job, 1, d1.path);
    CHECK(one.loss_last < one.loss_first);
    CHECK(to_hex(one.trajectory_root) == golden_root(file));
    CHECK(to_hex(train(job, 3, d3.path).trajectory_root) == golden_root(file));
  }
}

// A whole trajectory on each SIMD path this machine has, forced for every kernel of the run (what
// TRIBUNAL_SIMD does for a process): the fast kernels are memcmp-equal to the references op by op
// (tests/ops), and this shows it for a training run, where the optimizer feeds every step's bits into
// the next. The short MLP job here; scripts/check_roots.sh runs every short job on every path.
TEST_CASE("the short MLP job's trajectory root is golden on every SIMD path") {
  const std::string file = "scenarios/jobs/short_mlp.toml";
  const JobSpec job = load_job(kSource / file);
  for (SimdPath path : available_simd_paths()) {
    CAPTURE(simd_path_name(path));
    const ScopedSimdPath forced(path);
    TempDir dir("path");
    CHECK(to_hex(train(job, 2, dir.path).trajectory_root) == golden_root(file));
  }
}

// The CUDA kernels (ops/cuda/kernels/) in their host SIMT emulation (docs/cuda.md): a run resumed
// halfway on the emulated device from a checkpoint the CPU kernels wrote commits the golden root (the
// straight runs of every short job: tests/cuda/device_roots.sh, through `tribunal train --device`).
TEST_CASE("a short job resumed on the emulated CUDA device gives the golden root") {
  if (!device_built(Device::CudaEmulated)) {
    MESSAGE("this build has no CUDA emulation (TRIBUNAL_CUDA_EMULATE=OFF): not checked");
    return;
  }
  const std::string file = "scenarios/jobs/short_cnn.toml";
  const JobSpec job = load_job(kSource / file);
  TempDir dir("emulated-resume");
  train(job, 2, dir.path, job.steps / 2);
  TrainOptions resumed;
  resumed.out_dir = dir.path;
  resumed.resume = true;
  resumed.evaluate = false;
  resumed.device = Device::CudaEmulated;
  CHECK(to_hex(run_training(job, resumed).trajectory_root) == golden_root(file));
}
