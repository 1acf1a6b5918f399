// Run-time selection of the SIMD code path of the fast kernels (docs/numerics.md: every path is bitwise
// identical to the scalar reference, so the choice changes speed, never bits).
#pragma once

#include <span>

namespace tribunal {

/// SIMD code paths a fast kernel may take; each must be bitwise identical to the reference.
enum class SimdPath { Scalar, Avx2, Avx512 };

/// Name of a path ("scalar", "avx2", "avx512").
const char* simd_path_name(SimdPath path);

/// The paths this CPU can run, Scalar first (CPUID via __builtin_cpu_supports, which also checks
/// that the OS saves the wider register state).
std::span<const SimdPath> available_simd_paths();

/// The fastest path this CPU can run (chosen once at start-up).
SimdPath best_simd_path();

/// True if this CPU can run `path`.
bool simd_path_available(SimdPath path);

/// The path fast kernels use now: best_simd_path(), unless a ScopedSimdPath is alive.
SimdPath active_simd_path();

/// Forces every fast kernel onto one path while it lives (tests and benchmarks that compare paths).
/// Process-wide; not for concurrent use with kernels expecting another path. Throws OpError if the
/// CPU lacks the path.
class ScopedSimdPath {
 public:
  explicit ScopedSimdPath(SimdPath path);
  ~ScopedSimdPath();
  ScopedSimdPath(const ScopedSimdPath&) = delete;
  ScopedSimdPath& operator=(const ScopedSimdPath&) = delete;

 private:
  int previous_;
};

}  // namespace tribunal
