// Internal to ops/cuda: the backend's table of kernels, one launcher per OpKind (ops/cuda/backend.cpp).
// The ops' descriptors (ops/registry.h OpInfo) cannot point to these: ops/ knows nothing of this
// optional library above it, so the backend keeps this one table of its own, built by a switch the
// compiler checks for completeness. Both executions of the kernel source have it (ops/cuda/cuda_ns.h).
#pragma once

#include <cstdint>
#include <span>

#include "ops/cuda/cuda_ns.h"
#include "ops/registry.h"
#include "ops/tensor.h"

namespace tribunal::TRIBUNAL_CUDA_NS {

/// One op invocation on the backend, already validated (arity, attributes, output shapes): the host
/// tensors and the device copies of their data.
struct OpLaunch {
  const Attrs& attrs;
  const char* op;  ///< the op's name, for OpError messages (labels, token ids)
  std::span<const Tensor* const> in;
  std::span<Tensor* const> out;
  std::span<const float* const>
      d_in;                       ///< input i's device data (ClipCoefficient: one array of its P scalars)
  std::span<float* const> d_out;  ///< output i's device data, downloaded after the launch

  const float* I(size_t i) const { return d_in[i]; }
  float* O(size_t i) const { return d_out[i]; }
  const Shape& shape(size_t i) const { return in[i]->shape(); }
  const Shape& out_shape(size_t i) const { return out[i]->shape(); }
  int64_t n0() const { return in[0]->numel(); }  ///< input 0's element count
};

/// Enqueues the op's kernel(s); throws OpError for bad labels or token ids, CudaError for a failed launch.
using OpLauncher = void (*)(const OpLaunch&);

/// The launcher of `kind`; nullptr only for OpKind::Count. Every op of the registry has one: the
/// switch that defines it has no default and fails to compile without a case for each OpKind.
OpLauncher op_launcher(OpKind kind);

}  // namespace tribunal::TRIBUNAL_CUDA_NS
