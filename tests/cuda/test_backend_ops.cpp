// test_backend_ops: every RepOps op on the CUDA backend against the CPU reference kernel, bit for bit
// (after mapping every NaN to 0x7FC00000, as the tensor hash does; docs/commitments.md). Modelled on
// ggml's test-backend-ops, with memcmp instead of an error tolerance. docs/cuda.md describes it.
//
//  1. Always (no GPU needed): the warp algorithms of ops/cuda/lanes.h run in a host emulation of a
//     32-lane warp (shuffle-down tree, xor butterfly) and must equal the CPU's canonical_sum and
//     sequential maximum. This checks the decomposition, not the device.
//  2. With a CUDA device: random cases of every OpKind (1, primes, odd sizes, large K, subnormals,
//     ±0 and NaN where the op defines them) through run_cuda and run_reference, compared with memcmp.
//     The loop runs over OpKind up to Count and fails for a kind it has no case for. The outputs are
//     pre-filled with two distinct finite patterns (CPU one, device the other), so an element that
//     either side leaves unwritten differs even where the right value is NaN.
//  Without a device, once the host emulation passed, it prints "SKIP: no CUDA device ..." and exits
//  with kSkipExit (77), ctest's SKIP_RETURN_CODE; a failed host emulation exits 1 (a failure, even
//  then). An unknown flag or op name exits 2; a run that compared no case at all fails.
//
// Usage: test_backend_ops [-o OP_NAME] [-s SEED]
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ops/cuda/backend.h"
#include "ops/cuda/lanes.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/tensor.h"

using namespace tribunal;

