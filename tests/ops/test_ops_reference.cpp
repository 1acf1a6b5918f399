// Every op of the registry, three ways (docs/numerics.md "How the contract is checked"):
//  1. mathematics: the reference kernel against a float64 implementation written here from the
//     op's definition (PyTorch semantics for the optimizers), within a tolerance derived per op;
//  2. reproducibility: run_fast on 1, 2 and 3 threads is bitwise equal (memcmp) to run_reference on
//     random shapes with 1, primes and odd sizes, including shapes big enough to split over threads;
//  3. validation: infer_shapes (and, for labels, the kernels) throw OpError on bad input.
// This file holds the cases of the original MLP ops and registers them (op_test_support.h); the
// generic loops over every OpKind live in test_op_coverage.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ops/float32_gemm.h"
#include "ops/math.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

/// How many attribute variants a kind's cases cycle through (transposes, weight decay on/off).
int variants(OpKind kind) {
  switch (kind) {
    case OpKind::Linear:
      return 3;  // ints {} (w[K,N]), {1} (trans_b: w[N,K]), {0} (w[K,N] with the flag spelled out)
    case OpKind::Matmul:
      return 8;  // bits 0, 1: trans_a, trans_b; bit 2: rank 3 (a batch of products)
    case OpKind::SgdMomentum:
      return 2;
    case OpKind::AdamW:
      return 2;
    default:
      return 1;
  }
}

/// A random, valid invocation of `kind`. `big` picks shapes large enough that every fast kernel
/// splits its work over 3 threads (each op's grain is in its kernel file). nullopt: no case written
/// for this kind — the callers turn that into a failure.
std::optional<Case> make_case(OpKind kind, std::mt19937& rng, bool big, int variant, bool specials) {
  Case c;
  c.kind = kind;
  switch (kind) {
    case OpKind::Gather: {
      const int64_t rows = big ? 97 : small_dim(rng);
      std::vector<int64_t> d{rows};
      const Shape rest = random_shape(rng, 0, 2);
      for (int64_t x : rest.dims()) d.push_back(x);
      c.in.push_back(random_tensor(Shape(std::span<const int64_t>(d)), rng, specials));
      const int64_t batch = big ? 211 : small_dim(rng);
      for (int64_t b = 0; b < batch; ++b) c.attrs.ints.push_back(static_cast<int64_t>(rng() % rows));
      return c;
    }
    case OpKind::Linear: {
      const int64_t m = big ? 67 : small_dim(rng), k = big ? 131 : small_dim(rng),
                    n = big ? 97 : small_dim(rng);
      const bool trans_b = variant == 1;
      if (variant > 0) c.attrs.ints = {trans_b ? 1 : 0};
      c.in.push_back(random_tensor(Shape{m, k}, rng, specials));
      c.in.push_back(random_tensor(trans_b ? Shape{n, k} : Shape{k, n}, rng, specials));
      c.in.push_back(random_tensor(Shape{n}, rng, specials));
      return c;
    }
    case OpKind::Matmul: {
      const int64_t ta = variant & 1, tb = (variant >> 1) & 1;
      const bool batched = (variant >> 2) & 1;
      // Batched: 5 elements split over 3 threads when big; small batches include 1 and primes.
      const int64_t bt = big ? 5 : std::array<int64_t, 6>{1, 2, 3, 5, 7, 13}[rng() % 6];
      const int64_t m = big ? 131 : small_dim(rng), k = big ? 67 : small_dim(rng),
                    n = big ? 197 : small_dim(rng);
      auto shape = [&](int64_t r, int64_t cols) { return batched ? Shape{bt, r, cols} : Shape{r, cols}; };
      c.attrs.ints = {ta, tb};
      c.in.push_back(random_tensor(ta ? shape(k, m) : shape(m, k), rng, specials));
      c.in.push_back(random_tensor(tb ? shape(n, k) : shape(k, n), rng, specials));
      return c;
    }
    case OpKind::SumRows: {
      const int64_t m = big ? 61 : small_dim(rng), n = big ? 389 : small_dim(rng);
      c.in.push_back(random_tensor(Shape{m, n}, rng, specials));
      return c;
    }
    case OpKind::Add:
    case OpKind::Relu:
    case OpKind::ReluBackward: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 0, 3);
      c.in.push_back(random_tensor(s, rng, specials));
      if (kind != OpKind::Relu) c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward: {
      const int64_t batch = big ? 53 : small_dim(rng), classes = big ? 37 : small_dim(rng);
      c.in.push_back(random_tensor(Shape{batch, classes}, rng, specials, -4.0f, 4.0f));
      c.in.push_back(random_labels(batch, classes, rng));
      if (kind == OpKind::SoftmaxCrossEntropyBackward) c.in.push_back(scalar(0.75f));
      return c;
    }
    case OpKind::SgdMomentum: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 1, 3);
      c.attrs.floats = {0.05f, 0.9f, variant ? 0.01f : 0.0f};
      for (int i = 0; i < 3; ++i) c.in.push_back(random_tensor(s, rng, specials));
      return c;
    }
    case OpKind::AdamW: {
      const Shape s = big ? Shape{223, 229} : random_shape(rng, 1, 3);
      c.attrs.ints = {1 + static_cast<int64_t>(rng() % 10)};
      c.attrs.floats = {1e-2f, 0.9f, 0.999f, 1e-8f, variant ? 0.1f : 0.0f};
      for (int i = 0; i < 3; ++i) c.in.push_back(random_tensor(s, rng, specials));
      c.in.push_back(random_tensor(s, rng, specials, 0.0f, 0.01f));  // v ≥ 0: a running mean of g²
      return c;
    }
    default:
      break;  // the other op families register their own cases
  }
  return std::nullopt;
}

