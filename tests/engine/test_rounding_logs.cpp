// Rounding-log mode in the engine: the job's [numerics] table and its place in job_id, the step logs'
// files, and a step graph run in float64 that logs, replays the log bit for bit with another GEMM, and
// refuses a forged decision at its node (docs/numerics.md "Rounding-log mode").
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "engine/error.h"
#include "engine/executor.h"
#include "engine/job.h"
#include "engine/rounding_logs.h"
#include "engine/state.h"
#include "engine/step.h"
#include "ops/thread_pool.h"
#include "tests/engine/job_text.h"

using namespace tribunal;
using jobtest::error_of;
using jobtest::replace;

namespace {

const char* kJob = R"([model]
kind = "mlp"
widths = [6, 5, 3]
[train]
seed = 7
steps = 4
batch_size = 4
stride = 2
[optimizer]
kind = "sgd"
lr = 0.05
[numerics]
mode = "rounding-log"
)";

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("tribunal-rlog-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Logs with decisions 0, 1, 2, … mod 3 (a valid encoding of any count).
RoundingLog some_log(uint64_t count) {
  std::vector<Rounding> d;
  for (uint64_t i = 0; i < count; ++i) d.push_back(static_cast<Rounding>(i % 3));
  return RoundingLog{count, pack_trits(d)};
}

}  // namespace

// The default τ comes from each op's descriptor (OpInfo::float64_spread); these are the values of every
// kind, as docs/numerics.md "Rounding-log mode" chose them, so a descriptor with the wrong spread fails.
TEST_CASE("the default tau of every op kind") {
  const std::set<OpKind> sums{OpKind::Linear,
                              OpKind::Matmul,
                              OpKind::Conv2d,
                              OpKind::Conv2dBackwardInput,
                              OpKind::Conv2dBackwardWeight,
                              OpKind::Conv2dBackwardBias,
                              OpKind::SumRows,
                              OpKind::EmbeddingBackward,
                              OpKind::LayerNorm,
                              OpKind::LayerNormBackward,
                              OpKind::SoftmaxBackward,
                              OpKind::SumToShape,
                              OpKind::ReduceMean,
                              OpKind::GlobalAvgPool,
                              OpKind::BatchNorm,
                              OpKind::BatchNormBackward,
                              OpKind::BatchNormRunning};
  const std::set<OpKind> exact{OpKind::Gather,       OpKind::Reshape,
                               OpKind::Add,          OpKind::Relu,
                               OpKind::ReluBackward, OpKind::Embedding,
                               OpKind::SplitHeads,   OpKind::MergeHeads,
                               OpKind::Dropout,      OpKind::DropoutBackward,
                               OpKind::MaxPool2d,    OpKind::MaxPool2dBackward,
                               OpKind::Scale,        OpKind::BroadcastBinary,
                               OpKind::Where,        OpKind::WhereBackward,
                               OpKind::GatherRows,   OpKind::Transpose,
                               OpKind::Slice,        OpKind::SliceBackward,
                               OpKind::Concat,       OpKind::ReduceMeanBackward,
                               OpKind::Expand,       OpKind::GlobalAvgPoolBackward};
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    CAPTURE(std::string(op_name(kind)));
    const double want = sums.count(kind) ? 0x1p-5 : exact.count(kind) ? 0.0 : 0x1p-16;
    CHECK(default_rounding_tau(kind) == want);
    CHECK(NumericsSpec().tau_of(kind) == want);
  }
  // unary and unary_backward: fixed formulas through libm's functions in float64 (Float64Spread::Libm).
  CHECK(default_rounding_tau(OpKind::Unary) == 0x1p-16);
  CHECK(default_rounding_tau(OpKind::UnaryBackward) == 0x1p-16);
}

