// TRIBUNAL_HD marks functions usable on the host and, later, in CUDA device code (DESIGN §4).
#pragma once

#if defined(__CUDACC__)
#define TRIBUNAL_HD __host__ __device__ inline
#else
#define TRIBUNAL_HD inline
#endif