double f64(float x) {
  return static_cast<double>(x);
}

/// Row-major rows×cols matrix transposed (explicitly, so the product below never sees a flag).
std::vector<double> transposed(const std::vector<double>& a, int64_t rows, int64_t cols) {
  std::vector<double> t(a.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      t[static_cast<size_t>(j * rows + i)] = a[static_cast<size_t>(i * cols + j)];
  return t;
}

/// C = A·B (+ bias) for row-major A[m,k], B[k,n], with tolerance kRel·(|bias| + Σ|a·b|).
Expected gemm64(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>* bias,
                int64_t m, int64_t k, int64_t n) {
  Expected e;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? (*bias)[static_cast<size_t>(j)] : 0.0, mag = std::fabs(s);
      for (int64_t p = 0; p < k; ++p) {
        const double t = a[static_cast<size_t>(i * k + p)] * b[static_cast<size_t>(p * n + j)];
        s += t;
        mag += std::fabs(t);
      }
      e.want.push_back(s);
      e.tol.push_back(kRel * mag);
    }
  return e;
}

/// PyTorch AdamW (torch.optim.AdamW, bias-corrected, decoupled decay) in float64, element-wise
/// state plus the error budget of the float kernel that tracks it.
struct AdamW64 {
  std::vector<double> p, m, v;
  std::vector<double> mag_m;  ///< Σ of |terms| of m (m cancels; its float error is relative to this)
  std::vector<double> tol_p;  ///< accumulated allowed error of p

  void step(const std::vector<float>& g, double lr, double b1, double b2, double eps, double wd, int64_t t) {
    const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t)),
                 bc2 = 1.0 - std::pow(b2, static_cast<double>(t));
    // The contract computes 1 − β^t in float (powi, then one subtraction): β^t carries about t+1
    // rounding errors of ulp(1) = 2^-23·½ each, and the subtraction makes them relative to 1 − β^t,
    // which for β2 = 0.999 is ~10^-3·t. That is a documented difference from PyTorch (which forms the
    // bias corrections in double), so the budget states it explicitly instead of hiding it in kRel.
    const double bc_rel = (static_cast<double>(t) + 2.0) * 0x1p-24 * (1.0 / bc1 + 0.5 / bc2);
    for (size_t i = 0; i < p.size(); ++i) {
      const double gi = g[i];
      const double p1 = p[i] * (1.0 - lr * wd);
      m[i] = b1 * m[i] + (1.0 - b1) * gi;
      mag_m[i] = b1 * mag_m[i] + (1.0 - b1) * std::fabs(gi);
      v[i] = b2 * v[i] + (1.0 - b2) * gi * gi;
      const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + eps;
      const double update = lr / bc1 * m[i] / denom;
      const double update_mag = lr / bc1 * mag_m[i] / denom;
      p[i] = p1 - update;
      tol_p[i] = tol_p[i] * (1.0 - lr * wd) + kRel * std::fabs(p1) + update_mag * (kRel + bc_rel);
    }
  }
};