TEST_CASE("[numerics] selects rounding-log mode and its tau per op kind") {
  const JobSpec repops = parse_job(replace(kJob, "mode = \"rounding-log\"", ""), "job.toml");
  CHECK(repops.numerics.mode == NumericsMode::RepOps);
  const JobSpec job = parse_job(kJob, "job.toml");
  CHECK(job.numerics.mode == NumericsMode::RoundingLog);
  CHECK(job.numerics.tau_of(OpKind::Matmul) == default_rounding_tau(OpKind::Matmul));
  CHECK(job.numerics.tau_of(OpKind::Relu) == default_rounding_tau(OpKind::Relu));
  CHECK(default_rounding_tau(OpKind::Matmul) > default_rounding_tau(OpKind::Gelu));
  CHECK(default_rounding_tau(OpKind::Gelu) > 0.0);
  CHECK(default_rounding_tau(OpKind::Add) == 0.0);

  const JobSpec all = parse_job(std::string(kJob) + "tau = 0.01\n", "job.toml");
  for (double tau : all.numerics.tau) CHECK(tau == 0.01);
  const JobSpec table =
      parse_job(std::string(kJob) + "tau = { default = 0.001, matmul = 0.02 }\n", "job.toml");
  CHECK(table.numerics.tau_of(OpKind::Matmul) == 0.02);
  CHECK(table.numerics.tau_of(OpKind::Linear) == 0.001);
  const JobSpec partial = parse_job(std::string(kJob) + "[numerics.tau]\nlinear = 0.125\n", "job.toml");
  CHECK(partial.numerics.tau_of(OpKind::Linear) == 0.125);
  CHECK(partial.numerics.tau_of(OpKind::Relu) == default_rounding_tau(OpKind::Relu));

  CHECK(error_of(replace(kJob, "rounding-log", "float64")).find("numerics.mode 'float64' is not supported") !=
        std::string::npos);
  CHECK(error_of(std::string(kJob) + "tau = 0.3\n").find("job.toml:14:7: numerics.tau") == 0);
  CHECK(error_of(std::string(kJob) + "tau = -0.01\n").find("numerics.tau") != std::string::npos);
  CHECK(parse_job(std::string(kJob) + "tau = 0\n", "job.toml").numerics.tau_of(OpKind::Matmul) == 0.0);
  CHECK(error_of(std::string(kJob) + "tau = { matmull = 0.01 }\n").find("'matmull' is not an op name") !=
        std::string::npos);
  CHECK(error_of(std::string(kJob) + "tau = \"big\"\n").find("numerics.tau must be a number or a table") !=
        std::string::npos);
  CHECK(error_of(replace(kJob, "mode = \"rounding-log\"", "tau = 0.01"))
            .find("unknown key 'tau' in [numerics]") != std::string::npos);
}

TEST_CASE("job_id covers the numerics mode and every tau; RepOps ids stand") {
  const Digest root{};
  const DataShape shape{100, 6, 3, 0};
  const std::string repops_text = replace(kJob, "[numerics]\nmode = \"rounding-log\"\n", "");
  const Digest repops = job_id(parse_job(repops_text, "job.toml"), root, shape);
  CHECK(job_id(parse_job(repops_text + "[numerics]\nmode = \"repops\"\n", "job.toml"), root, shape) ==
        repops);
  const Digest rlog = job_id(parse_job(kJob, "job.toml"), root, shape);
  CHECK(rlog != repops);
  CHECK(job_id(parse_job(std::string(kJob) + "tau = { relu = 0.0001 }\n", "job.toml"), root, shape) != rlog);
  CHECK(job_id(parse_job(std::string(kJob) + "quantum_bits = 38\n", "job.toml"), root, shape) ==
        rlog);  // the default
  CHECK(job_id(parse_job(std::string(kJob) + "quantum_bits = 40\n", "job.toml"), root, shape) != rlog);
  CHECK_THROWS_WITH_AS(parse_job(std::string(kJob) + "quantum_bits = 20\n", "job.toml"),
                       doctest::Contains("quantum_bits"), EngineError);
}

