// Device memory for the CUDA backend: one RAII owner of a plain cudaMalloc allocation (no pools, no
// managed memory), with blocking host↔device copies; in the SIMT emulation (TRIBUNAL_SIMT_EMULATED)
// the "device" is the host, and a buffer is host memory with the same interface.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "ops/cuda/backend.h"

#if defined(TRIBUNAL_SIMT_EMULATED)

namespace tribunal::cuda_emulated {

/// n elements of T in the emulated device's memory (host memory, zeroed). n = 0 gives data() = null.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : v_(n) {}
  T* data() { return v_.empty() ? nullptr : v_.data(); }
  const T* data() const { return v_.empty() ? nullptr : v_.data(); }
  size_t size() const { return v_.size(); }
  /// Copies size() elements from `src`.
  void upload(const T* src) {
    if (!v_.empty()) std::memcpy(v_.data(), src, v_.size() * sizeof(T));
  }
  /// Copies size() elements to `dst`.
  void download(T* dst) const {
    if (!v_.empty()) std::memcpy(dst, v_.data(), v_.size() * sizeof(T));
  }

 private:
  std::vector<T> v_;
};

/// Nothing to wait for: an emulated launch returns when its kernel has finished.
inline void synchronize() {}

}  // namespace tribunal::cuda_emulated

#else

#include <cuda_runtime_api.h>

namespace tribunal::cuda {

/// Throws CudaError("cuda: <call> failed: <error> (<file>:<line>)") unless `err` is cudaSuccess.
inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess)
    throw CudaError(std::string("cuda: ") + call + " failed: " + cudaGetErrorString(err) + " (" + file + ":" +
                    std::to_string(line) + ")");
}

#define TRIBUNAL_CUDA_CHECK(call) ::tribunal::cuda::check((call), #call, __FILE__, __LINE__)

/// Waits for every kernel enqueued so far (cudaDeviceSynchronize); throws CudaError on a failure.
inline void synchronize() { TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize()); }

/// n elements of T in device memory (uninitialized). n = 0 allocates nothing (data() is null).
/// Move-only; the destructor frees with cudaFree and never throws.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0) TRIBUNAL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n_ * sizeof(T)));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  T* data() { return p_; }
  const T* data() const { return p_; }
  size_t size() const { return n_; }

  /// Copies size() elements from host memory `src` (blocking).
  void upload(const T* src) {
    if (n_ > 0) TRIBUNAL_CUDA_CHECK(cudaMemcpy(p_, src, n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  /// Copies size() elements to host memory `dst` (blocking: waits for the kernels before it).
  void download(T* dst) const {
    if (n_ > 0) TRIBUNAL_CUDA_CHECK(cudaMemcpy(dst, p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
  }

 private:
  void release() noexcept {
    if (p_) cudaFree(p_);  // an error here cannot be reported from a destructor; the next call sees it
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace tribunal::cuda

#endif
