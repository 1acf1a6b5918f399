// The SIMT emulation behind ops/cuda/simt.h on the host (TRIBUNAL_SIMT_EMULATED; docs/cuda.md). A
// launch runs the kernel over the exact geometry a GPU would: every block of the grid, and in each
// block every thread as a fiber (Boost.Context) with its own stack and its own thread index. Blocks run
// one after another on the calling OS thread; inside a block the fibers run until each reaches a
// barrier, and a barrier releases only when its whole group has arrived:
//  * sync_threads(): every thread of the block (a thread that has returned from the kernel while
//    others wait is a divergent __syncthreads: the launch fails with CudaError);
//  * a shuffle: the 32 lanes of the warp (linear thread id / 32, as CUDA numbers warps) deposit their
//    value, meet at a warp barrier, read the source lane's value, and meet again before the slot can
//    be reused. A warp whose lanes wait at different barriers, or whose lanes have partly returned,
//    fails the launch: the kernels' shuffles are full-warp (mask 0xFFFFFFFF).
// Block sizes must be multiples of 32 (whole warps) and at most 1024 threads; grid limits are CUDA's.
// Shared memory (TRIBUNAL_SHARED = static thread_local) is one copy per OS thread, so one block's.
// What this shows and what it cannot (instruction selection, hardware fma and division): docs/cuda.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

namespace tribunal::simt {

/// CUDA's dim3: unset dimensions are 1.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline constexpr unsigned kWarpSize = 32;

/// Where the calling fiber is: its thread and block index and the launch's geometry.
struct ThreadCoords {
  Dim3 thread, block, block_dim, grid_dim;
  unsigned linear = 0;  ///< x + y·bx + z·bx·by, CUDA's linear thread id (lane = linear % 32)
};

/// The calling fiber's coordinates. Only valid inside a kernel run by launch().
const ThreadCoords& current();

inline Dim3 thread_idx() {
  return current().thread;
}
inline Dim3 block_idx() {
  return current().block;
}
inline Dim3 block_dim() {
  return current().block_dim;
}
inline Dim3 grid_dim() {
  return current().grid_dim;
}

/// The block barrier (__syncthreads).
void sync_threads();

/// The warp exchange under every shuffle: the calling lane offers `mine` and receives lane `src`'s
/// offer (src < 32), after all 32 lanes of its warp have offered.
uint64_t warp_exchange(uint64_t mine, unsigned src);

namespace detail {
template <class T>
uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "a shuffled value is ≤ 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof v);
  return u;
}
template <class T>
T from_bits(uint64_t u) {
  T v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}
inline unsigned lane() {
  return current().linear % kWarpSize;
}
}  // namespace detail

/// __shfl_down_sync(0xFFFFFFFF, v, delta): lane j receives lane j + delta's v (its own past lane 31).
template <class T>
T shfl_down(T v, unsigned delta) {
  const unsigned l = detail::lane();
  return detail::from_bits<T>(warp_exchange(detail::to_bits(v), l + delta < kWarpSize ? l + delta : l));
}
/// __shfl_xor_sync(0xFFFFFFFF, v, mask): lane j receives lane (j XOR mask)'s v.
template <class T>
T shfl_xor(T v, unsigned mask) {
  return detail::from_bits<T>(warp_exchange(detail::to_bits(v), (detail::lane() ^ mask) % kWarpSize));
}
/// __shfl_sync(0xFFFFFFFF, v, src): every lane receives lane src's v.
template <class T>
T shfl(T v, unsigned src) {
  return detail::from_bits<T>(warp_exchange(detail::to_bits(v), src % kWarpSize));
}

/// Runs `body` (one kernel invocation with its arguments bound) as every thread of every block of
/// `grid` × `block`, returning when all have finished. Throws CudaError naming `kernel` for a geometry
/// CUDA would refuse, a divergent barrier or shuffle, or an exception escaping the body.
void launch(const char* kernel, Dim3 grid, Dim3 block, const std::function<void()>& body);

}  // namespace tribunal::simt