TEST_CASE("job_id: the τ of op kinds appended after scale enter only when not their default") {
  const Digest root{};
  const DataShape shape{100, 6, 3, 0};
  const std::string repops_text = replace(kJob, "[numerics]\nmode = \"rounding-log\"\n", "");
  const JobSpec rlog_job = parse_job(kJob, "job.toml");
  // The encoding every rounding-log job had before broadcast_binary existed: the RepOps fields, then
  // u8(4) ‖ u8(mode) ‖ the τ of the 33 kinds gather … scale ‖ u64(quantum_bits), nothing more.
  std::vector<uint8_t> legacy = canonical_job_encoding(parse_job(repops_text, "job.toml"), root, shape);
  auto u64 = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) legacy.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  legacy.push_back(4);
  legacy.push_back(static_cast<uint8_t>(NumericsMode::RoundingLog));
  REQUIRE(kTauKindsInIdV1 == 33);
  for (size_t k = 0; k < 33; ++k) u64(std::bit_cast<uint64_t>(default_rounding_tau(static_cast<OpKind>(k))));
  u64(static_cast<uint64_t>(kDefaultRoundingQuantumBits));
  CHECK(canonical_job_encoding(rlog_job, root, shape) == legacy);
  const Digest rlog = job_id(rlog_job, root, shape);
  // A τ for an appended kind at its default changes nothing; away from it, the id.
  CHECK(job_id(parse_job(std::string(kJob) + "tau = { sum_to_shape = 0.03125 }\n", "job.toml"), root,
               shape) == rlog);
  CHECK(job_id(parse_job(std::string(kJob) + "tau = { transpose = 0.0, concat = 0.0 }\n", "job.toml"), root,
               shape) == rlog);
  const Digest named =
      job_id(parse_job(std::string(kJob) + "tau = { broadcast_binary = 0.0001 }\n", "job.toml"), root, shape);
  CHECK(named != rlog);
  // One number sets every kind's τ, the appended ones too: not the job that sets only the first 33.
  const JobSpec all = parse_job(std::string(kJob) + "tau = 0.001\n", "job.toml");
  JobSpec first = rlog_job;
  for (size_t k = 0; k < kTauKindsInIdV1; ++k) first.numerics.tau[k] = 0.001;
  CHECK(all.numerics.tau[static_cast<size_t>(OpKind::BroadcastBinary)] == 0.001);
  CHECK(job_id(all, root, shape) != job_id(first, root, shape));
}