/// The float64 result of `c`'s op, one Expected per output; nullopt if this file has no model of it.
std::optional<std::vector<Expected>> expected_f64(const Case& c) {
  const std::vector<Tensor>& in = c.in;
  switch (c.kind) {
    case OpKind::Gather: {
      const int64_t rows = in[0].shape()[0], row = rows ? in[0].numel() / rows : 0;
      Expected e;
      for (int64_t idx : c.attrs.ints)
        for (int64_t j = 0; j < row; ++j) {
          e.want.push_back(f64(in[0][idx * row + j]));
          e.tol.push_back(0.0);
        }
      return std::vector<Expected>{e};
    }
    case OpKind::Linear: {
      const bool trans_b = !c.attrs.ints.empty() && c.attrs.ints[0] != 0;
      const int64_t m = in[0].shape()[0], k = in[0].shape()[1], n = in[2].shape()[0];
      const std::vector<double> bias = to_f64(in[2]);
      const std::vector<double> w = trans_b ? transposed(to_f64(in[1]), n, k) : to_f64(in[1]);
      return std::vector<Expected>{gemm64(to_f64(in[0]), w, &bias, m, k, n)};
    }
    case OpKind::Matmul: {
      // Rank 3: each batch element is an independent rank-2 product; the results are concatenated.
      const bool ta = c.attrs.ints[0], tb = c.attrs.ints[1];
      const Shape &sa = in[0].shape(), &sb = in[1].shape();
      const int r = sa.rank() - 2;
      const int64_t batch = r == 0 ? 1 : sa[0];
      const int64_t m = ta ? sa[r + 1] : sa[r], k = ta ? sa[r] : sa[r + 1], n = tb ? sb[r] : sb[r + 1];
      const std::vector<double> a_all = to_f64(in[0]), b_all = to_f64(in[1]);
      Expected e;
      for (int64_t bi = 0; bi < batch; ++bi) {
        std::vector<double> a(a_all.begin() + bi * m * k, a_all.begin() + (bi + 1) * m * k);
        std::vector<double> b(b_all.begin() + bi * k * n, b_all.begin() + (bi + 1) * k * n);
        if (ta) a = transposed(a, sa[r], sa[r + 1]);
        if (tb) b = transposed(b, sb[r], sb[r + 1]);
        const Expected one = gemm64(a, b, nullptr, m, k, n);
        e.want.insert(e.want.end(), one.want.begin(), one.want.end());
        e.tol.insert(e.tol.end(), one.tol.begin(), one.tol.end());
      }
      return std::vector<Expected>{e};
    }
    case OpKind::SumRows: {
      const int64_t m = in[0].shape()[0], n = in[0].shape()[1];
      Expected e;
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0, mag = 0.0;
        for (int64_t i = 0; i < m; ++i) {
          s += in[0][i * n + j];
          mag += std::fabs(in[0][i * n + j]);
        }
        e.want.push_back(s);
        e.tol.push_back(kRel * mag);
      }
      return std::vector<Expected>{e};
    }
    case OpKind::Add: {
      Expected e;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        e.want.push_back(f64(in[0][i]) + f64(in[1][i]));
        e.tol.push_back(kRel * (std::fabs(in[0][i]) + std::fabs(in[1][i])));
      }
      return std::vector<Expected>{e};
    }
    case OpKind::Relu: {
      Expected e;
      for (float x : in[0].values()) {
        e.want.push_back(x > 0.0f ? f64(x) : 0.0);
        e.tol.push_back(0.0);
      }
      return std::vector<Expected>{e};
    }
    case OpKind::ReluBackward: {
      Expected e;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        e.want.push_back(in[0][i] > 0.0f ? f64(in[1][i]) : 0.0);
        e.tol.push_back(0.0);
      }
      return std::vector<Expected>{e};
    }
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward: {
      const int64_t batch = in[0].shape()[0], classes = in[0].shape()[1];
      const double dloss = c.kind == OpKind::SoftmaxCrossEntropyBackward ? f64(in[2][0]) : 1.0;
      Expected loss, dz;
      double total = 0.0, total_mag = 0.0;
      for (int64_t b = 0; b < batch; ++b) {
        const float* z = in[0].data() + b * classes;
        const auto y = static_cast<int64_t>(in[1][b]);
        double mx = z[0];
        for (int64_t j = 1; j < classes; ++j) mx = std::max(mx, f64(z[j]));
        double s = 0.0;
        for (int64_t j = 0; j < classes; ++j) s += std::exp(f64(z[j]) - mx);
        const double lse = mx + std::log(s);
        total += lse - z[y];
        // nll = log s − (z[y] − max) may cancel, so its error is relative to both terms; the + 1 is
        // there because a relative error of s (exp32 and the canonical sum) is an absolute one of log s.
        total_mag += std::log(s) + std::fabs(z[y] - mx) + 1.0;
        for (int64_t j = 0; j < classes; ++j) {
          const double prob = std::exp(f64(z[j]) - lse), hot = j == y ? 1.0 : 0.0;
          // z[j] − max is rounded to float before exp32: an absolute error up to 2^-24·|z[j] − max|
          // of the exponent, i.e. that relative error of the probability (matters for logits ±100).
          // Probabilities below float's range (e^-150 for logits ±100) come out as 0 or a subnormal:
          // an absolute error of a few 2^-150, the subnormal spacing.
          const double arg_rel = 0x1p-24 * std::fabs(f64(z[j]) - mx);
          dz.want.push_back((prob - hot) * dloss / static_cast<double>(batch));
          dz.tol.push_back((kRel * (prob + hot) + arg_rel * prob) * std::fabs(dloss) /
                               static_cast<double>(batch) +
                           0x1p-148);
        }
      }
      loss.want.push_back(total / static_cast<double>(batch));
      loss.tol.push_back(kRel * total_mag / static_cast<double>(batch));
      return std::vector<Expected>{c.kind == OpKind::SoftmaxCrossEntropy ? loss : dz};
    }
    case OpKind::SgdMomentum: {
      // torch.optim.SGD(momentum=μ, dampening=0, nesterov=False, weight_decay=wd).
      const double lr = c.attrs.floats[0], mu = c.attrs.floats[1], wd = c.attrs.floats[2];
      Expected p2, v2;
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        const double p = in[0][i], g = in[1][i], v = in[2][i];
        const double gw = g + wd * p, vn = mu * v + gw;
        const double v_mag = std::fabs(mu * v) + std::fabs(g) + std::fabs(wd * p);
        v2.want.push_back(vn);
        v2.tol.push_back(kRel * v_mag);
        p2.want.push_back(p - lr * vn);
        p2.tol.push_back(kRel * (std::fabs(p) + lr * v_mag));
      }
      return std::vector<Expected>{p2, v2};
    }
    case OpKind::AdamW: {
      const auto& f = c.attrs.floats;
      AdamW64 s{
          to_f64(in[0]), to_f64(in[2]), to_f64(in[3]), {}, std::vector<double>(in[0].values().size(), 0.0)};
      for (float m : in[2].values()) s.mag_m.push_back(std::fabs(m));
      s.step({in[1].values().begin(), in[1].values().end()}, f[0], f[1], f[2], f[3], f[4], c.attrs.ints[0]);
      Expected p2{s.p, s.tol_p}, m2{s.m, {}}, v2{s.v, {}};
      for (double mm : s.mag_m) m2.tol.push_back(kRel * mm);
      for (double vv : s.v) v2.tol.push_back(kRel * vv);
      return std::vector<Expected>{p2, m2, v2};
    }
    default:
      break;  // the other op families register their own cases
  }
  return std::nullopt;
}

