// What every part of bench_load (bench/load/) agrees on: the job, the injected cheat, the clients'
// source addresses and the clock. main.cpp describes the benchmark.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace tribunal::load_bench {

using Clock = std::chrono::steady_clock;

/// The disputed job (a short Fashion-MNIST MLP).
inline const std::filesystem::path kJobFile =
    std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/short_mlp.toml";
inline constexpr int64_t kFaultStep = 17;  ///< the step the cheater corrupts
inline constexpr int64_t kFaultNode = 13;  ///< an optimizer node: the cheat persists into the next state
inline constexpr int kClientAddresses =
    8;  ///< clients connect from 127.0.0.2 … 127.0.0.9 (per-address limit)
/// The referee's per-address connection limit in the bench: room for 2000 disputes' clients over
/// kClientAddresses addresses, and far fewer than the flooder's silent connections from its one.
inline constexpr size_t kMaxConnectionsPerAddress = 256;

/// Seconds from `t` to now.
inline double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace tribunal::load_bench
