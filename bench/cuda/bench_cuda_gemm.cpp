// GPU matmul: tribunal's RepOps CUDA kernel (ops/cuda/kernels/dense.cuh) against cuBLAS SGEMM on the
// same device in the same run, and the kernel's output against the CPU reference bit for bit.
// Prints one JSON object. Built only with -DTRIBUNAL_CUDA=ON (docs/cuda.md); never run in CI.
// Usage: bench_cuda_gemm [--min-time SECONDS] [--shape NAME_SUBSTRING] [--no-check]
//
// cuBLAS runs in CUBLAS_PEDANTIC_MATH (plain float32: no TF32, no reduced-precision reductions), the
// fairest float32 baseline; it computes the product only (a bias would cost it one more pass). Each
// timing is CUDA events around a loop of launches lasting at least --min-time (default 0.2 s) after one
// warm-up; the best of 3 such loops is kept, ours and cuBLAS alternating. `gpu_equals_cpu` compares our
// kernel's output with the CPU's fast RepOps matmul (itself bitwise equal to matmul_reference) by
// memcmp. `cublas_differs` is the fraction of elements whose bits differ from ours: cuBLAS picks its
// summation order per shape and device, which is why it cannot serve a bitwise contract.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "ops/cuda/backend.h"
#include "ops/cuda/device_buffer.h"
#include "ops/cuda/kernels.h"
#include "ops/kernels/matmul.h"
#include "ops/thread_pool.h"

namespace {

using tribunal::cuda::DeviceBuffer;

struct Shape {
  const char* name;
  int64_t m, n, k;
  bool trans_a, trans_b, bias;
};

// Squares, then every matmul shape of one training step of a GPT-2-small-sized model at batch 4 ×
// context 256 (B·T = 1024 rows, d_model 768, 4·d = 3072, GPT-2's 50257-token vocabulary): the fused
// q|k|v projection, the output projection, the MLP's two layers and the head, each forward and with
// its two gradients.
const Shape kShapes[] = {
    {"square_1024", 1024, 1024, 1024, false, false, false},
    {"square_4096", 4096, 4096, 4096, false, false, false},
    {"gpt2_qkv_forward", 1024, 2304, 768, false, false, true},
    {"gpt2_qkv_grad_input", 1024, 768, 2304, false, true, false},
    {"gpt2_qkv_grad_weight", 768, 2304, 1024, true, false, false},
    {"gpt2_proj_forward", 1024, 768, 768, false, false, true},
    {"gpt2_fc_forward", 1024, 3072, 768, false, false, true},
    {"gpt2_fc_grad_input", 1024, 768, 3072, false, true, false},
    {"gpt2_fc_grad_weight", 768, 3072, 1024, true, false, false},
    {"gpt2_mlp_proj_forward", 1024, 768, 3072, false, false, true},
    {"gpt2_head_forward", 1024, 50257, 768, false, false, true},
    {"gpt2_head_grad_input", 1024, 768, 50257, false, true, false},
    {"gpt2_head_grad_weight", 768, 50257, 1024, true, false, false},
};

void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw tribunal::CudaError(std::string("cublas: ") + call + " failed: status " +
                              std::to_string(static_cast<int>(s)));
}

