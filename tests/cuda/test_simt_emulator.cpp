// The SIMT emulation itself (ops/cuda/simt_emulator.h): launch geometry, block barriers over shared
// memory, the three full-warp shuffles, and the refusals (a divergent barrier, a partial warp).
#include <doctest/doctest.h>

#if defined(TRIBUNAL_HAVE_CUDA_EMULATE)

#include <vector>

#include "ops/cuda/backend.h"
#include "ops/cuda/simt_emulator.h"

using namespace tribunal;

TEST_SUITE("backend") {
  TEST_CASE("simt emulation: every thread of every block runs once with CUDA's indices") {
    const simt::Dim3 grid(3, 2, 2), block(32, 2, 2);
    std::vector<int> seen(3 * 2 * 2 * 128, 0);
    simt::launch("indices", grid, block, [&] {
      const simt::Dim3 t = simt::thread_idx(), b = simt::block_idx();
      const unsigned linear = t.x + t.y * 32 + t.z * 64;
      CHECK(linear == simt::current().linear);
      const unsigned block_id = b.x + b.y * 3 + b.z * 6;
      ++seen[block_id * 128 + linear];
    });
    for (int v : seen) CHECK(v == 1);
  }

  TEST_CASE("simt emulation: sync_threads orders shared-memory writes before reads across the block") {
    std::vector<int> out(256);
    simt::launch("barrier", simt::Dim3(2), simt::Dim3(128), [&] {
      static thread_local int shared[128];
      const unsigned t = simt::thread_idx().x;
      shared[t] = static_cast<int>(t + 1000 * simt::block_idx().x);
      simt::sync_threads();
      out[simt::block_idx().x * 128 + t] = shared[127 - t];  // written by another thread, another warp
    });
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 128; ++t) CHECK(out[b * 128 + t] == 127 - t + 1000 * b);
  }

  TEST_CASE("simt emulation: shfl_down, shfl_xor and shfl exchange within each warp") {
    std::vector<int> down(64), xr(64), bcast(64);
    simt::launch("shuffles", simt::Dim3(1), simt::Dim3(64), [&] {
      const int t = static_cast<int>(simt::thread_idx().x);
      down[t] = simt::shfl_down(t, 5u);
      xr[t] = simt::shfl_xor(t, 3u);
      bcast[t] = simt::shfl(t, 7u);
    });
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, warp0 = t - lane;
      CHECK(down[t] == (lane + 5 < 32 ? t + 5 : t));
      CHECK(xr[t] == warp0 + (lane ^ 3));
      CHECK(bcast[t] == warp0 + 7);
    }
  }

  TEST_CASE("simt emulation: a divergent barrier and a partial warp are refused") {
    CHECK_THROWS_AS(simt::launch("divergent", simt::Dim3(1), simt::Dim3(64),
                                 [&] {
                                   if (simt::thread_idx().x < 40) simt::sync_threads();
                                 }),
                    CudaError);
    CHECK_THROWS_AS(simt::launch("half warp shuffle", simt::Dim3(1), simt::Dim3(32),
                                 [&] {
                                   if (simt::thread_idx().x < 16) (void)simt::shfl_xor(1, 1u);
                                 }),
                    CudaError);
    CHECK_THROWS_AS(simt::launch("48 threads", simt::Dim3(1), simt::Dim3(48), [] {}), CudaError);
    // The emulation is usable again after a refused launch.
    int runs = 0;
    simt::launch("after", simt::Dim3(1), simt::Dim3(32), [&] {
      simt::sync_threads();
      ++runs;
    });
    CHECK(runs == 32);
  }
}

#endif
