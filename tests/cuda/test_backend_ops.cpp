// test_backend_ops: every RepOps op on the CUDA backend against the CPU reference kernel, bit for bit
// (after mapping every NaN to 0x7FC00000, as the tensor hash does; docs/commitments.md). Modelled on
// ggml's test-backend-ops, with memcmp instead of an error tolerance. docs/cuda.md describes it.
//
// Cases: for every OpKind, the random cases tests/ops registers (op_test_support.h: 1, primes and odd
// sizes, shapes big enough to split over threads, subnormal inputs, every attribute variant), some of
// them with NaN and ±inf injected into every input that is not a label or token id, plus
// the hand-written edge cases below (large K, −0 chains, tied maxima, NaN rows, K = 0). A kind without
// cases fails. Outputs are pre-filled with two distinct finite patterns (CPU one, backend the other),
// so an element that either side leaves unwritten differs even where the right value is NaN.
//
// Backends: the SIMT emulation (suite "backend", built with TRIBUNAL_CUDA_EMULATE) always; a GPU (suite
// "backend-gpu", built with TRIBUNAL_CUDA) when there is one — without a device that suite prints
// "SKIP" and exits 77, ctest's SKIP_RETURN_CODE, so a CPU-only run never claims GPU equality.
// The suite "backend" also shows that the comparison can fail: sum_rows built with a reordered warp
// fold differs from the reference.
#include <doctest/doctest.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#if defined(TRIBUNAL_HAVE_CUDA_EMULATE)
#define TRIBUNAL_SIMT_EMULATED  // kernels.h's launchers of the emulation (namespace cuda_emulated)
#include "ops/cuda/kernels.h"
#include "ops/cuda/op_launchers.h"
#undef TRIBUNAL_SIMT_EMULATED
#endif
#include "ops/cuda/backend.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/tensor.h"
#include "ops/unary.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;