/// Best of 3 loops of the mean milliseconds per call (CUDA events), `ours` and `theirs` alternating.
std::pair<double, double> best_of_3(const std::function<void()>& ours, const std::function<void()>& theirs,
                                    double min_time_s) {
  cudaEvent_t start, stop;
  TRIBUNAL_CUDA_CHECK(cudaEventCreate(&start));
  TRIBUNAL_CUDA_CHECK(cudaEventCreate(&stop));
  auto loop = [&](const std::function<void()>& fn) {
    fn();  // warm-up
    TRIBUNAL_CUDA_CHECK(cudaDeviceSynchronize());
    int64_t calls = 0, batch = 1;
    float total_ms = 0;
    while (total_ms < min_time_s * 1000.0) {
      TRIBUNAL_CUDA_CHECK(cudaEventRecord(start));
      for (int64_t i = 0; i < batch; ++i) fn();
      TRIBUNAL_CUDA_CHECK(cudaEventRecord(stop));
      TRIBUNAL_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      TRIBUNAL_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      total_ms += ms;
      calls += batch;
      batch *= 2;
    }
    return static_cast<double>(total_ms) / static_cast<double>(calls);
  };
  double best_ours = 1e300, best_theirs = 1e300;
  for (int r = 0; r < 3; ++r) {
    best_ours = std::min(best_ours, loop(ours));
    best_theirs = std::min(best_theirs, loop(theirs));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return {best_ours, best_theirs};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "RepOps CUDA matmul against cuBLAS SGEMM (no TF32) on GPU 0, with a bitwise check against the CPU"};
  app.name("bench_cuda_gemm");
  double min_time = 0.2;
  std::string only;
  bool no_check = false;
  app.add_option("--min-time", min_time, "seconds per timing loop")->check(CLI::PositiveNumber);
  app.add_option("--shape", only, "run only the shapes whose name contains this");
  app.add_flag("--no-check", no_check, "skip the CPU reference (bitwise comparison)");
  tribunal::bench::parse_command_line(app, argc, argv);

  try {
    std::string why;
    if (tribunal::cuda_device_count(&why) == 0) {
      std::fprintf(stderr, "bench_cuda_gemm: no CUDA device (%s)\n", why.c_str());
      return 77;
    }
    cublasHandle_t handle;
    check_cublas(cublasCreate(&handle), "cublasCreate");
    check_cublas(cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    tribunal::ThreadPool pool(threads);
    nlohmann::json out;
    out["device"] = tribunal::cuda_device_name(0);
    out["cublas_math"] = "CUBLAS_PEDANTIC_MATH (float32, no TF32)";
    out["cpu_threads_for_check"] = threads;
    out["shapes"] = nlohmann::json::array();
    std::mt19937 rng(2026);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (const Shape& s : kShapes) {
      if (!only.empty() && std::string(s.name).find(only) == std::string::npos) continue;
      std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
          bias(s.bias ? static_cast<size_t>(s.n) : 0), c(static_cast<size_t>(s.m * s.n)), c_blas(c.size());
      for (float& x : a) x = dist(rng);
      for (float& x : b) x = dist(rng);
      for (float& x : bias) x = dist(rng);
      auto da = DeviceBuffer<float>::of_input(a.data(), a.size());
      auto db = DeviceBuffer<float>::of_input(b.data(), b.size());
      auto dbias = DeviceBuffer<float>::of_input(bias.data(), bias.size());
      DeviceBuffer<float> dc(c.size()), dc_blas(c.size());
      const float* bias_ptr = s.bias ? dbias.data() : nullptr;
      auto ours = [&] {
        tribunal::cuda::launch_matmul(da.data(), db.data(), bias_ptr, dc.data(), s.m, s.n, s.k, s.trans_a,
                                      s.trans_b);
      };
      // Row-major C[m×n] = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands.
      const float one = 1.0f, zero = 0.0f;
      auto theirs = [&] {
        check_cublas(
            cublasSgemm(handle, s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                        static_cast<int>(s.n), static_cast<int>(s.m), static_cast<int>(s.k), &one, db.data(),
                        static_cast<int>(s.trans_b ? s.k : s.n), da.data(),
                        static_cast<int>(s.trans_a ? s.m : s.k), &zero, dc_blas.data(),
                        static_cast<int>(s.n)),
            "cublasSgemm");
      };
      const auto [ms_ours, ms_blas] = best_of_3(ours, theirs, min_time);
      dc.download(c.data());
      dc_blas.download(c_blas.data());
      const double flop =
          2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
      nlohmann::json row{{"shape", s.name},
                         {"m", s.m},
                         {"n", s.n},
                         {"k", s.k},
                         {"trans_a", s.trans_a},
                         {"trans_b", s.trans_b},
                         {"bias", s.bias},
                         {"ours_ms", ms_ours},
                         {"cublas_ms", ms_blas},
                         {"ours_tflops", flop / (ms_ours * 1e9)},
                         {"cublas_tflops", flop / (ms_blas * 1e9)},
                         {"ours_over_cublas_time", ms_ours / ms_blas}};
      if (!no_check) {
        std::vector<float> ref(c.size());
        tribunal::matmul(tribunal::MatmulArgs{a.data(), b.data(), s.bias ? bias.data() : nullptr, ref.data(),
                                              s.m, s.n, s.k, s.trans_a, s.trans_b},
                         pool);
        row["gpu_equals_cpu"] = std::memcmp(ref.data(), c.data(), c.size() * sizeof(float)) == 0;
        size_t first_diff = c.size();
        for (size_t i = 0; i < c.size() && first_diff == c.size(); ++i)
          if (std::memcmp(&ref[i], &c[i], sizeof(float)) != 0) first_diff = i;
        if (first_diff < c.size()) row["first_difference"] = first_diff;
      }
      // cuBLAS has no bias: compare our product's bits only where there is none.
      if (!s.bias) {
        size_t differ = 0;
        for (size_t i = 0; i < c.size(); ++i) differ += std::memcmp(&c[i], &c_blas[i], sizeof(float)) != 0;
        row["cublas_differs"] = static_cast<double>(differ) / static_cast<double>(c.size());
      }
      out["shapes"].push_back(row);
      std::fprintf(stderr, "%s: ours %.3f ms, cublas %.3f ms\n", s.name, ms_ours, ms_blas);
    }
    cublasDestroy(handle);
    std::printf("%s\n", out.dump(2).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_gemm: %s\n", e.what());
    return 1;
  }
  return 0;
}