namespace {

/// Exit code of a run that had nothing to compare on (no CUDA device): ctest's SKIP_RETURN_CODE
/// (tests/cuda/CMakeLists.txt), so a CPU-only run is reported as skipped, never as passed.
constexpr int kSkipExit = 77;
/// Exit code of a bad command line (unknown flag, missing value, unknown op name).
constexpr int kUsageExit = 2;

/// Initial bits of every output tensor: the CPU reference's outputs start as kReferenceFill, the
/// device's as kDeviceFill. Both are finite (≈ ±3.4e38, far from any output of these cases) and
/// distinct, so first_difference, which folds every NaN into one, still tells an element left
/// unwritten by either side from a written one, a NaN result included.
constexpr uint32_t kReferenceFill = 0x7F7FBADBu, kDeviceFill = 0xFF7FC0FEu;
static_assert((kReferenceFill & 0x7FFFFFFFu) < 0x7F800000u && (kDeviceFill & 0x7FFFFFFFu) < 0x7F800000u,
              "the fills must be finite: NaN fills compare equal after NaN canonicalization");
static_assert(kReferenceFill != kDeviceFill);

int g_failures = 0;

void fail(const std::string& what) {
  ++g_failures;
  std::printf("  FAIL %s\n", what.c_str());
}

// ---- 1. Host emulation of the warp algorithms ------------------------------------------------------

/// __shfl_down_sync tree as the hardware runs it: all lanes step together; lane j reads lane j + w
/// (its own value when j + w ≥ 32). Returns lane 0.
float emulate_warp_fold(std::vector<float> lane) {
  for (int w = 16; w >= 1; w /= 2) {
    std::vector<float> next(32);
    for (int j = 0; j < 32; ++j) next[j] = lane[j] + lane[j + w < 32 ? j + w : j];
    lane = next;
  }
  return lane[0];
}

float emulate_warp_sum(const float* x, int64_t n, int64_t stride) {
  std::vector<float> lane(32);
  for (int l = 0; l < 32; ++l) lane[l] = cuda::lane_partial_sum(n, l, [&](int64_t i) { return x[i * stride]; });
  return emulate_warp_fold(lane);
}

/// The xor butterfly of warp_max_pick; checks that every lane ends with the same pick.
std::optional<cuda::MaxPick> emulate_warp_max(const float* x, int64_t n) {
  std::vector<cuda::MaxPick> lane(32);
  for (int l = 0; l < 32; ++l) lane[l] = cuda::lane_max_pick(x, n, l);
  for (int off = 16; off >= 1; off /= 2) {
    std::vector<cuda::MaxPick> next(32);
    for (int l = 0; l < 32; ++l) next[l] = cuda::combine_max_pick(lane[l], lane[l ^ off]);
    lane = next;
  }
  for (int l = 1; l < 32; ++l)
    if (lane[l].index != lane[0].index || float_bits(lane[l].value) != float_bits(lane[0].value)) return std::nullopt;
  return lane[0];
}

float sequential_max(const float* x, int64_t n) {
  float m = x[0];
  for (int64_t j = 1; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

void check_emulation(std::mt19937& rng) {
  std::printf("host emulation of the warp algorithms (ops/cuda/lanes.h)\n");
  int cases = 0;
  // Canonical sums: magnitudes spread over 2^±30 so that any other grouping changes the bits.
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-30, 30);
  for (int64_t n : {0, 1, 2, 3, 31, 32, 33, 63, 64, 65, 100, 1000, 4097}) {
    for (int64_t stride : {1, 3}) {
      std::vector<float> x(static_cast<size_t>(std::max<int64_t>(n * stride, 1)));
      for (float& v : x) v = std::ldexp(mant(rng), expo(rng));
      const float want = canonical_sum(x.data(), n, stride), got = emulate_warp_sum(x.data(), n, stride);
      ++cases;
      if (float_bits(want) != float_bits(got))
        fail("warp sum n=" + std::to_string(n) + " stride=" + std::to_string(stride));
    }
  }
  // Sequential maxima with ties, ±0 and NaN (at index 0 and elsewhere).
  const float nan = std::nanf("");
  const float pool[] = {-1.0f, -0.0f, 0.0f, 0.5f, 0.5f, -3.0f, nan, 2.0f, -0.0f, 0.0f};
  for (int64_t n : {1, 2, 3, 5, 31, 32, 33, 64, 100, 257}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<float> x(static_cast<size_t>(n));
      const int span = rep % 3 == 0 ? 4 : rep % 3 == 1 ? 6 : 10;  // only zeros and negatives; + NaN; all
      for (float& v : x) v = pool[rng() % static_cast<uint32_t>(span)];
      const std::optional<cuda::MaxPick> pick = emulate_warp_max(x.data(), n);
      ++cases;
      if (!pick) {
        fail("warp max: lanes disagree, n=" + std::to_string(n));
        continue;
      }
      const float want = sequential_max(x.data(), n), got = cuda::row_max(x.data(), *pick);
      if (float_bits(want) != float_bits(got))
        fail("warp max n=" + std::to_string(n) + ": sequential " + std::to_string(float_bits(want)) + ", warp " +
             std::to_string(float_bits(got)));
    }
  }
  std::printf("  %d cases, %s\n", cases, g_failures ? "FAILED" : "OK");
}

// ---- 2. Device vs CPU reference --------------------------------------------------------------------

struct Case {
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

Tensor scalar(float v) { return filled(Shape{}, v); }

/// The cases of one kind; empty means this file has no cases for it (a failure).
std::vector<Case> cases_for(OpKind kind, std::mt19937& rng) {
  std::vector<Case> cs;
  auto add = [&](std::string label, Attrs attrs, std::vector<Tensor> in) {
    cs.push_back(Case{kind, std::move(label), std::move(attrs), std::move(in)});
  };
  switch (kind) {
    case OpKind::Gather:
      for (int r = 0; r < 12; ++r) {
        const int64_t rows = r == 0 ? 1 : dim(rng), batch = r == 1 ? 1 : dim(rng) * 3;
        const Shape s = r % 3 == 0 ? Shape{rows} : r % 3 == 1 ? Shape{rows, dim(rng)} : Shape{rows, dim(rng), 7};
        Attrs a;
        for (int64_t b = 0; b < batch; ++b) a.ints.push_back(static_cast<int64_t>(rng() % rows));
        add("random", a, {random_tensor(s, rng)});
      }
      break;
    case OpKind::Linear:
      for (int r = 0; r < 16; ++r) {
        const int64_t m = dim(rng), k = r < 4 ? 2053 : dim(rng), n = dim(rng);
        add(r < 4 ? "large K" : "random", {}, {random_tensor(Shape{m, k}, rng), random_tensor(Shape{k, n}, rng),
                                              random_tensor(Shape{n}, rng)});
      }
      // −0 chains: fma(−0, w, −0) = −0 all the way, unless a kernel pads k with fma(0, 0, acc).
      for (int64_t k : {1, 15, 17, 33})
        add("-0 chain", {}, {filled(Shape{3, k}, -0.0f), random_tensor(Shape{k, 5}, rng, 0.5f, 1.0f),
                             filled(Shape{5}, -0.0f)});
      add("big", {}, {random_tensor(Shape{131, 257}, rng), random_tensor(Shape{257, 197}, rng),
                      random_tensor(Shape{197}, rng)});
      break;
    case OpKind::Matmul:
      for (int64_t ta : {0, 1})
        for (int64_t tb : {0, 1})
          for (int r = 0; r < 8; ++r) {
            const int64_t m = r == 0 ? 1 : dim(rng), n = r == 1 ? 1 : dim(rng);
            const int64_t k = r == 2 ? 0 : r == 3 ? 4099 : r == 4 ? 1 : dim(rng);
            add(r == 3 ? "large K" : r == 2 ? "K = 0" : "random", {{ta, tb}, {}},
                {random_tensor(ta ? Shape{k, m} : Shape{m, k}, rng), random_tensor(tb ? Shape{n, k} : Shape{k, n}, rng)});
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
      nans[0] = std::nanf("");       // row 0 starts with NaN
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
    default:  // OpKind::Count and the ops with no CUDA kernel (docs/cuda.md): no cases, a failure in main
      break;
  }
  return cs;
}

std::vector<Tensor> outputs_of(const Case& c, uint32_t fill) {
  std::vector<Shape> shapes;
  for (const Tensor& t : c.in) shapes.push_back(t.shape());
  std::vector<Tensor> out;
  for (const Shape& s : infer_shapes(c.kind, c.attrs, shapes)) out.push_back(filled(s, float_from_bits(fill)));
  return out;
}

std::string describe(const Case& c) {
  std::string s = std::string(op_name(c.kind)) + "(";
  for (size_t i = 0; i < c.in.size(); ++i) s += (i ? ", " : "") + c.in[i].shape().str();
  s += ")";
  if (c.kind == OpKind::Matmul) s += " trans=" + std::to_string(c.attrs.ints[0]) + std::to_string(c.attrs.ints[1]);
  return s + " [" + c.label + "]";
}

/// NaN → 0x7FC00000 (the tensor hash's canonical NaN), then memcmp.
std::optional<int64_t> first_difference(const Tensor& a, const Tensor& b) {
  auto canon = [](float v) { return v != v ? 0x7FC00000u : float_bits(v); };
  for (int64_t i = 0; i < a.numel(); ++i)
    if (canon(a[i]) != canon(b[i])) return i;
  return std::nullopt;
}

bool run_one(const Case& c) {
  std::vector<Tensor> ref = outputs_of(c, kReferenceFill), dev = outputs_of(c, kDeviceFill);
  std::vector<const Tensor*> in;
  std::vector<Tensor*> ref_out, dev_out;
  for (const Tensor& t : c.in) in.push_back(&t);
  for (Tensor& t : ref) ref_out.push_back(&t);
  for (Tensor& t : dev) dev_out.push_back(&t);
  run_reference(c.kind, c.attrs, in, ref_out);
  try {
    run_cuda(c.kind, c.attrs, in, dev_out);
  } catch (const std::exception& e) {
    fail(describe(c) + ": " + e.what());
    return false;
  }
  for (size_t o = 0; o < ref.size(); ++o) {
    if (const auto i = first_difference(ref[o], dev[o])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ": output %zu element %lld: cpu 0x%08X (%.9g), cuda 0x%08X (%.9g)", o,
                    static_cast<long long>(*i), float_bits(ref[o][*i]), ref[o][*i], float_bits(dev[o][*i]),
                    dev[o][*i]);
      fail(describe(c) + buf);
      return false;
    }
  }
  return true;
}

/// The op kind named `name` (op_name), if any.
std::optional<OpKind> op_named(const std::string& name) {
  for (size_t k = 0; k < kOpKindCount; ++k)
    if (name == op_name(static_cast<OpKind>(k))) return static_cast<OpKind>(k);
  return std::nullopt;
}

int usage(const std::string& why) {
  std::string ops;
  for (size_t k = 0; k < kOpKindCount; ++k) ops += std::string(k ? ", " : "") + op_name(static_cast<OpKind>(k));
  std::printf("test_backend_ops: %s\nusage: test_backend_ops [-o OP_NAME] [-s SEED]\nops: %s\n", why.c_str(),
              ops.c_str());
  return kUsageExit;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<OpKind> only;
  uint32_t seed = 20250601;
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag != "-o" && flag != "-s") return usage("unknown argument '" + flag + "'");
    if (i + 1 >= argc) return usage(flag + " needs a value");
    const std::string value = argv[i + 1];
    if (flag == "-o") {
      only = op_named(value);
      if (!only) return usage("no op named '" + value + "'");
    } else {
      char* end = nullptr;
      const unsigned long v = std::strtoul(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v > UINT32_MAX) return usage("-s expects an unsigned 32-bit seed, got '" + value + "'");
      seed = static_cast<uint32_t>(v);
    }
  }
  std::mt19937 rng(seed);
  std::printf("test_backend_ops: CUDA backend vs CPU reference, seed %u\n", seed);

