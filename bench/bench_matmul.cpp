// Matmul throughput: tribunal's RepOps matmul against OpenBLAS cblas_sgemm in the same run.
// Prints one JSON object.
// Usage: bench_matmul [--path scalar|avx2|avx512] [--min-time SECONDS] [--shape NAME_SUBSTRING]
//                     [--operand-sets N]
//
// Each measurement repeats the call until at least --min-time seconds (default 0.3) have passed and
// takes the mean time per call; the best of 3 such measurements is kept (ours and OpenBLAS alternate).
// OpenBLAS gets the same transposes; where the op has a bias, OpenBLAS is timed as "copy bias rows into C,
// sgemm with beta=1", which is how a framework adds a bias on top of BLAS. A batched shape (attention's
// per-head products) runs our matmul_batched against one cblas_sgemm call per product.
// --operand-sets N gives each shape N copies of its operands, and each call (both libraries) takes the
// next copy: with N = 16 the operands of a call were last touched 15 calls ago and have left the core's
// caches, as a training step's products find them (their inputs written by other nodes since); the
// default, 1, measures operands already in cache.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "ops/kernels/matmul.h"
#include "ops/thread_pool.h"

namespace {

using tribunal::MatmulArgs;
using tribunal::SimdPath;
using tribunal::ThreadPool;
using Seconds = std::chrono::duration<double>;

struct Shape {
  const char* name;
  int64_t m, n, k;
  bool trans_a, trans_b, bias;
  int64_t batch;  ///< > 1: that many independent products (matmul_batched; OpenBLAS: one sgemm each)
};

// The big square cases, every matmul of one training step of the MNIST MLP 784→256→10 at batch 64,
// and the matmul shapes of one training step of the GPT of scenarios/jobs/gpt_chars.toml-sized models
// (B·T = 2048 rows, D = 128, 4D = 512, V = 256, B·H = 64 heads of T = 128 × E = 32).
const Shape kShapes[] = {
    {"square_512", 512, 512, 512, false, false, false, 1},
    {"square_1024", 1024, 1024, 1024, false, false, false, 1},
    {"mlp_fc1_forward", 64, 256, 784, false, false, true, 1},            // x[64,784]·W1[784,256] + b1
    {"mlp_fc2_forward", 64, 10, 256, false, false, true, 1},             // h[64,256]·W2[256,10] + b2
    {"mlp_fc1_grad_input", 64, 784, 256, false, true, false, 1},         // dY1[64,256]·W1[784,256]ᵀ
    {"mlp_fc1_grad_weight", 784, 256, 64, true, false, false, 1},        // X[64,784]ᵀ·dY1[64,256]
    {"mlp_fc2_grad_input", 64, 256, 10, false, true, false, 1},          // dY2[64,10]·W2[256,10]ᵀ
    {"mlp_fc2_grad_weight", 256, 10, 64, true, false, false, 1},         // H[64,256]ᵀ·dY2[64,10]
    {"gpt_attn_linear_forward", 2048, 128, 128, false, false, true, 1},  // q, k, v, proj: x·W[128,128] + b
    {"gpt_attn_linear_grad_input", 2048, 128, 128, false, true, false, 1},   // dY·Wᵀ
    {"gpt_attn_linear_grad_weight", 128, 128, 2048, true, false, false, 1},  // Xᵀ·dY
    {"gpt_fc_forward", 2048, 512, 128, false, false, true, 1},               // LN2(x)·W_fc[128,512] + b
    {"gpt_fc_grad_input", 2048, 128, 512, false, true, false, 1},            // dY[2048,512]·W_fcᵀ
    {"gpt_fc_grad_weight", 128, 512, 2048, true, false, false, 1},           // X[2048,128]ᵀ·dY[2048,512]
    {"gpt_mlp_proj_forward", 2048, 128, 512, false, false, true, 1},         // gelu[2048,512]·W[512,128] + b
    {"gpt_mlp_proj_grad_input", 2048, 512, 128, false, true, false, 1},      // dY[2048,128]·W[512,128]ᵀ
    {"gpt_mlp_proj_grad_weight", 512, 128, 2048, true, false, false, 1},     // G[2048,512]ᵀ·dY[2048,128]
    {"gpt_head_forward", 2048, 256, 128, false, false, true, 1},             // LN_f(x)·W_head[128,256] + b
    {"gpt_head_grad_input", 2048, 128, 256, false, true, false, 1},          // dlogits·W_headᵀ
    {"gpt_head_grad_weight", 128, 256, 2048, true, false, false, 1},         // Xᵀ·dlogits
    {"gpt_attn_scores", 128, 128, 32, false, true, false,
     64},  // q[64,128,32]·k[64,128,32]ᵀ (also dp = do·vᵀ)
    {"gpt_attn_values", 128, 32, 128, false, false, false,
     64},  // p[64,128,128]·v[64,128,32] (also dq = ds·k)
    {"gpt_attn_grad_kv", 128, 32, 128, true, false, false, 64},  // dk = dsᵀ·q, dv = pᵀ·do
    // GPT-2-small's dimensions (docs/performance.md): B·T = 1024 rows (batch 4 × context 256), D = 768,
    // 4D = 3072, the byte vocabulary V = 256, B·H = 48 heads of T = 256 × E = 64.
    {"gpt2s_attn_linear_forward", 1024, 768, 768, false, false, true, 1},      // q, k, v, proj
    {"gpt2s_attn_linear_grad_input", 1024, 768, 768, false, true, false, 1},   // dY·Wᵀ
    {"gpt2s_attn_linear_grad_weight", 768, 768, 1024, true, false, false, 1},  // Xᵀ·dY
    {"gpt2s_fc_forward", 1024, 3072, 768, false, false, true, 1},
    {"gpt2s_fc_grad_input", 1024, 768, 3072, false, true, false, 1},
    {"gpt2s_fc_grad_weight", 768, 3072, 1024, true, false, false, 1},
    {"gpt2s_mlp_proj_forward", 1024, 768, 3072, false, false, true, 1},
    {"gpt2s_mlp_proj_grad_input", 1024, 3072, 768, false, true, false, 1},
    {"gpt2s_mlp_proj_grad_weight", 3072, 768, 1024, true, false, false, 1},
    {"gpt2s_head_forward", 1024, 256, 768, false, false, true, 1},
    {"gpt2s_head_grad_input", 1024, 768, 256, false, true, false, 1},
    {"gpt2s_head_grad_weight", 768, 256, 1024, true, false, false, 1},
    {"gpt2s_attn_scores", 256, 256, 64, false, true, false, 48},   // q·kᵀ (also dp = do·vᵀ)
    {"gpt2s_attn_values", 256, 64, 256, false, false, false, 48},  // p·v (also dq = ds·k)
    {"gpt2s_attn_grad_kv", 256, 64, 256, true, false, false, 48},  // dk = dsᵀ·q, dv = pᵀ·do
};

/// Mean seconds per call over a run of at least min_time (after one warm-up call).
double seconds_per_call(const std::function<void()>& fn, Seconds min_time) {
  using clock = std::chrono::steady_clock;
  int64_t calls = 0;
  const auto start = clock::now();
  Seconds elapsed{0};
  do {
    fn();
    ++calls;
    elapsed = clock::now() - start;
  } while (elapsed < min_time);
  return elapsed.count() / static_cast<double>(calls);
}

/// Best of 3 for each of two functions, measured alternately so that both see the same machine load.
/// OpenBLAS worker threads busy-wait for a while after a call (THREAD_TIMEOUT, ~0.1 s), which would
/// steal a core from the next measurement: with several threads, pause before each of ours.
std::pair<double, double> best_of_3(const std::function<void()>& ours, const std::function<void()>& blas,
                                    Seconds min_time, bool pause) {
  ours();  // warm caches, pack buffers and thread pools
  blas();
  double best_ours = 1e30, best_blas = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    if (pause) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    best_ours = std::min(best_ours, seconds_per_call(ours, min_time));
    best_blas = std::min(best_blas, seconds_per_call(blas, min_time));
  }
  return {best_ours, best_blas};
}

