#include "ops/simd.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <string>

#include "ops/tensor.h"

namespace tribunal {
namespace {

struct CpuPaths {
  std::array<SimdPath, 3> paths{};
  size_t count = 0;
};

CpuPaths detect_paths() {
  CpuPaths p;
  p.paths[p.count++] = SimdPath::Scalar;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) p.paths[p.count++] = SimdPath::Avx2;
  if (avx2 && __builtin_cpu_supports("avx512f")) p.paths[p.count++] = SimdPath::Avx512;
#endif
  return p;
}

const CpuPaths& cpu_paths() {
  static const CpuPaths paths = detect_paths();
  return paths;
}

constexpr int kNoOverride = -1;
std::atomic<int> g_override{kNoOverride};

}  // namespace

const char* simd_path_name(SimdPath path) {
  switch (path) {
    case SimdPath::Scalar: return "scalar";
    case SimdPath::Avx2: return "avx2";
    case SimdPath::Avx512: return "avx512";
  }
  return "unknown";
}

std::span<const SimdPath> available_simd_paths() {
  const CpuPaths& p = cpu_paths();
  return {p.paths.data(), p.count};
}

SimdPath best_simd_path() {
  static const SimdPath best = available_simd_paths().back();
  return best;
}

bool simd_path_available(SimdPath path) {
  const std::span<const SimdPath> paths = available_simd_paths();
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

SimdPath active_simd_path() {
  const int forced = g_override.load(std::memory_order_relaxed);
  return forced == kNoOverride ? best_simd_path() : static_cast<SimdPath>(forced);
}

ScopedSimdPath::ScopedSimdPath(SimdPath path) {
  if (!simd_path_available(path))
    throw OpError(std::string("SIMD path '") + simd_path_name(path) + "' is not supported by this CPU");
  previous_ = g_override.exchange(static_cast<int>(path));
}

ScopedSimdPath::~ScopedSimdPath() { g_override.store(previous_); }

}  // namespace tribunal
