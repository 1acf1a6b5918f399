// The GPU execution of the kernel source: every kernel of ops/cuda/kernels/*.cuh compiled by nvcc with
// the contract's device flags (ops/cuda/CMakeLists.txt). ops/cuda/kernels_emulated.cpp compiles the
// same files for the SIMT emulation (docs/cuda.md).
#include "ops/cuda/kernels/batch_norm.cuh"
#include "ops/cuda/kernels/broadcast.cuh"
#include "ops/cuda/kernels/clip.cuh"
#include "ops/cuda/kernels/conv.cuh"
#include "ops/cuda/kernels/dense.cuh"
#include "ops/cuda/kernels/loss.cuh"
#include "ops/cuda/kernels/movement.cuh"
#include "ops/cuda/kernels/optimizer.cuh"
#include "ops/cuda/kernels/reduce_mean.cuh"
#include "ops/cuda/kernels/select.cuh"
#include "ops/cuda/kernels/transformer.cuh"
#include "ops/cuda/kernels/unary.cuh"