std::vector<float> random_vector(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Operands {
  std::vector<float> a, b, bias, c;
  MatmulArgs args;
};

Operands make_operands(const Shape& s, std::mt19937& rng) {
  Operands o;
  o.a = random_vector(s.batch * s.m * s.k, rng);
  o.b = random_vector(s.batch * s.k * s.n, rng);
  o.bias = random_vector(s.n, rng);
  o.c.assign(static_cast<size_t>(s.batch * s.m * s.n), 0.0f);
  o.args = MatmulArgs{o.a.data(), o.b.data(), s.bias ? o.bias.data() : nullptr, o.c.data(), s.m, s.n, s.k,
                      s.trans_a,  s.trans_b};
  return o;
}

/// N copies of a shape's operands, used in turn (--operand-sets).
struct OperandSets {
  std::vector<Operands> sets;
  size_t next = 0;
  Operands& take() {
    Operands& o = sets[next];
    next = (next + 1) % sets.size();
    return o;
  }
};

void openblas_matmul(const Shape& s, Operands& o) {
  float beta = 0.0f;
  if (s.bias) {
    for (int64_t i = 0; i < s.m; ++i) std::memcpy(&o.c[i * s.n], o.bias.data(), sizeof(float) * s.n);
    beta = 1.0f;
  }
  const int lda = static_cast<int>(s.trans_a ? s.m : s.k), ldb = static_cast<int>(s.trans_b ? s.k : s.n);
  for (int64_t e = 0; e < s.batch; ++e)  // a batch: one sgemm per product, as a framework's bmm loop does
    cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans,
                static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.0f,
                o.a.data() + e * s.m * s.k, lda, o.b.data() + e * s.k * s.n, ldb, beta,
                o.c.data() + e * s.m * s.n, static_cast<int>(s.n));
}

