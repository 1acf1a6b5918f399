// Where a training run executes its ops (docs/cuda.md): the CPU kernels, a CUDA GPU, or the SIMT
// emulation of the same CUDA kernels on the host. Every device gives the same bits (RepOps): the
// choice changes speed, never the trajectory.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "ops/registry.h"
#include "ops/thread_pool.h"

namespace tribunal {

enum class Device {
  Cpu,           ///< the fast CPU kernels (ops/kernels), split over the thread pool
  Cuda,          ///< the CUDA kernels on GPU 0 (a build with -DTRIBUNAL_CUDA=ON)
  CudaEmulated,  ///< the CUDA kernels in the host SIMT emulation (-DTRIBUNAL_CUDA_EMULATE=ON); slow
};

/// "cpu", "cuda", "cuda-emulated".
const char* device_name(Device device);

/// The device named `name` (device_name's spelling). Throws EngineError for another name.
Device parse_device(std::string_view name);

/// Whether this build has `device` (cpu always; cuda with -DTRIBUNAL_CUDA=ON; cuda-emulated with
/// -DTRIBUNAL_CUDA_EMULATE=ON). A built cuda may still find no GPU at run time (require_device).
bool device_built(Device device);

/// Throws EngineError unless this build has `device` and (for cuda) a CUDA device is present: the
/// message says what is missing (e.g. "this build has no CUDA backend (configure with -DTRIBUNAL_CUDA=ON)").
void require_device(Device device);

/// Runs one op on `device`: run_fast on the CPU (with `pool`), run_cuda or run_cuda_emulated otherwise
/// (ops/cuda/backend.h; one host↔device round trip per op). Throws OpError for bad input, CudaError
/// for a failed launch, EngineError for a device this build lacks.
void run_on_device(Device device, OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                   std::span<Tensor* const> out, ThreadPool& pool);

}  // namespace tribunal
