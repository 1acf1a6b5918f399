#include "ops/simd.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <string>

#include "ops/tensor.h"

namespace tribunal {
namespace {

constexpr std::array<SimdPath, 4> kAllPaths{SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512,
                                            SimdPath::Neon};

struct CpuPaths {
  std::array<SimdPath, kAllPaths.size()> paths{};
  size_t count = 0;
};

/// The architecture this library was compiled for, and whether it has the x86 or the Arm kernels.
#if defined(__x86_64__)
constexpr const char* kBuildArch = "x86-64";
constexpr bool kX86Kernels = true, kArmKernels = false;
#elif defined(__aarch64__)
constexpr const char* kBuildArch = "aarch64";
constexpr bool kX86Kernels = false, kArmKernels = true;
#else
constexpr const char* kBuildArch = "portable (scalar-only)";
constexpr bool kX86Kernels = false, kArmKernels = false;
#endif

/// True if this build has kernels for `path` (the kernels behind it exist only on their architecture).
bool compiled_in(SimdPath path) {
  switch (path) {
    case SimdPath::Scalar:
      return true;
    case SimdPath::Avx2:
    case SimdPath::Avx512:
      return kX86Kernels;
    case SimdPath::Neon:
      return kArmKernels;
  }
  return false;
}

CpuPaths detect_paths() {
  CpuPaths p;
  p.paths[p.count++] = SimdPath::Scalar;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2) p.paths[p.count++] = SimdPath::Avx2;
  if (avx2 && __builtin_cpu_supports("avx512f")) p.paths[p.count++] = SimdPath::Avx512;
#elif defined(__aarch64__)
  p.paths[p.count++] = SimdPath::Neon;  // Advanced SIMD (with vfmaq_f32) is mandatory in ARMv8-A AArch64
#endif
  return p;
}

const CpuPaths& cpu_paths() {
  static const CpuPaths paths = detect_paths();
  return paths;
}

std::string available_list() {
  std::string s;
  for (SimdPath p : available_simd_paths()) s += std::string(s.empty() ? "" : ", ") + simd_path_name(p);
  return s;
}

/// TRIBUNAL_SIMD's path, or best_simd_path() when it is unset or empty. Throws OpError (prefixed with
/// the variable) for a bad name or a path this build or CPU lacks.
SimdPath path_from_env() {
  const char* value = std::getenv("TRIBUNAL_SIMD");
  if (value == nullptr || *value == '\0') return best_simd_path();
  const std::string context = std::string("TRIBUNAL_SIMD=") + value;
  try {
    const SimdPath path = parse_simd_path(value);
    require_simd_path(path);
    return path;
  } catch (const OpError& e) {
    throw OpError(context + ": " + e.what());
  }
}

constexpr int kNoOverride = -1;
std::atomic<int> g_override{kNoOverride};

}  // namespace

const char* simd_path_name(SimdPath path) {
  switch (path) {
    case SimdPath::Scalar:
      return "scalar";
    case SimdPath::Avx2:
      return "avx2";
    case SimdPath::Avx512:
      return "avx512";
    case SimdPath::Neon:
      return "neon";
  }
  return "unknown";
}

SimdPath parse_simd_path(std::string_view name) {
  for (SimdPath p : kAllPaths)
    if (name == simd_path_name(p)) return p;
  throw OpError("unknown SIMD path '" + std::string(name) + "' (expected scalar, avx2, avx512 or neon)");
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

void require_simd_path(SimdPath path, std::string_view context) {
  if (simd_path_available(path)) return;
  const std::string name = simd_path_name(path);
  const std::string why = compiled_in(path)
                              ? "SIMD path '" + name + "' is not supported by this CPU"
                              : "this " + std::string(kBuildArch) + " build has no SIMD path '" + name + "'";
  throw OpError((context.empty() ? "" : std::string(context) + ": ") + why +
                " (available here: " + available_list() + ")");
}

SimdPath active_simd_path() {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced != kNoOverride) return static_cast<SimdPath>(forced);
  // A function-local static whose initializer throws is initialized again at the next call, so a bad
  // TRIBUNAL_SIMD fails every kernel call instead of falling back to another path.
  static const SimdPath from_env = path_from_env();
  return from_env;
}

void set_simd_path(SimdPath path) {
  require_simd_path(path);
  g_override.store(static_cast<int>(path));
}

ScopedSimdPath::ScopedSimdPath(SimdPath path) {
  require_simd_path(path);
  previous_ = g_override.exchange(static_cast<int>(path));
}

ScopedSimdPath::~ScopedSimdPath() {
  g_override.store(previous_);
}

}  // namespace tribunal