namespace {

/// Initial bits of every output tensor: the CPU reference's outputs start as kReferenceFill, the
/// backend's as kDeviceFill. Both are finite (≈ ±3.4e38, far from any output of these cases) and
/// distinct, so first_difference, which folds every NaN into one, still tells an element left
/// unwritten by either side from a written one, a NaN result included.
constexpr uint32_t kReferenceFill = 0x7F7FBADBu, kDeviceFill = 0xFF7FC0FEu;
static_assert((kReferenceFill & 0x7FFFFFFFu) < 0x7F800000u && (kDeviceFill & 0x7FFFFFFFu) < 0x7F800000u,
              "the fills must be finite: NaN fills compare equal after NaN canonicalization");
static_assert(kReferenceFill != kDeviceFill);

struct EdgeCase {
  OpKind kind = OpKind::Count;
  std::string label;
  Attrs attrs;
  std::vector<Tensor> in;
};

int64_t dim(std::mt19937& rng) {
  static constexpr int64_t kDims[] = {1, 2, 3, 5, 7, 11, 13, 17, 31, 32, 33, 61, 64, 65, 127};
  return kDims[rng() % std::size(kDims)];
}

/// Uniform in [lo, hi); about one value in 32 a subnormal and one in 64 a signed zero.
Tensor random_tensor(Shape s, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t(s);
  for (float& v : t.values()) {
    const uint32_t r = rng() % 64;
    if (r < 2)
      v = float_from_bits((rng() & 0x007FFFFFu) | 1u | ((rng() & 1u) << 31));
    else if (r == 2)
      v = (rng() & 1u) ? -0.0f : 0.0f;
    else
      v = u(rng);
  }
  return t;
}

Tensor filled(Shape s, float v) {
  Tensor t(s);
  for (float& x : t.values()) x = v;
  return t;
}

Tensor labels(int64_t batch, int64_t classes, std::mt19937& rng) {
  Tensor t(Shape{batch});
  for (float& v : t.values()) v = static_cast<float>(rng() % static_cast<uint32_t>(classes));
  return t;
}

Tensor scalar(float v) {
  return filled(Shape{}, v);
}

/// Hand-written edge cases of the MLP ops (large K, −0 chains, ties and NaN rows, K = 0); other kinds
/// have none here: their cases come from tests/ops' registered generators.
std::vector<EdgeCase> edge_cases(OpKind kind, std::mt19937& rng) {
  std::vector<EdgeCase> cs;
  auto add = [&](std::string label, Attrs attrs, std::vector<Tensor> in) {
    cs.push_back(EdgeCase{kind, std::move(label), std::move(attrs), std::move(in)});
  };
  switch (kind) {
    case OpKind::Gather:
      for (int r = 0; r < 12; ++r) {
        const int64_t rows = r == 0 ? 1 : dim(rng), batch = r == 1 ? 1 : dim(rng) * 3;
        const Shape s = r % 3 == 0   ? Shape{rows}
                        : r % 3 == 1 ? Shape{rows, dim(rng)}
                                     : Shape{rows, dim(rng), 7};
        Attrs a;
        for (int64_t b = 0; b < batch; ++b) a.ints.push_back(static_cast<int64_t>(rng() % rows));
        add("random", a, {random_tensor(s, rng)});
      }
      break;
    case OpKind::Linear:
      for (int r = 0; r < 16; ++r) {
        const int64_t m = dim(rng), k = r < 4 ? 2053 : dim(rng), n = dim(rng);
        add(r < 4 ? "large K" : "random", {},
            {random_tensor(Shape{m, k}, rng), random_tensor(Shape{k, n}, rng), random_tensor(Shape{n}, rng)});
      }
      // −0 chains: fma(−0, w, −0) = −0 all the way, unless a kernel pads k with fma(0, 0, acc).
      for (int64_t k : {1, 15, 17, 33})
        add("-0 chain", {},
            {filled(Shape{3, k}, -0.0f), random_tensor(Shape{k, 5}, rng, 0.5f, 1.0f),
             filled(Shape{5}, -0.0f)});
      add("big", {},
          {random_tensor(Shape{131, 257}, rng), random_tensor(Shape{257, 197}, rng),
           random_tensor(Shape{197}, rng)});
      // trans_b (ints {1}): w[N,K], read transposed in the same chains.
      for (int r = 0; r < 8; ++r) {
        const int64_t m = dim(rng), k = r < 2 ? 2053 : r == 2 ? 0 : dim(rng), n = dim(rng);
        add(r < 2    ? "trans_b large K"
            : r == 2 ? "trans_b K = 0"
                     : "trans_b random",
            {{1}, {}},
            {random_tensor(Shape{m, k}, rng), random_tensor(Shape{n, k}, rng), random_tensor(Shape{n}, rng)});
      }
      for (int64_t k : {1, 17})
        add("trans_b -0 chain", {{1}, {}},
            {filled(Shape{3, k}, -0.0f), random_tensor(Shape{5, k}, rng, 0.5f, 1.0f),
             filled(Shape{5}, -0.0f)});
      add("trans_b big", {{1}, {}},
          {random_tensor(Shape{131, 257}, rng), random_tensor(Shape{197, 257}, rng),
           random_tensor(Shape{197}, rng)});
      break;
    case OpKind::Matmul:
      for (int64_t ta : {0, 1})
        for (int64_t tb : {0, 1})
          for (int r = 0; r < 8; ++r) {
            const int64_t m = r == 0 ? 1 : dim(rng), n = r == 1 ? 1 : dim(rng);
            const int64_t k = r == 2 ? 0 : r == 3 ? 4099 : r == 4 ? 1 : dim(rng);
            add(r == 3   ? "large K"
                : r == 2 ? "K = 0"
                         : "random",
                {{ta, tb}, {}},
                {random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng),
                 random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng)});
          }
      add("big", {{0, 0}, {}}, {random_tensor(Shape{193, 301}, rng), random_tensor(Shape{301, 259}, rng)});
      add("big ᵀᵀ", {{1, 1}, {}}, {random_tensor(Shape{301, 193}, rng), random_tensor(Shape{259, 301}, rng)});
      break;
    case OpKind::SumRows:
      for (int r = 0; r < 12; ++r) {
        const int64_t m = r < 3 ? 1031 : dim(rng), n = dim(rng);
        add(r < 3 ? "many rows" : "random", {}, {random_tensor(Shape{m, n}, rng, -1000.0f, 1000.0f)});
      }
      add("M = 0", {}, {Tensor(Shape{0, 7})});
      break;
    case OpKind::Add:
    case OpKind::Relu:
    case OpKind::ReluBackward:
      for (int r = 0; r < 10; ++r) {
        const Shape s = r == 0 ? Shape{} : r == 1 ? Shape{223, 229} : Shape{dim(rng), dim(rng)};
        std::vector<Tensor> in{random_tensor(s, rng)};
        if (kind != OpKind::Relu) in.push_back(random_tensor(s, rng));
        add("random", {}, std::move(in));
      }
      if (kind != OpKind::Add) {  // NaN, −0, ±inf in x: the selection still gives a non-NaN result
        Tensor x(Shape{6}, std::vector<float>{std::nanf(""), -0.0f, 0.0f, INFINITY, -INFINITY, 1e-45f});
        std::vector<Tensor> in{x};
        if (kind == OpKind::ReluBackward) in.push_back(random_tensor(Shape{6}, rng));
        add("specials", {}, std::move(in));
      }
      break;
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward: {
      auto push = [&](std::string label, Tensor z) {
        const int64_t b = z.shape()[0], c = z.shape()[1];
        std::vector<Tensor> in{std::move(z), labels(b, c, rng)};
        if (kind == OpKind::SoftmaxCrossEntropyBackward) in.push_back(scalar(0.75f));
        add(std::move(label), {}, std::move(in));
      };
      for (int r = 0; r < 12; ++r) push("random", random_tensor(Shape{dim(rng), dim(rng)}, rng, -4.0f, 4.0f));
      push("1×1", random_tensor(Shape{1, 1}, rng));
      push("wide rows", random_tensor(Shape{7, 1000}, rng, -20.0f, 20.0f));
      push("many rows", random_tensor(Shape{257, 10}, rng, -4.0f, 4.0f));
      // Tied maxima and signed zeros: the row maximum must be the CPU's first maximal element.
      Tensor ties(Shape{9, 67});
      const float tie_pool[] = {-0.0f, 0.0f, -1.0f, 0.25f};
      for (float& v : ties.values()) v = tie_pool[rng() % 4];
      push("ties ±0", std::move(ties));
      Tensor nans = random_tensor(Shape{4, 40}, rng);
      nans[0] = std::nanf("");        // row 0 starts with NaN
      nans[40 + 17] = std::nanf("");  // row 1 has one inside
      push("NaN", std::move(nans));
      break;
    }
    case OpKind::SgdMomentum:
      for (int r = 0; r < 8; ++r) {
        const Shape s = r == 0 ? Shape{223, 229} : Shape{dim(rng), dim(rng)};
        add("random", {{}, {0.05f, 0.9f, r % 2 ? 0.01f : 0.0f}},
            {random_tensor(s, rng), random_tensor(s, rng), random_tensor(s, rng)});
      }
      break;
    case OpKind::AdamW:
      for (int r = 0; r < 8; ++r) {
        const Shape s = r == 0 ? Shape{223, 229} : Shape{dim(rng), dim(rng)};
        const int64_t t = r == 1 ? 1000 : 1 + static_cast<int64_t>(rng() % 10);
        add("random", {{t}, {1e-2f, 0.9f, 0.999f, 1e-8f, r % 2 ? 0.1f : 0.0f}},
            {random_tensor(s, rng), random_tensor(s, rng), random_tensor(s, rng),
             random_tensor(s, rng, 0.0f, 0.01f)});
      }
      break;
    case OpKind::BroadcastBinary:
      for (int64_t code = 0; code < 4; ++code) {
        add("empty output", {{code}, {}}, {Tensor(Shape{0, 3}), random_tensor(Shape{3}, rng)});
        add("scalar ∘ scalar", {{code}, {}}, {random_tensor(Shape{}, rng), random_tensor(Shape{}, rng)});
        add("[B,1,T] ∘ [B,H,1]", {{code}, {}},
            {random_tensor(Shape{3, 1, 37}, rng), random_tensor(Shape{3, 5, 1}, rng)});
        // NaN, ±inf, ±0 and a subnormal against each other: the one IEEE operation's bits on every backend.
        const std::vector<float> v{std::nanf(""), INFINITY, -INFINITY, -0.0f, 0.0f, 1e-45f, 1.0f};
        add("specials", {{code}, {}}, {Tensor(Shape{7, 1}, v), Tensor(Shape{1, 7}, v)});
      }
      break;
    case OpKind::MaxPool2d:
    case OpKind::MaxPool2dBackward: {
      // ResNet's stem (3×3, stride 2, pad 1) and a stride-1 window: overlapping windows choose one
      // element many times (ties everywhere: ±0 and −inf), NaN inside; the gradient's sums in window order.
      const float tie_pool[] = {-0.0f, 0.0f, -INFINITY, 0.25f};
      for (const std::vector<int64_t>& ints :
           {std::vector<int64_t>{3, 3, 2, 2, 1, 1, 1, 1}, std::vector<int64_t>{3, 2, 1, 1, 2, 0, 1, 1}}) {
        Tensor x(Shape{2, 3, 13, 11});
        for (float& v : x.values()) v = tie_pool[rng() % 4];
        x[40] = std::nanf("");
        std::vector<Tensor> in{x};
        if (kind == OpKind::MaxPool2dBackward) {
          const int64_t oh = (13 + ints[4] + ints[6] - ints[0]) / ints[2] + 1;
          const int64_t ow = (11 + ints[5] + ints[7] - ints[1]) / ints[3] + 1;
          in.push_back(random_tensor(Shape{2, 3, oh, ow}, rng));
        }
        add("overlapping windows, ties, NaN", {ints, {}}, std::move(in));
      }
      break;
    }
    case OpKind::GlobalAvgPool: {
      add("a 1×1 plane", {}, {random_tensor(Shape{3, 2, 1, 1}, rng)});
      add("long planes", {}, {random_tensor(Shape{2, 3, 61, 67}, rng, -1000.0f, 1000.0f)});
      Tensor nan = random_tensor(Shape{2, 2, 5, 7}, rng);
      nan[40] = std::nanf("");
      nan[3] = INFINITY;
      add("NaN, inf", {}, {std::move(nan)});
      add("no planes", {}, {Tensor(Shape{0, 3, 4, 4})});
      break;
    }
    case OpKind::GlobalAvgPoolBackward: {
      const std::vector<float> v{std::nanf(""), INFINITY, -0.0f, 1e-45f, 3.0f, -7.0f};
      add("specials, H·W = 21", {{3, 7}, {}}, {Tensor(Shape{2, 3, 1, 1}, v)});
      add("one element", {{1, 1}, {}}, {Tensor(Shape{1, 6, 1, 1}, v)});
      break;
    }
    case OpKind::SumToShape:
      for (float sign : {1.0f, -1.0f}) {
        add("nothing to sum", {{3}, {sign}}, {Tensor(Shape{0, 3})});
        add("one term each (−0 → +0)", {{3}, {sign}}, {filled(Shape{3}, -0.0f)});
        add("long reduction", {{1}, {sign}}, {random_tensor(Shape{1000, 1}, rng, -1000.0f, 1000.0f)});
        add("to a scalar", {{}, {sign}}, {random_tensor(Shape{3, 5, 7, 11}, rng)});
        add("strided lanes", {{1, 7, 1, 3}, {sign}}, {random_tensor(Shape{5, 7, 11, 3}, rng)});
        Tensor nan = random_tensor(Shape{40, 4}, rng);
        nan[17 * 4 + 1] = std::nanf("");
        add("NaN", {{4}, {sign}}, {std::move(nan)});
      }
      break;
    case OpKind::Where: {
      // Conditions of every truth: ±0 false; NaN, ±inf, a subnormal and 1 true.
      const std::vector<float> cv{0.0f, -0.0f, std::nanf(""), INFINITY, -INFINITY, 1e-45f, 1.0f};
      const Tensor cond(Shape{7, 1}, cv);
      add("NaN/−0/subnormal conditions", {},
          {cond, random_tensor(Shape{7, 5}, rng), random_tensor(Shape{5}, rng)});
      add("rank-0 cond (true)", {}, {scalar(std::nanf("")), random_tensor(Shape{3, 4}, rng), scalar(-1.0f)});
      add("rank-0 cond (false)", {}, {scalar(-0.0f), random_tensor(Shape{3, 4}, rng), scalar(-1.0f)});
      Tensor mask(Shape{1, 1, 33, 33});
      for (int64_t r = 0; r < 33; ++r)
        for (int64_t k = 0; k < 33; ++k) mask[r * 33 + k] = k <= r ? 1.0f : 0.0f;
      add("rank-4 causal mask, −inf fill", {},
          {mask, random_tensor(Shape{2, 3, 33, 33}, rng), scalar(-INFINITY)});
      add("rank-4 cond of every broadcast", {},
          {random_tensor(Shape{2, 1, 5, 1}, rng), random_tensor(Shape{1, 3, 1, 7}, rng),
           random_tensor(Shape{2, 3, 5, 7}, rng)});
      add("empty output", {}, {Tensor(Shape{0, 3}), random_tensor(Shape{3}, rng), scalar(0.0f)});
      // NaN payloads and −0 in the branches: copied, never computed.
      add("special branches", {}, {Tensor(Shape{7}, cv), Tensor(Shape{7}, cv), filled(Shape{7}, -0.0f)});
      break;
    }
    case OpKind::WhereBackward:
      for (int64_t branch = 0; branch < 2; ++branch) {
        const std::vector<float> cv{0.0f, -0.0f, std::nanf(""), INFINITY, -INFINITY, 1e-45f, 1.0f};
        add("NaN/−0/subnormal conditions", {{branch}, {}},
            {Tensor(Shape{7}, cv), random_tensor(Shape{3, 7}, rng)});
        add("rank-0 cond", {{branch}, {}}, {scalar(-0.0f), random_tensor(Shape{2, 3, 5, 7}, rng)});
        add("rank-4 cond", {{branch}, {}},
            {random_tensor(Shape{1, 3, 1, 7}, rng), random_tensor(Shape{2, 3, 5, 7}, rng)});
        add("−0 and NaN in dy", {{branch}, {}}, {Tensor(Shape{7}, cv), Tensor(Shape{7}, cv)});
        add("empty", {{branch}, {}}, {scalar(1.0f), Tensor(Shape{0, 4})});
      }
      break;
    case OpKind::GatherRows: {
      Tensor ids(Shape{2, 3, 4});
      for (float& v : ids.values()) v = static_cast<float>(rng() % 17);
      ids[5] = -0.0f;
      add("ids [2,3,4] of a [17, 5] table", {}, {random_tensor(Shape{17, 5}, rng), ids});
      add("rank-0 id of a rank-4 table", {}, {random_tensor(Shape{3, 2, 5, 7}, rng), scalar(2.0f)});
      add("a rank-1 table", {},
          {random_tensor(Shape{9}, rng), Tensor(Shape{2, 2}, std::vector<float>{8, 0, 4, 8})});
      add("no ids", {}, {random_tensor(Shape{4, 3}, rng), Tensor(Shape{0})});
      add("empty rows", {}, {Tensor(Shape{4, 0}), Tensor(Shape{3}, std::vector<float>{1, 2, 3})});
      break;
    }
    case OpKind::Unary:
    case OpKind::UnaryBackward:
      // Every function code and pow's paths on the values where the functions branch: NaN, ±inf, ±0,
      // subnormals, exp32's and sigmoid32's thresholds, erf32's splits, the trig range limit and beyond.
      for (int64_t fn = 0; fn < kUnaryFnCount; ++fn)
        for (float p : fn == 10 ? std::vector<float>{2.0f, 3.0f, 0.5f, -1.0f, 1.5f, -0.5f, 65.0f, 0.0f}
                                : std::vector<float>{0.0f}) {
          const std::vector<float> v{std::nanf(""), INFINITY, -INFINITY, -0.0f,     0.0f,      1e-45f,
                                     -1e-45f,       1.0f,     -1.0f,     2.0f,      3.99f,     4.0f,
                                     -0.55f,        88.8f,    -104.0f,   -100.0f,   20.0f,     kTrigMax,
                                     -kTrigMax,     5e6f,     1e-20f,    0.785398f, -2.35619f, 12345.7f};
          const Shape s{static_cast<int64_t>(v.size())};
          Tensor x(s, v);
          if (kind == OpKind::Unary) {
            add("specials", {{fn}, {p}}, {x});
            add("empty", {{fn}, {p}}, {Tensor(Shape{0, 3})});
          } else {
            Tensor y(s);
            for (int64_t i = 0; i < s.numel(); ++i) y[i] = unary32(fn, x[i], p);
            add("specials", {{fn}, {p}}, {x, y, random_tensor(s, rng)});
            add("specials, dy NaN/inf/0", {{fn}, {p}},
                {x, y, Tensor(s, std::vector<float>(v.rbegin(), v.rend()))});
          }
        }
      break;
    case OpKind::Transpose:
      add("rank 1", {{0}, {}}, {random_tensor(Shape{37}, rng)});
      add("rank 4, every axis moved", {{3, 2, 0, 1}, {}}, {random_tensor(Shape{3, 5, 7, 11}, rng)});
      add("attention [B,T,H,E] → [B,H,T,E]", {{0, 2, 1, 3}, {}}, {random_tensor(Shape{2, 33, 4, 16}, rng)});
      add("kᵀ: the last two axes", {{0, 1, 3, 2}, {}}, {random_tensor(Shape{2, 3, 33, 65}, rng)});
      add("empty", {{1, 0}, {}}, {Tensor(Shape{0, 5})});
      break;
    case OpKind::Slice:
      add("rank 1, step 3", {{0, 1, 37, 3}, {}}, {random_tensor(Shape{37}, rng)});
      add("rank 4, last axis, step 2", {{3, 1, 11, 2}, {}}, {random_tensor(Shape{3, 5, 7, 11}, rng)});
      add("rank 4, axis 1, step 1", {{1, 2, 4, 1}, {}}, {random_tensor(Shape{3, 5, 7, 11}, rng)});
      add("rotate_half's second half", {{2, 8, 16, 1}, {}}, {random_tensor(Shape{2, 33, 16}, rng)});
      add("step past the range", {{0, 4, 6, int64_t{1} << 62}, {}}, {random_tensor(Shape{7, 3}, rng)});
      add("size 0", {{1, 3, 3, 1}, {}}, {random_tensor(Shape{4, 5}, rng)});
      break;
    case OpKind::SliceBackward:
      add("rank 1, step 3", {{0, 1, 3, 37}, {}}, {random_tensor(Shape{12}, rng)});
      add("rank 4, last axis, step 2", {{3, 1, 2, 11}, {}}, {random_tensor(Shape{3, 5, 7, 5}, rng)});
      add("rank 4, axis 0", {{0, 2, 1, 5}, {}}, {random_tensor(Shape{2, 3, 4, 5}, rng)});
      add("dy of size 0: all +0", {{1, 3, 1, 5}, {}}, {Tensor(Shape{4, 0})});
      add("−0 from dy stays −0", {{0, 1, 2, 6}, {}}, {filled(Shape{3, 7}, -0.0f)});
      break;
    case OpKind::Concat:
      add("one input", {{1}, {}}, {random_tensor(Shape{3, 5}, rng)});
      add("rank 1", {{0}, {}}, {random_tensor(Shape{7}, rng), random_tensor(Shape{33}, rng)});
      add("rank 4, last axis", {{3}, {}},
          {random_tensor(Shape{2, 3, 4, 1}, rng), random_tensor(Shape{2, 3, 4, 16}, rng),
           random_tensor(Shape{2, 3, 4, 5}, rng)});
      add("rank 4, axis 0", {{0}, {}},
          {random_tensor(Shape{1, 3, 4, 5}, rng), random_tensor(Shape{2, 3, 4, 5}, rng)});
      add("empty inputs between", {{1}, {}},
          {Tensor(Shape{3, 0}), random_tensor(Shape{3, 2}, rng), Tensor(Shape{3, 0}),
           random_tensor(Shape{3, 1}, rng)});
      add("all empty", {{0}, {}}, {Tensor(Shape{0, 4}), Tensor(Shape{0, 4})});
      break;
    case OpKind::ReduceMean:
      add("RMSNorm's last axis, 1000 wide", {{2}, {}},
          {random_tensor(Shape{3, 5, 1000}, rng, -100.0f, 100.0f)});
      add("rank 1", {{0}, {}}, {random_tensor(Shape{37}, rng)});
      add("rank 4, axis 1 (strided lanes)", {{1}, {}}, {random_tensor(Shape{2, 67, 3, 5}, rng)});
      add("nothing to average (NaN)", {{1}, {}}, {Tensor(Shape{3, 0})});
      add("no rows", {{1}, {}}, {Tensor(Shape{0, 5})});
      add("−0 terms give +0", {{0}, {}}, {filled(Shape{3, 2}, -0.0f)});
      break;
    case OpKind::ReduceMeanBackward:
      add("last axis", {{2, 1000}, {}}, {random_tensor(Shape{3, 5, 1}, rng)});
      add("rank 4, axis 1", {{1, 67}, {}}, {random_tensor(Shape{2, 1, 3, 5}, rng)});
      add("N = 0", {{1, 0}, {}}, {random_tensor(Shape{3, 1}, rng)});
      add("N = 3 (inexact 1/3), −0 and NaN", {{0, 3}, {}},
          {Tensor(Shape{1, 3}, std::vector<float>{std::nanf(""), -0.0f, 1e-45f})});
      break;
    case OpKind::Expand:
      add("GQA heads [B,1,T,E] → [B,G,T,E]", {{2, 4, 33, 16}, {}}, {random_tensor(Shape{2, 1, 33, 16}, rng)});
      add("scalar to rank 4", {{2, 3, 4, 5}, {}}, {scalar(std::nanf(""))});
      add("rank 1 to rank 3", {{3, 2, 7}, {}}, {random_tensor(Shape{7}, rng)});
      add("to size 0", {{0, 3}, {}}, {random_tensor(Shape{1, 3}, rng)});
      add("same shape", {{5, 1}, {}}, {filled(Shape{5, 1}, -0.0f)});
      break;
    case OpKind::BatchNorm:
      add("ResNet-like [8, 3, 9, 7]: 504 elements per channel", {{}, {1e-5f}},
          {random_tensor(Shape{8, 3, 9, 7}, rng, -100.0f, 100.0f), random_tensor(Shape{3}, rng),
           random_tensor(Shape{3}, rng)});
      add("M = 1 (var 0: y = β)", {{}, {1e-5f}},
          {random_tensor(Shape{1, 5}, rng), random_tensor(Shape{5}, rng), random_tensor(Shape{5}, rng)});
      add("a NaN in one channel, ε = 0 on a constant one", {{}, {0.0f}},
          {Tensor(Shape{3, 2}, std::vector<float>{std::nanf(""), 2.0f, 1.0f, 2.0f, 3.0f, 2.0f}),
           random_tensor(Shape{2}, rng), random_tensor(Shape{2}, rng)});
      break;
    case OpKind::BatchNormBackward:
      add("[4, 5, 67]: 268 elements per channel", {{}, {1e-5f}},
          {random_tensor(Shape{4, 5, 67}, rng, -10.0f, 10.0f), random_tensor(Shape{5}, rng),
           random_tensor(Shape{4, 5, 67}, rng)});
      add("M = 1", {{}, {1e-3f}},
          {random_tensor(Shape{1, 3, 1, 1}, rng), random_tensor(Shape{3}, rng),
           random_tensor(Shape{1, 3, 1, 1}, rng)});
      break;
    case OpKind::BatchNormRunning:
      add("unbiased variance over [8, 3, 9, 7], momentum 0.9", {{2}, {0.9f}},
          {random_tensor(Shape{3}, rng), random_tensor(Shape{8, 3, 9, 7}, rng, -100.0f, 100.0f)});
      add("mean, momentum 0 (the statistic itself)", {{0}, {0.0f}},
          {random_tensor(Shape{5}, rng), random_tensor(Shape{2, 5, 33}, rng)});
      add("biased variance of M = 1, momentum 1, a NaN running value", {{1}, {1.0f}},
          {Tensor(Shape{2}, std::vector<float>{std::nanf(""), -0.0f}), random_tensor(Shape{1, 2}, rng)});
      break;
    case OpKind::BatchNormInference:
      add("ResNet-like [2, 4, 5, 3]", {{}, {1e-5f}},
          {random_tensor(Shape{2, 4, 5, 3}, rng, -10.0f, 10.0f), random_tensor(Shape{4}, rng),
           random_tensor(Shape{4}, rng), random_tensor(Shape{4}, rng),
           random_tensor(Shape{4}, rng, 0.0f, 3.0f)});
      add("var + ε ≤ 0 and var = 0, ε = 0", {{}, {0.0f}},
          {random_tensor(Shape{3, 3}, rng), random_tensor(Shape{3}, rng), random_tensor(Shape{3}, rng),
           random_tensor(Shape{3}, rng), Tensor(Shape{3}, std::vector<float>{-1.0f, 0.0f, -0.0f})});
      break;
    default:
      break;
  }
  return cs;
}