// ---- Registration: the generic checks of test_op_coverage.cpp run these for the original ops.

std::optional<std::vector<Expected>> expect_f64(const Case& c) {
  return expected_f64(c);
}

void check_against_f64(const Case& c) {
  const std::optional<std::vector<Expected>> want = expected_f64(c);
  REQUIRE(want.has_value());
  check_against(c, *want);
}

const RegisterOpTests kGatherTests(OpKind::Gather, {variants(OpKind::Gather),
                                                    make_case,
                                                    expect_f64,
                                                    {{{{5}, {}}, {Shape{5, 2}}, "index = rows"},
                                                     {{{-1}, {}}, {Shape{5, 2}}, "negative index"},
                                                     {{{0}, {}}, {Shape{}}, "rank-0 table"},
                                                     {{{0}, {1.0f}}, {Shape{5}}, "a float attribute"},
                                                     {{{0}, {}}, {Shape{5}, Shape{5}}, "two inputs"}}});
const RegisterOpTests kLinearTests(
    OpKind::Linear, {variants(OpKind::Linear),
                     make_case,
                     expect_f64,
                     {{{}, {Shape{3, 4}, Shape{5, 2}, Shape{2}}, "x and w disagree on K"},
                      {{}, {Shape{3, 4}, Shape{4, 2}, Shape{3}}, "bias of the wrong length"},
                      {{}, {Shape{4}, Shape{4, 2}, Shape{2}}, "rank-1 x"},
                      {{{1}, {}}, {Shape{3, 4}, Shape{4, 2}, Shape{2}}, "trans_b with w[K,N]"},
                      {{{2}, {}}, {Shape{3, 4}, Shape{4, 2}, Shape{2}}, "trans_b = 2"},
                      {{{-1}, {}}, {Shape{3, 4}, Shape{4, 2}, Shape{2}}, "trans_b = -1"},
                      {{{0, 0}, {}}, {Shape{3, 4}, Shape{4, 2}, Shape{2}}, "two int attributes"},
                      {{{1}, {}}, {Shape{3, 4}, Shape{2, 4}, Shape{4}}, "trans_b, bias of K"},
                      {{{0}, {1.0f}}, {Shape{3, 4}, Shape{4, 2}, Shape{2}}, "a float attribute"}},
                     {0, 1, 2}});
const RegisterOpTests kMatmulTests(
    OpKind::Matmul, {variants(OpKind::Matmul),
                     make_case,
                     expect_f64,
                     {{{{0}, {}}, {Shape{2, 3}, Shape{3, 4}}, "one transpose flag"},
                      {{{0, 2}, {}}, {Shape{2, 3}, Shape{3, 4}}, "flag 2"},
                      {{{0, 0}, {}}, {Shape{2, 3}, Shape{4, 3}}, "K mismatch"},
                      {{{1, 0}, {}}, {Shape{2, 3}, Shape{3, 4}}, "K mismatch with aᵀ"},
                      {{{0, 1}, {}}, {Shape{2, 3}, Shape{3, 4}}, "K mismatch with bᵀ"},
                      {{{0, 0}, {}}, {Shape{2, 3, 1}, Shape{3, 4}}, "rank-3 a with rank-2 b"},
                      {{{0, 0}, {}}, {Shape{3, 4}, Shape{2, 4, 5}}, "rank-2 a with rank-3 b"},
                      {{{0, 0}, {}}, {Shape{2, 3, 4}, Shape{3, 4, 5}}, "batch sizes differ"},
                      {{{0, 0}, {}}, {Shape{2, 3, 4}, Shape{2, 5, 6}}, "batched K mismatch"},
                      {{{1, 0}, {}}, {Shape{2, 3, 4}, Shape{2, 4, 5}}, "batched K mismatch with aᵀ"},
                      {{{0, 0}, {}}, {Shape{1, 2, 3, 4}, Shape{1, 2, 4, 5}}, "rank 4"},
                      {{{0, 0}, {}}, {Shape{4}, Shape{4}}, "rank 1"}},
                     {0, 1}});
const RegisterOpTests kSumRowsTests(
    OpKind::SumRows, {variants(OpKind::SumRows), make_case, expect_f64, {{{}, {Shape{5}}, "rank-1 input"}}});
const RegisterOpTests kAddTests(OpKind::Add, {variants(OpKind::Add),
                                              make_case,
                                              expect_f64,
                                              {{{}, {Shape{2, 3}, Shape{3, 2}}, "shapes differ"},
                                               {{}, {Shape{2, 3}}, "one input"}},
                                              {0, 1}});
