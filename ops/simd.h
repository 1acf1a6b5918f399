// Selection of the SIMD code path of the fast kernels (docs/numerics.md: every path is bitwise
// identical to the scalar reference, so the choice changes speed, never bits). By default the fastest
// path this CPU has, found at run time; the environment variable TRIBUNAL_SIMD or set_simd_path()
// forces one for a whole run (docs/running.md), so a trajectory can be recomputed on each path.
#pragma once

#include <span>
#include <string_view>

namespace tribunal {

/// SIMD code paths a fast kernel may take; each must be bitwise identical to the reference.
/// Avx2 (with FMA) and Avx512 (AVX-512F) exist in x86-64 builds, Neon (AArch64 Advanced SIMD) in
/// aarch64 builds; Scalar everywhere. The values are stable (appended, never renumbered).
enum class SimdPath { Scalar, Avx2, Avx512, Neon };

/// Name of a path ("scalar", "avx2", "avx512", "neon").
const char* simd_path_name(SimdPath path);

/// The path named `name` (one of simd_path_name's names, exact and lower case), whether or not this
/// build and CPU have it. Throws OpError naming the four valid names for anything else.
SimdPath parse_simd_path(std::string_view name);

/// The paths this build and CPU can run, Scalar first, fastest last (x86-64: CPUID via
/// __builtin_cpu_supports, which also checks that the OS saves the wider register state; AArch64:
/// Advanced SIMD is part of the base architecture).
std::span<const SimdPath> available_simd_paths();

/// The fastest path this build and CPU can run.
SimdPath best_simd_path();

/// True if this build and CPU can run `path`.
bool simd_path_available(SimdPath path);

/// Throws OpError if this build or CPU lacks `path`, saying which of the two and naming the paths
/// available here; `context` (e.g. "matmul") prefixes the message.
void require_simd_path(SimdPath path, std::string_view context = {});

/// The path fast kernels use now: a live ScopedSimdPath's, else the one set_simd_path() chose, else
/// the one the environment variable TRIBUNAL_SIMD names (read once, at the first call), else
/// best_simd_path(). Throws OpError while TRIBUNAL_SIMD names no path or one that this build or CPU
/// lacks (so a run asked to use a path never silently runs on another), unless set_simd_path() or a
/// ScopedSimdPath has chosen one.
SimdPath active_simd_path();

/// Forces every fast kernel onto `path` for the rest of the process (a command line's --simd flag;
/// overrides TRIBUNAL_SIMD). Call it before running kernels, not while other threads run them.
/// Throws OpError, naming the paths available here, if this build or CPU lacks `path`.
void set_simd_path(SimdPath path);

/// Forces every fast kernel onto one path while it lives (tests and benchmarks that compare paths).
/// Process-wide; not for concurrent use with kernels expecting another path. Throws OpError, naming
/// the paths available here, if this build or CPU lacks the path.
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
