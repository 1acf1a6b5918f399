// The machine's fused multiply-add peak, measured where a benchmark runs: independent FMA chains on
// the widest vectors the CPU has (AVX-512, else AVX2 + FMA on x86-64; NEON on AArch64), one chain set
// per thread, so a step's GFLOP/s can be stated as a fraction of what the same threads can do
// (issue 33: "the step at ≥ 60 % of the machine's FMA peak"). Enough chains hide the FMA latency on
// every core we meet (4–5 cycles, 2 pipes: ≥ 10 chains in flight); the loop touches no memory.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace tribunal::bench {

namespace fma_detail {
inline constexpr int kChains = 12;

// Each loop: `iterations` rounds of kChains independent vector FMAs; returns a value that depends on
// every chain (so the loop is not removed) and sets `flops` (2 per lane per FMA).

#if defined(__x86_64__)
__attribute__((target("avx512f"))) inline float loop_avx512(int64_t iterations, double& flops) {
  __m512 acc[kChains];
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];  // not _mm512_reduce_add_ps: g++ 12 warns inside it (-Wuninitialized)
  _mm512_store_ps(lanes, sum);
  flops = 2.0 * 16 * kChains * static_cast<double>(iterations);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

__attribute__((target("avx2,fma"))) inline float loop_avx2(int64_t iterations, double& flops) {
  __m256 acc[kChains];
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  flops = 2.0 * 8 * kChains * static_cast<double>(iterations);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}
#elif defined(__aarch64__)
inline float loop_neon(int64_t iterations, double& flops) {
  float32x4_t acc[kChains];
  const float32x4_t a = vdupq_n_f32(0.999999f), b = vdupq_n_f32(1e-7f);
  for (int c = 0; c < kChains; ++c) acc[c] = vdupq_n_f32(static_cast<float>(c));
  for (int64_t i = 0; i < iterations; ++i)
    for (int c = 0; c < kChains; ++c) acc[c] = vfmaq_f32(b, acc[c], a);
  float32x4_t sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = vaddq_f32(sum, acc[c]);
  flops = 2.0 * 4 * kChains * static_cast<double>(iterations);
  return vaddvq_f32(sum);
}
#endif

/// The widest FMA the CPU has: its name, and its loop (nullptr: none).
inline std::pair<std::string, float (*)(int64_t, double&)> widest() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return {"avx512", loop_avx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return {"avx2", loop_avx2};
  return {"none", nullptr};
#elif defined(__aarch64__)
  return {"neon", loop_neon};
#else
  return {"none", nullptr};
#endif
}
}  // namespace fma_detail

/// The FMA peak of `threads` threads running at once: GFLOP/s summed over them, the best of
/// `repeats` runs of about `duration` each (the best: a shared machine only ever lowers it). `isa`
/// names the vectors used ("avx512", "avx2", "neon"); 0 GFLOP/s and "none" where the CPU has no FMA.
struct FmaPeak {
  std::string isa;
  int threads = 0;
  double gflops = 0;
};

inline FmaPeak measure_fma_peak(int threads,
                                std::chrono::milliseconds duration = std::chrono::milliseconds(300),
                                int repeats = 3) {
  using Clock = std::chrono::steady_clock;
  const auto widest = fma_detail::widest();
  const auto loop = widest.second;
  FmaPeak peak{widest.first, threads, 0};
  if (loop == nullptr) return peak;
  // Calibrate: iterations per thread that take about `duration` on one thread.
  double flops = 0;
  int64_t iterations = 1 << 16;
  for (;;) {
    const auto t0 = Clock::now();
    volatile float sink = loop(iterations, flops);
    (void)sink;
    if (Clock::now() - t0 >= duration / 8 || iterations > (int64_t{1} << 40)) break;
    iterations *= 2;
  }
  iterations *= 8;
  for (int r = 0; r < repeats; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> done(static_cast<size_t>(threads), 0.0);
    std::vector<std::thread> pool;
    Clock::time_point t0;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t, fn = loop] {
        ++ready;
        while (!go.load()) std::this_thread::yield();
        double f = 0;
        volatile float sink = fn(iterations, f);
        (void)sink;
        done[static_cast<size_t>(t)] = f;
      });
    while (ready.load() < threads) std::this_thread::yield();
    t0 = Clock::now();
    go = true;
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    double total = 0;
    for (double f : done) total += f;
    peak.gflops = std::max(peak.gflops, total / seconds * 1e-9);
  }
  return peak;
}

}  // namespace tribunal::bench