Tensor filled_like(const Shape& s, uint32_t fill) {
  return filled(s, float_from_bits(fill));
}

std::vector<Tensor> outputs_of(OpKind kind, const Attrs& attrs, const std::vector<Tensor>& in,
                               uint32_t fill) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  std::vector<Tensor> out;
  for (const Shape& s : infer_shapes(kind, attrs, shapes)) out.push_back(filled_like(s, fill));
  return out;
}

std::string describe(OpKind kind, const Attrs& attrs, const std::vector<Tensor>& in,
                     const std::string& label) {
  std::string s = std::string(op_name(kind)) + "(";
  // Appended piece by piece: GCC 12 -O3 gives a false -Wrestrict on const char* + std::string.
  for (size_t i = 0; i < in.size(); ++i) {
    if (i) s += ", ";
    s += in[i].shape().str();
  }
  s += ")";
  for (int64_t v : attrs.ints) {
    s += ' ';
    s += std::to_string(v);
  }
  s += " [";
  s += label;
  s += ']';
  return s;
}

/// NaN → 0x7FC00000 (the tensor hash's canonical NaN), then memcmp.
std::optional<int64_t> first_difference(const Tensor& a, const Tensor& b) {
  auto canon = [](float v) { return v != v ? 0x7FC00000u : float_bits(v); };
  for (int64_t i = 0; i < a.numel(); ++i)
    if (canon(a[i]) != canon(b[i])) return i;
  return std::nullopt;
}