const RegisterOpTests kReluTests(
    OpKind::Relu,
    {variants(OpKind::Relu), make_case, expect_f64, {{{}, {Shape{2}, Shape{2}}, "two inputs"}}, {0}});
const RegisterOpTests kReluBackwardTests(
    OpKind::ReluBackward,
    {variants(OpKind::ReluBackward), make_case, expect_f64, {{{}, {Shape{2}, Shape{3}}, "shapes differ"}}});
const RegisterOpTests kSoftmaxCrossEntropyTests(
    OpKind::SoftmaxCrossEntropy, {variants(OpKind::SoftmaxCrossEntropy),
                                  make_case,
                                  expect_f64,
                                  {{{}, {Shape{4, 3}, Shape{5}}, "labels longer than the batch"},
                                   {{}, {Shape{12}, Shape{12}}, "rank-1 logits"},
                                   {{}, {Shape{0, 3}, Shape{0}}, "empty batch"},
                                   {{}, {Shape{4, 3}, Shape{4, 1}}, "rank-2 labels"}},
                                  {0}});
const RegisterOpTests kSoftmaxCrossEntropyBackwardTests(
    OpKind::SoftmaxCrossEntropyBackward, {variants(OpKind::SoftmaxCrossEntropyBackward),
                                          make_case,
                                          expect_f64,
                                          {{{}, {Shape{4, 3}, Shape{4}, Shape{1}}, "non-scalar dloss"},
                                           {{}, {Shape{4, 3}, Shape{4}}, "no dloss"}}});
const RegisterOpTests kSgdMomentumTests(
    OpKind::SgdMomentum, {variants(OpKind::SgdMomentum),
                          make_case,
                          expect_f64,
                          {{{{}, {0.1f, 0.9f}}, {Shape{2}, Shape{2}, Shape{2}}, "two floats"},
                           {{{}, {0.1f, 0.9f, 0.0f}}, {Shape{2}, Shape{3}, Shape{2}}, "gradient shape"}}});
const RegisterOpTests kAdamWTests(
    OpKind::AdamW,
    {variants(OpKind::AdamW),
     make_case,
     expect_f64,
     {{{{0}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}}, {Shape{2}, Shape{2}, Shape{2}, Shape{2}}, "t = 0"},
      {{{}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}}, {Shape{2}, Shape{2}, Shape{2}, Shape{2}}, "no t"},
      {{{1}, {0.1f, 0.9f, 0.99f, 1e-8f}}, {Shape{2}, Shape{2}, Shape{2}, Shape{2}}, "4 floats"},
      {{{1}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}}, {Shape{2}, Shape{2}, Shape{2}, Shape{1}}, "v shape"}}});

}  // namespace

/// w[rows, cols] stored transposed: [cols, rows].
Tensor transposed_tensor(const Tensor& w) {
  const int64_t rows = w.shape()[0], cols = w.shape()[1];
  Tensor t(Shape{cols, rows});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = w[i * cols + j];
  return t;
}

// Linear's trans_b reads w[N,K] transposed in the same fma chain per element, so the form an imported
// ONNX Gemm (transB = 1) keeps equals the original form on the transposed weight bit for bit — forward
// (reference, and every SIMD path × 1, 2, 3 threads through run_everywhere) and the VJP rule's dx, dw
// (transposed back) and db. Shapes m, k, n pairwise distinct so a swapped index reads out of place;
// the big one splits over threads.
TEST_CASE("linear: trans_b on wᵀ is bitwise linear on w, forward and gradients") {
  std::mt19937 rng(31);
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{3, 5, 7}, {1, 33, 2}, {67, 131, 97}}) {
    CAPTURE(m);
    CAPTURE(k);
    CAPTURE(n);
    const Tensor x = random_tensor(Shape{m, k}, rng, true), w = random_tensor(Shape{k, n}, rng, true),
                 b = random_tensor(Shape{n}, rng, true), dy = random_tensor(Shape{m, n}, rng, false);
    const Tensor wt = transposed_tensor(w);
    const Case plain{OpKind::Linear, {}, {x, w, b}};
    const Case tb{OpKind::Linear, {{1}, {}}, {x, wt, b}};
    const std::vector<Tensor> y = run_everywhere(plain), yt = run_everywhere(tb);
    REQUIRE(yt[0].shape() == Shape{m, n});
    CHECK(bitwise_equal(y[0], yt[0]));
    // The rule's gradients of both forms.
    auto grads = [&](const Case& c) {
      EagerVjpBuilder g;
      std::vector<ValueRef> in{g.add(c.in[0]), g.add(c.in[1]), g.add(c.in[2])};
      const std::vector<ValueRef> out{g.add(run_case(c, nullptr)[0])}, dys{g.add(dy)};
      const bool needs[3] = {true, true, true};
      std::vector<ValueRef> d(3, 0);
      op_info(OpKind::Linear).vjp(g, VjpArgs{c.attrs, in, out, dys, needs}, d);
      return std::vector<Tensor>{g.value(d[0]), g.value(d[1]), g.value(d[2])};
    };
    const std::vector<Tensor> d = grads(plain), dt = grads(tb);
    CHECK(dt[1].shape() == Shape{n, k});  // dw in w's [N,K] layout
    CHECK(bitwise_equal(d[0], dt[0]));
    CHECK(bitwise_equal(transposed_tensor(d[1]), dt[1]));
    CHECK(bitwise_equal(d[2], dt[2]));
  }
  // A square w read as w and as wᵀ: different products (the flag is not ignored).
  const Tensor x = random_tensor(Shape{4, 6}, rng, false), w = random_tensor(Shape{6, 6}, rng, false),
               b = random_tensor(Shape{6}, rng, false);
  CHECK_FALSE(bitwise_equal(run_everywhere({OpKind::Linear, {}, {x, w, b}})[0],
                            run_everywhere({OpKind::Linear, {{1}, {}}, {x, w, b}})[0]));
  CHECK(bitwise_equal(run_everywhere({OpKind::Linear, {}, {x, w, b}})[0],
                      run_everywhere({OpKind::Linear, {{0}, {}}, {x, w, b}})[0]));
}