  check_emulation(rng);

  std::string why;
  if (cuda_device_count(&why) == 0) {
    if (g_failures) {
      std::printf("test_backend_ops: FAILED (host emulation); no CUDA device (%s) to run the kernels on\n", why.c_str());
      return 1;
    }
    std::printf("test_backend_ops: SKIP: no CUDA device (%s). The CUDA kernels were not run: their bitwise "
                "equality with the CPU reference is UNVERIFIED.\n",
                why.c_str());
    return kSkipExit;
  }
  std::printf("device 0: %s\n", cuda_device_name(0).c_str());

  int compared = 0;  // cases run on both sides
  for (size_t k = 0; k < kOpKindCount; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (only && *only != kind) continue;
    const std::vector<Case> cs = cases_for(kind, rng);
    if (cs.empty()) {
      fail(std::string(op_name(kind)) + ": no test cases written for this op");
      continue;
    }
    int passed = 0;
    for (const Case& c : cs) passed += run_one(c) ? 1 : 0;
    compared += static_cast<int>(cs.size());
    std::printf("  %-32s %3d/%-3zu %s\n", op_name(kind), passed, cs.size(),
                passed == static_cast<int>(cs.size()) ? "OK" : "FAIL");
  }
  if (compared == 0) fail("no case was compared");
  std::printf("test_backend_ops: %s\n", g_failures ? "FAILED" : "all ops bitwise equal to the CPU reference");
  return g_failures ? 1 : 0;
}