using Backend = void (*)(OpKind, const Attrs&, std::span<const Tensor* const>, std::span<Tensor* const>);

/// Runs one case on the reference and on `backend`; "" when every output is bitwise equal, else what
/// differs (or the backend's error).
std::string compare(Backend backend, OpKind kind, const Attrs& attrs, const std::vector<Tensor>& in) {
  std::vector<Tensor> ref = outputs_of(kind, attrs, in, kReferenceFill),
                      dev = outputs_of(kind, attrs, in, kDeviceFill);
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> ref_out, dev_out;
  for (const Tensor& t : in) ins.push_back(&t);
  for (Tensor& t : ref) ref_out.push_back(&t);
  for (Tensor& t : dev) dev_out.push_back(&t);
  run_reference(kind, attrs, ins, ref_out);
  try {
    backend(kind, attrs, ins, dev_out);
  } catch (const std::exception& e) {
    return std::string("the backend threw: ") + e.what();
  }
  for (size_t o = 0; o < ref.size(); ++o)
    if (const auto i = first_difference(ref[o], dev[o])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "output %zu element %lld: cpu 0x%08X (%.9g), backend 0x%08X (%.9g)", o,
                    static_cast<long long>(*i), float_bits(ref[o][*i]), ref[o][*i], float_bits(dev[o][*i]),
                    dev[o][*i]);
      return buf;
    }
  return "";
}