/// Our kernel on the operands: matmul, or matmul_batched for a batch of products.
void our_matmul(const Shape& s, const Operands& o, ThreadPool& pool, SimdPath path) {
  if (s.batch > 1)
    tribunal::matmul_batched(o.args, s.batch, pool, path);
  else
    tribunal::matmul(o.args, pool, path);
}

double gflops(const Shape& s, double seconds) {
  return 2.0 * static_cast<double>(s.batch * s.m * s.n * s.k) / seconds * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  SimdPath path = tribunal::best_simd_path();
  Seconds min_time{0.3};
  std::string only, path_name;
  CLI::App app(
      "Matmul throughput: RepOps matmul against OpenBLAS cblas_sgemm in the same run; prints one JSON "
      "object.",
      "bench_matmul");
  app.add_option("--path", path_name, "SIMD path of our kernels")
      ->type_name("scalar|avx2|avx512")
      ->default_str(tribunal::simd_path_name(path));
  app.add_option_function<double>(
         "--min-time",
         [&min_time](double seconds) {
           if (!(seconds > 0)) throw CLI::ValidationError("--min-time", "must be more than 0 seconds");
           min_time = Seconds(seconds);
         },
         "each measurement repeats the call for at least this long (> 0)")
      ->type_name("SECONDS")
      ->default_str("0.3");
  app.add_option("--shape", only, "only the shapes whose name contains this")->type_name("NAME");
  int operand_sets = 1;
  app.add_option("--operand-sets", operand_sets,
                 "copies of each shape's operands, one per call in turn (16: operands out of the caches, "
                 "as in a training step)")
      ->type_name("N")
      ->check(CLI::Range(1, 64))
      ->default_str("1");
  tribunal::bench::parse_command_line(app, argc, argv);
  if (!path_name.empty()) {
    bool found = false;
    for (SimdPath p : tribunal::available_simd_paths()) {
      if (path_name == tribunal::simd_path_name(p)) {
        path = p;
        found = true;
      }
    }
    if (!found) {
      std::fprintf(stderr, "bench_matmul: path '%s' is not available on this CPU\n", path_name.c_str());
      return 2;
    }
  }

  std::mt19937 rng(20240601);
  nlohmann::json results = nlohmann::json::array();
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    openblas_set_num_threads(threads);
    for (const Shape& s : kShapes) {
      if (std::string(s.name).find(only) == std::string::npos) continue;
      OperandSets o;
      for (int i = 0; i < operand_sets; ++i) o.sets.push_back(make_operands(s, rng));
      const auto [t_ours, t_blas] = best_of_3([&] { our_matmul(s, o.take(), pool, path); },
                                              [&] { openblas_matmul(s, o.take()); }, min_time, threads > 1);
      const double ours = gflops(s, t_ours), blas = gflops(s, t_blas);
      results.push_back({{"shape", s.name},
                         {"m", s.m},
                         {"n", s.n},
                         {"k", s.k},
                         {"batch", s.batch},
                         {"trans_a", s.trans_a},
                         {"trans_b", s.trans_b},
                         {"bias", s.bias},
                         {"threads", threads},
                         {"tribunal_gflops", ours},
                         {"openblas_gflops", blas},
                         {"ratio", ours / blas}});
    }
  }

  // The contract's plain triple loop, for context.
  const Shape& sq = kShapes[0];
  Operands o = make_operands(sq, rng);
  double t_ref = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    t_ref = std::min(t_ref, seconds_per_call([&] { tribunal::matmul_reference(o.args); }, min_time));
  }

  nlohmann::json out = {
      {"bench", "matmul"},
      {"simd_path", tribunal::simd_path_name(path)},
      {"openblas", openblas_get_config()},
      {"min_time_s", min_time.count()},
      {"operand_sets", operand_sets},
      {"results", results},
      {"scalar_reference", {{"shape", sq.name}, {"threads", 1}, {"gflops", gflops(sq, t_ref)}}}};
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
