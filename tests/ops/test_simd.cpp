// The SIMD path selection API of ops/simd.h: names, the errors for a path this build or CPU lacks,
// and forcing a path for a whole run (set_simd_path, what a --simd flag calls; TRIBUNAL_SIMD, read
// from the environment, is checked end to end by tests/cli_errors.sh and scripts/check_roots.sh).
#include <doctest/doctest.h>

#include <string>

#include "ops/simd.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"

using namespace tribunal;

namespace {
constexpr SimdPath kAll[] = {SimdPath::Scalar, SimdPath::Avx2, SimdPath::Avx512, SimdPath::Neon};
}  // namespace

TEST_CASE("simd: parse_simd_path reads exactly the four names") {
  for (SimdPath p : kAll) CHECK(parse_simd_path(simd_path_name(p)) == p);
  for (const char* bad : {"", "AVX2", "sse", "avx", "neon ", "native"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_simd_path(bad), doctest::Contains("(expected scalar, avx2, avx512 or neon)"),
                         OpError);
  }
}

TEST_CASE("simd: this build has its architecture's paths; others are refused with the paths there are") {
  CHECK(simd_path_available(SimdPath::Scalar));
#if defined(__x86_64__)
  CHECK(!simd_path_available(SimdPath::Neon));
  CHECK_THROWS_WITH_AS(
      require_simd_path(SimdPath::Neon, "ctx"),
      doctest::Contains("ctx: this x86-64 build has no SIMD path 'neon' (available here: scalar"), OpError);
#elif defined(__aarch64__)
  CHECK(simd_path_available(SimdPath::Neon));  // Advanced SIMD is part of the base architecture
  CHECK(best_simd_path() == SimdPath::Neon);
  for (SimdPath p : {SimdPath::Avx2, SimdPath::Avx512}) {
    CHECK(!simd_path_available(p));
    CHECK_THROWS_WITH_AS(require_simd_path(p), doctest::Contains("this aarch64 build has no SIMD path"),
                         OpError);
  }
#endif
  for (SimdPath p : kAll) {
    CAPTURE(simd_path_name(p));
    if (simd_path_available(p)) {
      CHECK_NOTHROW(require_simd_path(p));
    } else {
      CHECK_THROWS_AS(set_simd_path(p), OpError);
      CHECK_THROWS_AS(ScopedSimdPath{p}, OpError);
    }
  }
}

TEST_CASE("simd: set_simd_path forces every later kernel onto one path; a ScopedSimdPath nests inside") {
  const SimdPath before = active_simd_path();
  for (SimdPath p : available_simd_paths()) {
    CAPTURE(simd_path_name(p));
    set_simd_path(p);
    CHECK(active_simd_path() == p);
    CHECK_NOTHROW(ThreadPool(2));  // a pool checks the setting; an available path passes
    {
      const ScopedSimdPath scalar(SimdPath::Scalar);
      CHECK(active_simd_path() == SimdPath::Scalar);
    }
    CHECK(active_simd_path() == p);
  }
  set_simd_path(before);
  CHECK(active_simd_path() == before);
}