// Fast mode (ops/float32_gemm.h) runs Linear through a float32 GEMM the provider picks: trans_b must
// reach it as a transposed read of w. The portable GEMMs read op(w) element by element, so there the
// two forms agree bit for bit; every GEMM (OpenBLAS included) is within the float64 model's tolerance.
TEST_CASE("linear: fast mode's float32 gemms take trans_b") {
  std::mt19937 rng(37);
  const int64_t m = 5, k = 131, n = 7;
  const Tensor x = random_tensor(Shape{m, k}, rng, false), w = random_tensor(Shape{k, n}, rng, false),
               b = random_tensor(Shape{n}, rng, false);
  const Tensor wt = transposed_tensor(w);
  const Case tb{OpKind::Linear, {{1}, {}}, {x, wt, b}};
  const Expected want = (*expected_f64(tb))[0];
  for (Float32Gemm gemm : kFloat32Gemms) {
    if (!float32_gemm_built(gemm)) continue;
    CAPTURE(float32_gemm_name(gemm));
    Tensor y(Shape{m, n}), yt(Shape{m, n});
    const std::vector<const Tensor*> in{&x, &w, &b}, in_t{&x, &wt, &b};
    const std::vector<Tensor*> out{&y}, out_t{&yt};
    REQUIRE(run_float32_gemm_op(OpKind::Linear, {}, in, out, gemm));
    REQUIRE(run_float32_gemm_op(OpKind::Linear, {{1}, {}}, in_t, out_t, gemm));
    std::string first;
    CHECK_MESSAGE(mismatches(yt, want, first) == 0, first);
    if (gemm != Float32Gemm::OpenBlas) CHECK(bitwise_equal(y, yt));
  }
  // w[K,N] given with trans_b: the shapes disagree.
  Tensor y(Shape{m, n});
  const std::vector<const Tensor*> wrong{&x, &w, &b};
  const std::vector<Tensor*> out{&y};
  CHECK_THROWS_AS(run_float32_gemm_op(OpKind::Linear, {{1}, {}}, wrong, out, Float32Gemm::Naive), OpError);
}

TEST_CASE("linear: trans_b other than 0 or 1, or more than one int, is refused naming the op and value") {
  const std::vector<Shape> in{Shape{3, 4}, Shape{2, 4}, Shape{2}};
  for (int64_t v : {2, -1, 7}) {
    CAPTURE(v);
    try {
      infer_shapes(OpKind::Linear, {{v}, {}}, in);
      FAIL("trans_b = " << v << " was accepted");
    } catch (const OpError& e) {
      const std::string what = e.what();
      CHECK(what.find("linear") != std::string::npos);
      CHECK(what.find("trans_b must be 0 or 1, got " + std::to_string(v)) != std::string::npos);
    }
  }
  CHECK_THROWS_WITH_AS(infer_shapes(OpKind::Linear, {{1, 0}, {}}, in), doctest::Contains("linear"), OpError);
  CHECK(infer_shapes(OpKind::Linear, {{1}, {}}, in) == std::vector<Shape>{Shape{3, 2}});
  // The attributes are hashed into node records: {} keeps today's bytes, {0} and {1} differ from it.
  CHECK(encode_attrs({}) == std::vector<std::byte>(8, std::byte{0}));
  CHECK(encode_attrs({{0}, {}}) != encode_attrs({}));
  CHECK(encode_attrs({{1}, {}}) != encode_attrs({{0}, {}}));
}

TEST_CASE("matmul: all four transpose combinations against float64") {
  // The generic loop already cycles the variants; this pins each combination on a fixed, non-square
  // shape where a swapped index would read out of place (m, k, n pairwise distinct).
  std::mt19937 rng(5);
  for (int variant = 0; variant < 4; ++variant) {
    const int64_t ta = variant & 1, tb = variant >> 1, m = 3, k = 5, n = 7;
    Case c{OpKind::Matmul, {{ta, tb}, {}}, {}};
    c.in.push_back(random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng, false));
    c.in.push_back(random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng, false));
    check_against_f64(c);
    // The same combination batched: element e must use its own slices of a and b (bt = 2 distinct).
    Case batched{OpKind::Matmul, {{ta, tb}, {}}, {}};
    batched.in.push_back(random_tensor(ta ? Shape{2, k, m} : Shape{2, m, k}, rng, false));
    batched.in.push_back(random_tensor(tb ? Shape{2, n, k} : Shape{2, k, n}, rng, false));
    check_against_f64(batched);
  }
}

