// Working memory of the CPU kernels that need more than registers (packed panels, accumulators).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/tensor.h"  // AlignedAllocator

namespace tribunal {

/// A kernel's reusable working memory, kept thread_local by the kernel that uses it: it grows to the
/// largest size asked and its pages are touched once per thread, not once per call (fresh pages cost a
/// fault each, microseconds on a VM).
using ScratchBuffer = std::vector<float, AlignedAllocator<float>>;

/// buf's storage, grown to at least n floats; its contents are unspecified.
inline float* scratch(ScratchBuffer& buf, int64_t n) {
  if (static_cast<int64_t>(buf.size()) < n) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

}  // namespace tribunal
