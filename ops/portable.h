// TRIBUNAL_HD marks functions usable on the host and in CUDA device code (docs/numerics.md; ops/cuda,
// docs/cuda.md). Without nvcc it is plain `inline`, so CPU builds see exactly the same code.
#pragma once

#if defined(__CUDACC__)
#define TRIBUNAL_HD __host__ __device__ inline
#else
#define TRIBUNAL_HD inline
#endif