TEST_CASE("relu and relu_backward on special values: NaN and −0 map to +0") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float dn = std::numeric_limits<float>::denorm_min();
  const std::vector<float> x{-0.0f, nan, -nan, inf, -inf, dn, -dn, 0.0f, 2.5f};
  const std::vector<uint32_t> want{0u, 0u, 0u, float_bits(inf), 0u, float_bits(dn), 0u, 0u, float_bits(2.5f)};
  Case relu{OpKind::Relu, {}, {Tensor(Shape{9}, x)}};
  const std::vector<Tensor> y = run_case(relu, nullptr);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("relu(" << x[i] << ")");
    CHECK(float_bits(y[0][static_cast<int64_t>(i)]) == want[i]);
  }
  Case back{OpKind::ReluBackward, {}, {Tensor(Shape{9}, x), Tensor(Shape{9}, std::vector<float>(9, -3.0f))}};
  const std::vector<Tensor> dx = run_case(back, nullptr);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("relu_backward at x = " << x[i]);
    CHECK(float_bits(dx[0][static_cast<int64_t>(i)]) == (x[i] > 0.0f ? float_bits(-3.0f) : 0u));
  }
}

TEST_CASE("softmax_cross_entropy is stable for large logits and exact for one class") {
  std::mt19937 rng(3);
  // Logits of ±100 overflow a naive exp in float; the max subtraction must keep the loss finite.
  Case c{OpKind::SoftmaxCrossEntropy,
         {},
         {random_tensor(Shape{9, 13}, rng, false, -100.0f, 100.0f), random_labels(9, 13, rng)}};
  check_against_f64(c);
  c.kind = OpKind::SoftmaxCrossEntropyBackward;
  c.in.push_back(scalar(1.0f));
  check_against_f64(c);

  // One class: softmax is 1, the loss log(1) − 0 = 0 exactly and the gradient (1 − 1)·s = 0.
  Case one{
      OpKind::SoftmaxCrossEntropy, {}, {random_tensor(Shape{5, 1}, rng, false), random_labels(5, 1, rng)}};
  CHECK(float_bits(run_case(one, nullptr)[0][0]) == 0u);
}

TEST_CASE("adamw matches a float64 PyTorch AdamW over steps t = 1..5") {
  std::mt19937 rng(2024);
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  for (float wd : {0.0f, 0.1f}) {
    CAPTURE(wd);
    const Shape s{37};
    Tensor p = random_tensor(s, rng, false), m(s), v(s);  // PyTorch starts m = v = 0
    AdamW64 ref{to_f64(p), to_f64(m), to_f64(v), std::vector<double>(37, 0.0), std::vector<double>(37, 0.0)};
    for (int64_t t = 1; t <= 5; ++t) {
      CAPTURE(t);
      const Tensor g = random_tensor(s, rng, false);
      Case c{OpKind::AdamW, {{t}, {lr, b1, b2, eps, wd}}, {p, g, m, v}};
      std::vector<Tensor> out = run_case(c, nullptr);
      ref.step({g.values().begin(), g.values().end()}, lr, b1, b2, eps, wd, t);
      Expected ep{ref.p, ref.tol_p}, em{ref.m, {}}, ev{ref.v, {}};
      for (double x : ref.mag_m) em.tol.push_back(kRel * x);
      for (double x : ref.v) ev.tol.push_back(kRel * x);
      std::string first_p, first_m, first_v;
      INFO("p: " << first_p);
      CHECK(mismatches(out[0], ep, first_p) == 0);
      INFO("m: " << first_m);
      CHECK(mismatches(out[1], em, first_m) == 0);
      INFO("v: " << first_v);
      CHECK(mismatches(out[2], ev, first_v) == 0);
      // The optimizer actually moved the parameters (a kernel that copied p would pass nothing else).
      CHECK_FALSE(bitwise_equal(out[0], p));
      p = std::move(out[0]);
      m = std::move(out[1]);
      v = std::move(out[2]);
    }
  }
}

TEST_CASE("sgd_momentum matches float64 torch.optim.SGD over several steps") {
  std::mt19937 rng(77);
  const float lr = 0.05f, mu = 0.9f, wd = 0.01f;
  const Shape s{23};
  Tensor p = random_tensor(s, rng, false), v(s);
  std::vector<double> pd = to_f64(p), vd(23, 0.0);
  for (int step = 0; step < 5; ++step) {
    const Tensor g = random_tensor(s, rng, false);
    Case c{OpKind::SgdMomentum, {{}, {lr, mu, wd}}, {p, g, v}};
    std::vector<Tensor> out = run_case(c, nullptr);
    for (size_t i = 0; i < 23; ++i) {
      vd[i] = f64(mu) * vd[i] + f64(g[static_cast<int64_t>(i)]) + f64(wd) * pd[i];
      pd[i] -= f64(lr) * vd[i];
    }
    // The errors of earlier steps add up (v carries them with factor μ < 1); 1e-5 absolute covers five
    // steps of O(1) values with a wide margin (a float ulp of 1 is 1.2e-7).
    double err_p = 0.0, err_v = 0.0;
    for (size_t i = 0; i < 23; ++i) {
      err_p = std::max(err_p, std::fabs(out[0][static_cast<int64_t>(i)] - pd[i]));
      err_v = std::max(err_v, std::fabs(out[1][static_cast<int64_t>(i)] - vd[i]));
    }
    CAPTURE(step);
    CHECK(err_p <= 1e-5);
    CHECK(err_v <= 1e-5);
    p = std::move(out[0]);
    v = std::move(out[1]);
  }
}

