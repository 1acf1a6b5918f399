// The thin SIMT layer the CUDA kernels of ops/cuda/kernels/ are written against (docs/cuda.md "One
// kernel source, two executions"). Under nvcc it is CUDA itself: thread and block indices,
// __shared__ memory, __syncthreads, full-warp __shfl_*_sync and the <<<grid, block>>> launch. Under the
// host compiler (TRIBUNAL_SIMT_EMULATED) the same names run the kernels in the SIMT emulation of
// ops/cuda/simt_emulator.h: every thread of a block is a fiber, __syncthreads and the shuffles are real
// barriers over the exact launch geometry (grid, block, warps of 32). Kernels use only what is here.
//
//   TRIBUNAL_KERNEL void k(...)        a kernel (__global__)
//   TRIBUNAL_DEVICE T f(...)           a device function (__device__, inline)
//   TRIBUNAL_SHARED float tile[..];    block-shared memory (__shared__)
//   simt::thread_idx(), block_idx(), block_dim(), grid_dim()
//   simt::sync_threads()               the block barrier
//   simt::shfl_down / shfl_xor / shfl  full-warp shuffles (all 32 lanes must take part)
//   TRIBUNAL_LAUNCH(k, grid, block, args...)   launch on the default stream; throws CudaError on failure
#pragma once

#include <cstdint>

#include "ops/cuda/backend.h"  // CudaError
#include "ops/cuda/cuda_ns.h"

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#include <string>

#define TRIBUNAL_KERNEL __global__
#define TRIBUNAL_DEVICE __device__ inline
#define TRIBUNAL_SHARED __shared__

namespace tribunal::simt {

using Dim3 = dim3;
inline constexpr unsigned kWarpSize = 32;

__device__ inline Dim3 thread_idx() {
  return Dim3(threadIdx.x, threadIdx.y, threadIdx.z);
}
__device__ inline Dim3 block_idx() {
  return Dim3(blockIdx.x, blockIdx.y, blockIdx.z);
}
__device__ inline Dim3 block_dim() {
  return blockDim;
}
__device__ inline Dim3 grid_dim() {
  return gridDim;
}
__device__ inline void sync_threads() {
  __syncthreads();
}

/// Lane j receives lane j + delta's v (its own where j + delta ≥ 32).
template <class T>
__device__ inline T shfl_down(T v, unsigned delta) {
  return __shfl_down_sync(0xFFFFFFFFu, v, delta);
}
/// Lane j receives lane (j XOR mask)'s v.
template <class T>
__device__ inline T shfl_xor(T v, unsigned mask) {
  return __shfl_xor_sync(0xFFFFFFFFu, v, mask);
}
/// Every lane receives lane src's v.
template <class T>
__device__ inline T shfl(T v, unsigned src) {
  return __shfl_sync(0xFFFFFFFFu, v, src);
}

/// Throws CudaError naming the kernel if its launch failed.
inline void check_launch(const char* kernel) {
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw CudaError(std::string("cuda: launch of ") + kernel + " failed: " + cudaGetErrorString(err));
}

}  // namespace tribunal::simt

#define TRIBUNAL_LAUNCH(kernel, grid, block, ...) \
  do {                                            \
    kernel<<<(grid), (block)>>>(__VA_ARGS__);     \
    ::tribunal::simt::check_launch(#kernel);      \
  } while (0)

#elif defined(TRIBUNAL_SIMT_EMULATED)

#include "ops/cuda/simt_emulator.h"

#define TRIBUNAL_KERNEL
#define TRIBUNAL_DEVICE inline
// One block runs at a time on an OS thread, its threads being fibers of that OS thread: a static
// thread_local array is exactly one block's shared memory (ops/cuda/simt_emulator.h).
#define TRIBUNAL_SHARED static thread_local

#define TRIBUNAL_LAUNCH(kernel, grid, block, ...) \
  ::tribunal::simt::launch(#kernel, (grid), (block), [&] { kernel(__VA_ARGS__); })

#else
#error "ops/cuda/simt.h: compile with nvcc, or define TRIBUNAL_SIMT_EMULATED for the host emulation"
#endif
