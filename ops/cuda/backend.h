// The optional CUDA backend of RepOps (docs/numerics.md; docs/cuda.md). Built only with
// -DTRIBUNAL_CUDA=ON. Every kernel is written to perform the CPU reference's exact sequence of IEEE
// operations per output element (docs/numerics.md), but STATUS: compiled, never run — no GPU was
// available, so bitwise equality with the CPU reference is UNVERIFIED. Nothing in the engine uses it.
//
// This header needs no CUDA headers: plain C++ code (tests, later the engine) can call it.
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
void run_cuda(OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in, std::span<Tensor* const> out);

}  // namespace tribunal