TEST_CASE("infer_shapes returns the documented output shapes") {
  auto shapes = [](OpKind k, const Attrs& a, std::vector<Shape> in) { return infer_shapes(k, a, in); };
  CHECK(shapes(OpKind::Gather, {{2, 0, 2}, {}}, {Shape{3, 4, 5}}) == std::vector<Shape>{Shape{3, 4, 5}});
  CHECK(shapes(OpKind::Gather, {{1}, {}}, {Shape{3}}) == std::vector<Shape>{Shape{1}});
  CHECK(shapes(OpKind::Linear, {}, {Shape{2, 3}, Shape{3, 4}, Shape{4}}) == std::vector<Shape>{Shape{2, 4}});
  CHECK(shapes(OpKind::Linear, {{0}, {}}, {Shape{2, 3}, Shape{3, 4}, Shape{4}}) ==
        std::vector<Shape>{Shape{2, 4}});
  CHECK(shapes(OpKind::Linear, {{1}, {}}, {Shape{2, 3}, Shape{4, 3}, Shape{4}}) ==
        std::vector<Shape>{Shape{2, 4}});
  CHECK(shapes(OpKind::Matmul, {{1, 1}, {}}, {Shape{3, 2}, Shape{4, 3}}) == std::vector<Shape>{Shape{2, 4}});
  CHECK(shapes(OpKind::Matmul, {{1, 1}, {}}, {Shape{5, 3, 2}, Shape{5, 4, 3}}) ==
        std::vector<Shape>{Shape{5, 2, 4}});
  CHECK(shapes(OpKind::Matmul, {{0, 0}, {}}, {Shape{0, 3, 2}, Shape{0, 2, 4}}) ==
        std::vector<Shape>{Shape{0, 3, 4}});
  CHECK(shapes(OpKind::SumRows, {}, {Shape{5, 6}}) == std::vector<Shape>{Shape{6}});
  CHECK(shapes(OpKind::SoftmaxCrossEntropy, {}, {Shape{4, 3}, Shape{4}}) == std::vector<Shape>{Shape{}});
  CHECK(shapes(OpKind::SoftmaxCrossEntropyBackward, {}, {Shape{4, 3}, Shape{4}, Shape{}}) ==
        std::vector<Shape>{Shape{4, 3}});
  CHECK(shapes(OpKind::AdamW, {{1}, {0.1f, 0.9f, 0.99f, 1e-8f, 0.0f}},
               {Shape{7}, Shape{7}, Shape{7}, Shape{7}}) == std::vector<Shape>(3, Shape{7}));
  CHECK(shapes(OpKind::SgdMomentum, {{}, {0.1f, 0.9f, 0.0f}}, {Shape{2, 2}, Shape{2, 2}, Shape{2, 2}}) ==
        std::vector<Shape>(2, Shape{2, 2}));
}

TEST_CASE("softmax_cross_entropy kernels throw OpError for labels that are not class ids") {
  std::mt19937 rng(9);
  // A batch of 64 splits over 3 threads in the fast kernels, so the throwing row is on a worker thread
  // for some positions: the pool must carry the exception back.
  for (float label : {10.0f, -1.0f, 2.5f, std::numeric_limits<float>::quiet_NaN(), 1e9f}) {
    for (int64_t row : {0, 63}) {
      CAPTURE(label);
      CAPTURE(row);
      Tensor labels = random_labels(64, 10, rng);
      labels[row] = label;
      Case c{OpKind::SoftmaxCrossEntropy, {}, {random_tensor(Shape{64, 10}, rng, false), labels}};
      CHECK_THROWS_AS(run_case(c, nullptr), OpError);
      CHECK_THROWS_AS(run_case(c, &pool(3)), OpError);
      c.kind = OpKind::SoftmaxCrossEntropyBackward;
      c.in.push_back(scalar(1.0f));
      CHECK_THROWS_AS(run_case(c, nullptr), OpError);
      CHECK_THROWS_AS(run_case(c, &pool(3)), OpError);
    }
  }
  // The largest valid label is accepted.
  Tensor labels = random_labels(4, 10, rng);
  labels[2] = 9.0f;
  Case ok{OpKind::SoftmaxCrossEntropy, {}, {random_tensor(Shape{4, 10}, rng, false), labels}};
  CHECK_NOTHROW(run_case(ok, nullptr));
}

TEST_CASE("run_reference and run_fast check arity") {
  Tensor a(Shape{3}), y(Shape{3});
  const Tensor* in[] = {&a};
  Tensor* out[] = {&y};
  CHECK_THROWS_AS(run_reference(OpKind::Add, {}, in, out), OpError);
  CHECK_THROWS_AS(run_fast(OpKind::Add, {}, in, out, pool(2)), OpError);
  Tensor* two_out[] = {&y, &y};
  CHECK_THROWS_AS(run_reference(OpKind::Relu, {}, in, two_out), OpError);
}
