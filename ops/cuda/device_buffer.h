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

/// n elements of T in the emulated device's memory, which is host memory: either owned (zeroed), or
/// an op's own tensor storage aliased without a copy (of_input, of_output: the emulated device reads
/// and writes the tensors in place, as a GPU with unified memory would; a GPU build copies instead).
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : own_(n), p_(own_.data()), n_(n) {}
  // Move-only: a moved std::vector keeps its storage, so p_ stays valid; a copy would not.
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&&) noexcept = default;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept = default;
  /// The n elements at `host`, read in place (kernels never write their inputs).
  static DeviceBuffer of_input(const T* host, size_t n) { return DeviceBuffer(const_cast<T*>(host), n); }
  /// The n elements at `host`, written in place by the kernels.
  static DeviceBuffer of_output(T* host, size_t n) { return DeviceBuffer(host, n); }

  T* data() { return n_ == 0 ? nullptr : p_; }
  const T* data() const { return n_ == 0 ? nullptr : p_; }
  size_t size() const { return n_; }
  /// Copies size() elements from `src` (nothing to do when the buffer aliases src).
  void upload(const T* src) {
    if (n_ > 0 && src != p_) std::memcpy(p_, src, n_ * sizeof(T));
  }
  /// Copies size() elements to `dst` (nothing to do when the buffer aliases dst).
  void download(T* dst) const {
    if (n_ > 0 && dst != p_) std::memcpy(dst, p_, n_ * sizeof(T));
  }

 private:
  DeviceBuffer(T* alias, size_t n) : p_(alias), n_(n) {}
  std::vector<T> own_;
  T* p_ = nullptr;
  size_t n_ = 0;
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
inline void synchronize() {
  TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize());
}

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

  /// A device copy of the n elements at host memory `host` (blocking upload).
  static DeviceBuffer of_input(const T* host, size_t n) {
    DeviceBuffer d(n);
    d.upload(host);
    return d;
  }
  /// n device elements for an output that download() will copy to `host` (uninitialized).
  static DeviceBuffer of_output(T*, size_t n) { return DeviceBuffer(n); }

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
