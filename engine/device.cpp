#include "engine/device.h"

#include <fmt/format.h>

#include "engine/error.h"
#if defined(TRIBUNAL_HAVE_CUDA) || defined(TRIBUNAL_HAVE_CUDA_EMULATE)
#include "ops/cuda/backend.h"
#endif

namespace tribunal {

const char* device_name(Device device) {
  switch (device) {
    case Device::Cpu:
      return "cpu";
    case Device::Cuda:
      return "cuda";
    case Device::CudaEmulated:
      return "cuda-emulated";
  }
  return "?";
}

Device parse_device(std::string_view name) {
  for (Device d : {Device::Cpu, Device::Cuda, Device::CudaEmulated})
    if (name == device_name(d)) return d;
  throw EngineError(fmt::format("unknown device '{}' (cpu, cuda or cuda-emulated)", name));
}

bool device_built(Device device) {
  switch (device) {
    case Device::Cpu:
      return true;
#if defined(TRIBUNAL_HAVE_CUDA)
    case Device::Cuda:
      return true;
#endif
#if defined(TRIBUNAL_HAVE_CUDA_EMULATE)
    case Device::CudaEmulated:
      return true;
#endif
    default:
      return false;
  }
}

void require_device(Device device) {
  switch (device) {
    case Device::Cpu:
      return;
    case Device::Cuda: {
#if defined(TRIBUNAL_HAVE_CUDA)
      std::string why;
      if (cuda_device_count(&why) == 0) throw EngineError("--device cuda: no CUDA device (" + why + ")");
      return;
#else
      throw EngineError(
          "--device cuda: this build has no CUDA backend (configure with -DTRIBUNAL_CUDA=ON and nvcc)");
#endif
    }
    case Device::CudaEmulated:
#if defined(TRIBUNAL_HAVE_CUDA_EMULATE)
      return;
#else
      throw EngineError(
          "--device cuda-emulated: this build has no CUDA emulation (configure with "
          "-DTRIBUNAL_CUDA_EMULATE=ON)");
#endif
  }
}

void run_on_device(Device device, OpKind kind, const Attrs& attrs, std::span<const Tensor* const> in,
                   std::span<Tensor* const> out, ThreadPool& pool) {
  switch (device) {
    case Device::Cpu:
      run_fast(kind, attrs, in, out, pool);
      return;
    case Device::Cuda:
#if defined(TRIBUNAL_HAVE_CUDA)
      run_cuda(kind, attrs, in, out);
      return;
#else
      break;
#endif
    case Device::CudaEmulated:
#if defined(TRIBUNAL_HAVE_CUDA_EMULATE)
      run_cuda_emulated(kind, attrs, in, out);
      return;
#else
      break;
#endif
  }
  require_device(device);  // throws: this build lacks the device
}

}  // namespace tribunal
