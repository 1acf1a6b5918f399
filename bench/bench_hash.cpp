// State-hashing throughput: tensor_leaf (protocol/tensor_hash.h, BLAKE3) vs raw libsodium BLAKE2b
// (crypto_generichash, the hash of contract version 2) over the same bytes, single-threaded; raw
// BLAKE3 over the same bytes shows what the leaf encoding itself costs. Prints one JSON object to
// stdout. GB/s uses 1 GB = 1e9 bytes.
#include <blake3.h>
#include <fmt/core.h>
#include <sodium.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"

using namespace tribunal;

namespace {

struct BenchTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

BenchTensor make_tensor(std::vector<int64_t> shape, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  BenchTensor t{std::move(shape), std::vector<float>(static_cast<size_t>(n))};
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : t.data) {
    x = x * 1664525u + 1013904223u;  // LCG; finite values in [-1, 1)
    f = static_cast<float>(static_cast<int32_t>(x >> 8) - (1 << 23)) / static_cast<float>(1 << 23);
  }
  return t;
}

size_t total_bytes(const std::vector<BenchTensor>& ts) {
  size_t b = 0;
  for (const auto& t : ts) b += t.data.size() * sizeof(float);
  return b;
}

constexpr double kTargetGbPerS = 3.0;  // state hashing per core (issue 33)

uint8_t g_sink = 0;  // folds every digest so the work cannot be optimized away

// Runs `body` (one pass over `bytes` bytes) until at least min_s seconds have passed; returns GB/s.
nlohmann::json time_it(size_t bytes, const std::function<void()>& body, double min_s = 0.5) {
  using clock = std::chrono::steady_clock;
  body();  // warm-up
  int reps = 0;
  const auto t0 = clock::now();
  double s = 0;
  do {
    body();
    ++reps;
    s = std::chrono::duration<double>(clock::now() - t0).count();
  } while (s < min_s);
  return {{"reps", reps}, {"seconds", s}, {"gb_per_s", static_cast<double>(bytes) * reps / s / 1e9}};
}

// Ours: the state commitment = Merkle root over the tensor leaves.
void hash_state(const std::vector<BenchTensor>& ts) {
  std::vector<Digest> leaves;
  leaves.reserve(ts.size());
  for (const auto& t : ts)
    leaves.push_back(tensor_leaf(DType::F32, t.shape, std::as_bytes(std::span(t.data))));
  g_sink ^= merkle_root(leaves)[0];
}

// Baseline: one raw BLAKE2b-256 per tensor over the same bytes.
void hash_raw_blake2b(const std::vector<BenchTensor>& ts) {
  for (const auto& t : ts) {
    unsigned char out[crypto_generichash_BYTES];
    crypto_generichash(out, sizeof out, reinterpret_cast<const unsigned char*>(t.data.data()),
                       t.data.size() * sizeof(float), nullptr, 0);
    g_sink ^= out[0];
  }
}

// Reference: one raw BLAKE3 per tensor over the same bytes, in one update.
void hash_raw_blake3(const std::vector<BenchTensor>& ts) {
  for (const auto& t : ts) {
    blake3_hasher h;
    blake3_hasher_init(&h);
    blake3_hasher_update(&h, t.data.data(), t.data.size() * sizeof(float));
    uint8_t out[BLAKE3_OUT_LEN];
    blake3_hasher_finalize(&h, out, sizeof out);
    g_sink ^= out[0];
  }
}

nlohmann::json compare(const std::string& name, const std::vector<BenchTensor>& ts) {
  const size_t bytes = total_bytes(ts);
  nlohmann::json ours = time_it(bytes, [&] { hash_state(ts); });
  nlohmann::json blake2b = time_it(bytes, [&] { hash_raw_blake2b(ts); });
  nlohmann::json blake3 = time_it(bytes, [&] { hash_raw_blake3(ts); });
  const double gb_per_s = ours["gb_per_s"].get<double>();
  return {{"name", name},
          {"tensors", ts.size()},
          {"bytes", bytes},
          {"tensor_leaf", ours},
          {"raw_blake2b", blake2b},
          {"raw_blake3", blake3},
          {"gb_per_s", gb_per_s},
          {"ratio", gb_per_s / blake2b["gb_per_s"].get<double>()},  // against contract 2's hash
          {"of_raw_blake3", gb_per_s / blake3["gb_per_s"].get<double>()},
          {"meets_target", gb_per_s >= kTargetGbPerS}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "State-hashing throughput: tensor_leaf (BLAKE3) against raw libsodium BLAKE2b and raw BLAKE3 over the "
      "same bytes, one thread; "
      "prints one JSON object. No options.",
      "bench_hash");
  bench::parse_command_line(app, argc, argv);
  ensure_sodium();  // the raw crypto_generichash baseline calls libsodium directly

  std::vector<BenchTensor> big;
  big.push_back(make_tensor({16 * 1024 * 1024}, 1));  // 64 MiB of float32

  std::vector<BenchTensor> mlp;  // params, Adam m, Adam v of a 784-256-10 MLP
  for (uint32_t copy = 0; copy < 3; ++copy) {
    mlp.push_back(make_tensor({784, 256}, 10 * copy + 1));
    mlp.push_back(make_tensor({256}, 10 * copy + 2));
    mlp.push_back(make_tensor({256, 10}, 10 * copy + 3));
    mlp.push_back(make_tensor({10}, 10 * copy + 4));
  }

  // Worst case for the NaN rule: one NaN in every 64 KiB chunk, so every chunk takes the copy path.
  std::vector<BenchTensor> nan_big = big;
  for (size_t i = 1000; i < nan_big[0].data.size(); i += kTensorChunkBytes / sizeof(float)) {
    uint32_t bits = 0x7FC00001u;
    std::memcpy(&nan_big[0].data[i], &bits, 4);
  }

  nlohmann::json out;
  out["bench"] = "hash";
  out["threads"] = 1;
  out["chunk_bytes"] = kTensorChunkBytes;
  out["hash"] = "blake3";
  out["baseline"] = "raw_blake2b";
  out["target_gb_per_s"] = kTargetGbPerS;
  out["cases"] = {compare("f32_64MiB", big), compare("mlp_784_256_10_state_x3", mlp),
                  compare("f32_64MiB_nan_every_chunk", nan_big)};
  out["sink"] = g_sink;
  fmt::print("{}\n", out.dump());
  return 0;
}