/// Whether input `i` of `kind` holds integers stored as floats (class labels, token ids): those keep
/// their values, every other input may receive NaN and ±inf.
bool integral_input(OpKind kind, size_t i) {
  switch (kind) {
    case OpKind::SoftmaxCrossEntropy:
    case OpKind::SoftmaxCrossEntropyBackward:
      return i == 1;
    case OpKind::Embedding:
      return i == 2;
    case OpKind::EmbeddingBackward:
      return i == 0;
    case OpKind::GatherRows:
      return i == 1;
    default:
      return false;
  }
}

/// About one element in 8 of every non-integral input becomes NaN, +inf or −inf.
void inject_non_finite(OpKind kind, std::vector<Tensor>& in, std::mt19937& rng) {
  const float specials[] = {std::nanf(""), INFINITY, -INFINITY};
  for (size_t i = 0; i < in.size(); ++i) {
    if (integral_input(kind, i)) continue;
    for (float& v : in[i].values())
      if (rng() % 8 == 0) v = specials[rng() % 3];
  }
}

/// Every kind's registered random cases and edge cases on `backend`; returns the number compared.
int check_every_op(Backend backend, uint32_t seed) {
  std::mt19937 rng(seed);
  int compared = 0;
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    const std::string name = op_name(kind);
    CAPTURE(name);
    const optest::OpTests* tests = optest::find_op_tests(kind);
    REQUIRE_MESSAGE(tests != nullptr, "no tests registered for op " << op_name(kind));
    int cases = 0;
    for (int variant = 0; variant < tests->variants; ++variant)
      for (int trial = 0; trial < 16; ++trial) {
        // Trials 0 and 1 are big (the fast kernels split them over threads); odd trials carry subnormals;
        // trials 12 to 15 carry NaN and ±inf.
        std::optional<optest::Case> c = tests->make(kind, rng, trial < 2, variant, trial % 2 == 1);
        REQUIRE(c.has_value());
        if (trial >= 12) inject_non_finite(kind, c->in, rng);
        const std::string diff = compare(backend, kind, c->attrs, c->in);
        CHECK_MESSAGE(diff.empty(), describe(kind, c->attrs, c->in, trial >= 12 ? "NaN/inf" : "registered")
                                        << ": " << diff);
        ++cases;
      }
    for (const EdgeCase& e : edge_cases(kind, rng)) {
      const std::string diff = compare(backend, kind, e.attrs, e.in);
      CHECK_MESSAGE(diff.empty(), describe(kind, e.attrs, e.in, e.label) << ": " << diff);
      ++cases;
    }
    CHECK_MESSAGE(cases > 0, name << ": no cases");
    compared += cases;
  }
  return compared;
}

}  // namespace

