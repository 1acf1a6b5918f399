// TRIBUNAL_CUDA_NS: the namespace (inside tribunal) of everything built from the CUDA kernel source and
// the backend's host side — `cuda` for the GPU build, `cuda_emulated` for the SIMT emulation
// (TRIBUNAL_SIMT_EMULATED; docs/cuda.md) — so both builds can be linked into one program.
#pragma once

#if defined(TRIBUNAL_SIMT_EMULATED)
#define TRIBUNAL_CUDA_NS cuda_emulated
#else
#define TRIBUNAL_CUDA_NS cuda
#endif