// A GPT step's logs are ~16 MB of packed trits: the file is cut into zstd frames of 1 MiB, compressed
// on the trainer's pool. The frames read back as one stream, with or without a pool, byte for byte.
TEST_CASE("a step's rounding logs of several MiB round-trip through zstd frames made on a pool") {
  TempDir dir;
  StepRoundingLog log{9, {some_log(5'000'000), some_log(1), some_log(12'000'000), some_log(0)}};
  const uint64_t counts[] = {5'000'000, 1, 12'000'000, 0};
  ThreadPool pool(2);
  const std::filesystem::path pooled = rounding_log_path(dir.path / "a", 9),
                              serial = rounding_log_path(dir.path / "b", 9);
  const uint64_t bytes = write_rounding_log(pooled, log, &pool);
  CHECK(bytes == std::filesystem::file_size(pooled));
  CHECK(write_rounding_log(serial, log) == bytes);  // the same frames whoever compresses them
  for (const auto& path : {pooled, serial}) {
    const StepRoundingLog back = read_rounding_log(path, 9, counts);
    CHECK(back.step == 9);
    CHECK(back.nodes == log.nodes);
  }
  // More than one frame: zstd's magic number 0xFD2FB528 (little-endian) appears again after the first.
  std::ifstream in(pooled, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(file.rfind("\x28\xb5\x2f\xfd", 0) == 0);
  CHECK(file.find("\x28\xb5\x2f\xfd", 4) != std::string::npos);
}

TEST_CASE("a step's rounding logs round-trip through their file, and a wrong file is refused by name") {
  TempDir dir;
  StepRoundingLog log{3, {some_log(7), some_log(0), some_log(11)}};
  const std::filesystem::path path = rounding_log_path(dir.path, 3);
  CHECK(path.filename() == "step_00000003.rlog.zst");
  CHECK(write_rounding_log(path, log) > 0);
  const uint64_t counts[] = {7, 0, 11};
  const StepRoundingLog back = read_rounding_log(path, 3, counts);
  CHECK(back.step == 3);
  CHECK(back.nodes == log.nodes);
  CHECK(rounding_log_leaf(log.nodes[0]) != rounding_log_leaf(log.nodes[2]));
  CHECK(rounding_log_leaf(some_log(7)) == rounding_log_leaf(log.nodes[0]));

  const auto error = [&](const std::filesystem::path& p, int64_t step, std::span<const uint64_t> c) {
    try {
      read_rounding_log(p, step, c);
    } catch (const EngineError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error(path, 4, counts).find("rounding log of step 3, expected step 4") != std::string::npos);
  const uint64_t two[] = {7, 0};
  CHECK(error(path, 3, two).find("rounding log of 3 nodes, but step 3's graph has 2") != std::string::npos);
  const uint64_t other[] = {7, 0, 12};
  CHECK(error(path, 3, other).find("node 2 logs 11 decisions, but its outputs hold 12 values") !=
        std::string::npos);
  CHECK(error(dir.path / "none.rlog.zst", 3, counts).find("none.rlog.zst: cannot open rounding log") !=
        std::string::npos);
  std::ofstream(dir.path / "text.rlog.zst") << "hello";
  CHECK(error(dir.path / "text.rlog.zst", 3, counts).find("truncated or corrupt (reading the header: ") !=
        std::string::npos);
  // A file cut short anywhere (within the header, the counts, the trits or the frame's checksum), and one
  // with bytes after its frames, are refused.
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t keep : {size_t{10}, file.size() / 2, file.size() - 1}) {
    CAPTURE(keep);
    std::ofstream(dir.path / "cut.rlog.zst", std::ios::binary) << file.substr(0, keep);
    CHECK(error(dir.path / "cut.rlog.zst", 3, counts).find("truncated or corrupt") != std::string::npos);
  }
  std::ofstream(dir.path / "long.rlog.zst", std::ios::binary) << file << "trailing";
  CHECK(
      error(dir.path / "long.rlog.zst", 3, counts).find("trailing bytes after the rounding log of 3 nodes") !=
      std::string::npos);
}

TEST_CASE("a rounding-log step graph replays bit for bit with another GEMM and refuses a forged decision") {
  const JobSpec job = parse_job(kJob, "job.toml");
  const DataShape shape{8, 6, 3, 0};
  const std::vector<int64_t> batch{0, 3, 5, 6};
  const StepGraph g = build_step_graph(job, shape, 0, batch);
  State state = initial_state(job);
  Tensor x(Shape{8, 6}), y(Shape{8});
  for (int64_t i = 0; i < 48; ++i) x[i] = static_cast<float>((i * 37 % 101) - 50) / 23.0f;
  for (int64_t i = 0; i < 8; ++i) y[i] = static_cast<float>(i % 3);
  const Tensor* data[] = {&x, &y};
  const std::vector<Tensor*> st = state.pointers();
  const std::vector<const Tensor*> in(st.begin(), st.end());
  ThreadPool pool(1);

  // The trainer: its own decisions, logged.
  Executor trainer(pool);
  StepRoundingLog log;
  log.step = 0;
  trainer.set_rounding(RoundingRun{&job.numerics, Float64Gemm::Naive, nullptr, &log, {}});
  trainer.run(g, in, data);
  REQUIRE(log.nodes.size() == g.nodes.size());
  uint64_t values = 0;
  for (const RoundingLog& n : log.nodes) values += n.count;
  CHECK(values > 0);

  // A replayer with another GEMM (OpenBLAS where built): the same float32 values everywhere.
  Executor replayer(pool);
  StepRoundingLog replayed;
  const Float64Gemm other = default_float64_gemm();
  replayer.set_rounding(RoundingRun{&job.numerics, other, &log, &replayed, {}});
  replayer.run(g, in, data);
  CHECK(replayed.nodes == log.nodes);
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (g.values[v].source != ValueSource::Node) continue;
    CAPTURE(v);
    const std::span<const float> a = trainer.value(static_cast<ValueId>(v)).values();
    const std::span<const float> b = replayer.value(static_cast<ValueId>(v)).values();
    CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
  }

  // The same graph in RepOps mode gives values close to, not necessarily equal to, these.
  Executor repops(pool, true);
  repops.run(g, in, data);
  const float l64 = trainer.value(g.loss)[0], l32 = repops.value(g.loss)[0];
  CHECK(std::fabs(l64 - l32) <= 1e-5f * std::fabs(l32));

  // A forged decision: "up" for the first value of the first node (a gather: exact float32 values).
  StepRoundingLog forged = log;
  std::vector<Rounding> d = unpack_trits(forged.nodes[0].packed, forged.nodes[0].count);
  d[0] = Rounding::Up;
  forged.nodes[0].packed = pack_trits(d);
  Executor cheated(pool);
  cheated.set_rounding(RoundingRun{&job.numerics, Float64Gemm::Naive, &forged, nullptr, {}});
  try {
    cheated.run(g, in, data);
    FAIL("the forged decision was replayed");
  } catch (const RoundingLogRefused& e) {
    CHECK(e.node == 0);
    CHECK(e.value == 0);
    CHECK(std::string(e.what()).find(
              "node 0 (gather): the rounding log's decision for output 0 element 0 is not allowed") !=
          std::string::npos);
  }
}
