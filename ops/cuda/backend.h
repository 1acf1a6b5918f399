// The CUDA backend of RepOps (docs/numerics.md; docs/cuda.md), in two executions of one kernel source:
// run_cuda on a GPU (built with -DTRIBUNAL_CUDA=ON and nvcc; memcmp-equal to the CPU reference on every
// op's cases on an H200, scripts/gpu_check.sh, docs/cuda.md "On a GPU") and run_cuda_emulated on the host's
// SIMT emulation (-DTRIBUNAL_CUDA_EMULATE=ON; memcmp-equal to the CPU reference in test_backend_ops). Every
// kernel performs the CPU reference's exact sequence of IEEE operations per output element.
//
// This header needs no CUDA headers: plain C++ code (tests, the engine) can call it.
#pragma once

#include <span>
#include <stdexcept>
#include <string>

#include "ops/registry.h"
#include "ops/tensor.h"

namespace tribunal {

/// A CUDA runtime call failed (no device, out of memory, a failed launch). The message names the call,
/// the CUDA error string and the source location.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Number of CUDA devices usable by this process; 0 when there is none or no driver. When it is 0
/// because cudaGetDeviceCount failed, `why` (if given) receives the CUDA error string.
int cuda_device_count(std::string* why = nullptr);

/// "NVIDIA H100 80GB HBM3 (sm_90)" for device `device`. Throws CudaError.
std::string cuda_device_name(int device = 0);

/// Runs one op on the current CUDA device: checks arity and shapes like the CPU (infer_shapes, the
/// labels of the softmax ops; OpError with the CPU's messages), copies the inputs to device memory,
/// runs the op's kernel(s), copies the outputs back into `out` (which must already have the inferred
/// shapes) and synchronizes. Throws OpError for bad input, CudaError for a CUDA failure.
/// Intended per-element operation order: exactly the reference kernel's (docs/cuda.md).
void run_cuda(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
              std::span<Tensor* const> out);

/// run_cuda on the SIMT emulation of the same kernel source (docs/cuda.md; built with
/// TRIBUNAL_CUDA_EMULATE, no GPU or nvcc needed): the same validation and dispatch, the same kernels
/// over the same grid and block geometry, executed on the host (ops/cuda/simt_emulator.h). Slow by
/// nature. Throws OpError for bad input, CudaError for a failed launch (e.g. a divergent barrier).
void run_cuda_emulated(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                       std::span<Tensor* const> out);

}  // namespace tribunal
