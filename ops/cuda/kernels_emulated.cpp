// The emulated execution of the kernel source: kernels.cu's kernels (ops/cuda/kernels/*.cuh) compiled
// by the host compiler against the SIMT emulation (TRIBUNAL_SIMT_EMULATED, ops/cuda/simt_emulator.h),
// with the project's -ffp-contract=off, so a*b+c stays two roundings and fma32 is std::fma, as on the
// GPU under -fmad=false (docs/cuda.md).
#include "ops/cuda/kernels.cu"
