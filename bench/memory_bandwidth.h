// The machine's memory read bandwidth, measured where a benchmark runs: `threads` threads each read
// their slice of one buffer far larger than the caches, so a step's memory-bound ops (elementwise,
// reductions, the optimizer: docs/performance.md "Training speed") can be set against what the same
// threads can stream from memory, as bench/fma_peak.h sets the products against the FMA peak.
// STREAM's method (McCalpin, "Memory Bandwidth and Machine Balance", 1995): the buffer is written
// before it is timed (a first write also pays the page faults), the best of a few runs counts.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace tribunal::bench {

namespace bandwidth_detail {
/// XOR of n words: 4 independent chains, so the loop waits on memory, not on the XOR's latency.
inline uint64_t read_words(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a ^= p[i];
    b ^= p[i + 1];
    c ^= p[i + 2];
    d ^= p[i + 3];
  }
  for (; i < n; ++i) a ^= p[i];
  return a ^ b ^ c ^ d;
}
}  // namespace bandwidth_detail

/// Read bandwidth of `threads` threads at once over a `bytes` buffer (each thread its own contiguous
/// slice): GB/s (10⁹ bytes per second) summed over them, the best of `repeats` timed reads.
struct MemoryBandwidth {
  int threads = 0;
  uint64_t buffer_bytes = 0;
  double read_gb_per_s = 0;
};

inline MemoryBandwidth measure_read_bandwidth(int threads, uint64_t bytes = uint64_t{1} << 30,
                                              int repeats = 3) {
  using Clock = std::chrono::steady_clock;
  const size_t words = static_cast<size_t>(bytes / sizeof(uint64_t));
  const std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  const auto slice = [&](int t) {
    const size_t b = words * static_cast<size_t>(t) / static_cast<size_t>(threads);
    const size_t e = words * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
    return std::pair{b, e};
  };
  MemoryBandwidth result{threads, words * sizeof(uint64_t), 0};
  for (int r = -1; r < repeats; ++r) {  // r = −1: each thread writes its slice (untimed)
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<uint64_t> sinks(static_cast<size_t>(threads), 0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const auto [b, e] = slice(t);
        ++ready;
        while (!go.load()) std::this_thread::yield();
        if (r < 0)
          std::fill(buffer.get() + b, buffer.get() + e, static_cast<uint64_t>(t) + 1);
        else
          sinks[static_cast<size_t>(t)] = bandwidth_detail::read_words(buffer.get() + b, e - b);
      });
    while (ready.load() < threads) std::this_thread::yield();
    const Clock::time_point t0 = Clock::now();
    go = true;
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t all = 0;
    for (uint64_t s : sinks) all ^= s;
    volatile uint64_t sink = all;  // the reads have an observable result
    (void)sink;
    if (r >= 0)
      result.read_gb_per_s =
          std::max(result.read_gb_per_s, static_cast<double>(result.buffer_bytes) / seconds * 1e-9);
  }
  return result;
}

}  // namespace tribunal::bench