#if defined(TRIBUNAL_HAVE_CUDA_EMULATE)

TEST_SUITE("backend") {
  TEST_CASE("every op on the SIMT emulation of the CUDA kernels is bitwise equal to the CPU reference") {
    const int compared = check_every_op(run_cuda_emulated, 20250601);
    MESSAGE(compared << " cases of " << kOpKindCount << " op kinds compared");
    CHECK(compared > 0);
  }

  // The backend's own table (ops/cuda/op_launchers.h), kept beside the ops' descriptors: every kind
  // of the registry has a launcher, the sentinel none. (Pointers compared outside doctest's macros,
  // which cannot print them.)
  TEST_CASE("every op kind has a CUDA kernel in the backend's table") {
    for (size_t k = 0; k < kOpKindCount; ++k) {
      CAPTURE(std::string(op_name(static_cast<OpKind>(k))));
      const bool has_launcher = cuda_emulated::op_launcher(static_cast<OpKind>(k)) != nullptr;
      CHECK(has_launcher);
    }
    const bool sentinel_has_none = cuda_emulated::op_launcher(OpKind::Count) == nullptr;
    CHECK(sentinel_has_none);
  }

  // The check can fail: sum_rows whose warp fold runs w = 1, 2, …, 16 instead of the canonical
  // 16, …, 1 (launch_sum_rows_reordered, the same kernel template with another fold) must differ from the
  // reference on rows whose magnitudes span 2^±30, while the canonical fold on the same input is equal.
  TEST_CASE("a kernel with a reordered reduction is caught") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::uniform_int_distribution<int> expo(-30, 30);
    const int64_t m = 1024, n = 33;
    Tensor x(Shape{m, n});
    for (float& v : x.values()) v = std::ldexp(mant(rng), expo(rng));
    Tensor ref(Shape{n}), canonical(Shape{n}), reordered(Shape{n});
    std::vector<const Tensor*> in{&x};
    std::vector<Tensor*> out{&ref};
    run_reference(OpKind::SumRows, {}, in, out);
    cuda_emulated::launch_sum_rows(x.data(), canonical.data(), m, n);
    cuda_emulated::launch_sum_rows_reordered(x.data(), reordered.data(), m, n);
    CHECK_FALSE(first_difference(ref, canonical).has_value());
    const std::optional<int64_t> caught = first_difference(ref, reordered);
    REQUIRE(caught.has_value());
    char buf[96];
    std::snprintf(buf, sizeof buf, "column %lld: cpu 0x%08X, reordered fold 0x%08X",
                  static_cast<long long>(*caught), float_bits(ref[*caught]), float_bits(reordered[*caught]));
    MESSAGE("reordered reduction caught at " << buf);
    int differing = 0;
    for (int64_t j = 0; j < n; ++j) differing += float_bits(ref[j]) != float_bits(reordered[j]);
    CHECK(differing > n / 2);  // not a fluke of one column
  }

  TEST_CASE("the emulated backend refuses a bad op input with the CPU's OpError") {
    Tensor logits(Shape{2, 3}), labels(Shape{2}, std::vector<float>{0.0f, 3.0f}), loss(Shape{});
    std::vector<const Tensor*> in{&logits, &labels};
    std::vector<Tensor*> out{&loss};
    CHECK_THROWS_WITH_AS(run_cuda_emulated(OpKind::SoftmaxCrossEntropy, {}, in, out),
                         doctest::Contains("is not a class id in [0, 3)"), OpError);
  }

  TEST_CASE("the emulated backend refuses a gather_rows id outside [0, N) with the CPU's message") {
    Tensor table(Shape{4, 2}), ids(Shape{2, 2}, std::vector<float>{0.0f, 3.0f, 4.0f, 1.0f}),
        y(Shape{2, 2, 2});
    std::vector<const Tensor*> in{&table, &ids};
    std::vector<Tensor*> out{&y};
    const char* want = "gather_rows: id 4.000000 at position 2 is not a token id in [0, 4)";
    CHECK_THROWS_WITH_AS(run_reference(OpKind::GatherRows, {}, in, out), want, OpError);
    CHECK_THROWS_WITH_AS(run_cuda_emulated(OpKind::GatherRows, {}, in, out), want, OpError);
    ids[2] = 0.5f;
    CHECK_THROWS_WITH_AS(run_cuda_emulated(OpKind::GatherRows, {}, in, out),
                         "gather_rows: id 0.500000 at position 2 is not a token id in [0, 4)", OpError);
  }
}

#endif

#if defined(TRIBUNAL_HAVE_CUDA)

TEST_SUITE("backend-gpu") {
  TEST_CASE("every op on the GPU is bitwise equal to the CPU reference") {
    std::string why;
    if (cuda_device_count(&why) == 0) {
      std::printf(
          "test_backend_ops: SKIP: no CUDA device (%s). The CUDA kernels were not run on a GPU in this "
          "run: their bitwise equality with the CPU reference on this machine is not shown.\n",
          why.c_str());
      std::fflush(stdout);
      std::_Exit(77);  // ctest's SKIP_RETURN_CODE (tests/cuda/CMakeLists.txt)
    }
    MESSAGE("device 0: " << cuda_device_name(0));
    CHECK(check_every_op(run_cuda, 20250601) > 0);
  }
}

#endif
