// The SIMD fast kernels of softmax_cross_entropy (+ backward) and sum_rows on the shapes the generic
// random cases of test_op_coverage.cpp rarely reach: rows wider than 64 classes, class counts around
// the vector widths (partial vectors and partial 32-lane chunks), many columns for sum_rows (several
// column blocks, ragged thread ranges), and special values (zero maxima of either sign, NaN, ±inf,
// values whose exp underflows to subnormals). Every case is compared with memcmp to the reference on
// every SIMD path × 1, 2, 3 threads; only rows holding a NaN input compare NaN as "any NaN", since NaN
// payloads are not part of the contract (the tensor hash canonicalizes them).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/registry.h"
#include "ops/simd.h"
#include "ops/tensor.h"
#include "tests/ops/op_test_support.h"

using namespace tribunal;
using namespace tribunal::optest;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Bitwise equal, except that any NaN matches any NaN.
bool same_bits_nan_canonical(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape())) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(a.data() + i, b.data() + i, sizeof(float)) != 0) return false;
  }
  return true;
}

/// Runs c on the reference and on every path × 1, 2, 3 threads and compares every output.
void check_all_paths(const Case& c, bool nan_canonical) {
  run_everywhere(c, nan_canonical ? same_bits_nan_canonical : bitwise_equal);
}

Case sce_case(bool backward, Tensor logits, Tensor labels, float dloss) {
  Case c;
  c.kind = backward ? OpKind::SoftmaxCrossEntropyBackward : OpKind::SoftmaxCrossEntropy;
  c.in.push_back(std::move(logits));
  c.in.push_back(std::move(labels));
  if (backward) c.in.push_back(scalar(dloss));
  return c;
}

// Class counts around 8, 16, 32 and 64 (partial vectors, partial 32-lane chunks) and wide rows.
const int64_t kClasses[] = {1,  2,  7,  8,  9,  15,  16,  17,  31,  32,  33,
                            47, 63, 64, 65, 97, 128, 255, 256, 257, 1000};

}  // namespace

TEST_CASE(
    "softmax_cross_entropy (+ backward) fast kernels are bitwise equal to the reference on wide and ragged "
    "rows") {
  std::mt19937 rng(2024);
  for (int64_t classes : kClasses) {
    for (int64_t batch : {int64_t{1}, int64_t{5}, int64_t{67}}) {
      for (int range = 0; range < 2; ++range) {
        // range 1: logits far apart, so many exp32 results underflow to subnormals or +0.
        const float lo = range == 0 ? -4.0f : -120.0f, hi = -lo;
        const Tensor z = random_tensor(Shape{batch, classes}, rng, /*specials=*/true, lo, hi);
        const Tensor y = random_labels(batch, classes, rng);
        for (bool backward : {false, true}) {
          CAPTURE(classes);
          CAPTURE(batch);
          check_all_paths(sce_case(backward, z, y, range == 0 ? 0.75f : -3.0f), false);
        }
      }
    }
  }
}

TEST_CASE(
    "softmax_cross_entropy (+ backward) fast kernels match the reference on zero maxima, ±inf and NaN") {
  std::mt19937 rng(99);
  for (int64_t classes : {int64_t{1}, int64_t{3}, int64_t{17}, int64_t{40}, int64_t{100}}) {
    // Each row is one special pattern; the rest of the row is negative so the special decides the max.
    const int kPatterns = 9;
    Tensor z = random_tensor(Shape{kPatterns, classes}, rng, true, -9.0f, -1.0f);
    auto at = [&](int row, int64_t j) -> float& { return z[row * classes + std::min(j, classes - 1)]; };
    at(0, 0) = -0.0f, at(0, classes / 2) = 0.0f;  // −0 first, then +0: the sequential max keeps −0
    at(1, 0) = 0.0f, at(1, classes - 1) = -0.0f;  // +0 first, then −0
    for (int64_t j = 0; j < classes; ++j) at(2, j) = (j % 2) ? 0.0f : -0.0f;  // all zeros
    at(3, classes / 3) = kInf;                               // +inf: inf − inf makes the row NaN
    for (int64_t j = 0; j < classes; ++j) at(4, j) = -kInf;  // −inf everywhere
    at(5, classes - 1) = 88.0f;                              // near exp32's overflow bound
    at(6, 0) = std::numeric_limits<float>::denorm_min();     // a subnormal maximum
    at(7, 0) = kNaN;                                         // NaN at z[0]: the sequential max is NaN
    at(8, classes - 1) = kNaN;                               // NaN later: skipped by the max, NaN through e
    const Tensor y = random_labels(kPatterns, classes, rng);
    for (bool backward : {false, true}) {
      CAPTURE(classes);
      check_all_paths(sce_case(backward, z, y, 1.0f), true);
    }
    // Without the NaN rows the comparison is exact, bit for bit.
    Tensor z7(Shape{7, classes}, std::span<const float>(z.data(), static_cast<size_t>(7 * classes)));
    Tensor y7(Shape{7}, std::span<const float>(y.data(), 7));
    for (bool backward : {false, true}) check_all_paths(sce_case(backward, z7, y7, 1.0f), false);
  }
}

TEST_CASE("softmax_cross_entropy (+ backward) fast kernels throw OpError for a bad label on any thread") {
  std::mt19937 rng(5);
  const int64_t batch = 300, classes = 70;
  const Tensor z = random_tensor(Shape{batch, classes}, rng, false, -4.0f, 4.0f);
  for (float bad : {-1.0f, 70.0f, 2.5f, kNaN}) {
    for (int64_t row : {int64_t{0}, int64_t{150}, batch - 1}) {  // the first, a middle and the last range
      Tensor y = random_labels(batch, classes, rng);
      y[row] = bad;
      for (bool backward : {false, true}) {
        const Case c = sce_case(backward, z, y, 1.0f);
        CHECK_THROWS_AS(run_case(c, nullptr), OpError);
        for (SimdPath path : available_simd_paths()) {
          const ScopedSimdPath forced(path);
          for (int threads : {1, 2, 3}) {
            INFO(simd_path_name(path)
                 << ", " << threads << " threads, bad label " << bad << " at row " << row);
            CHECK_THROWS_AS(run_case(c, &pool(threads)), OpError);
          }
        }
      }
    }
  }
}

TEST_CASE("sum_rows fast kernel is bitwise equal to the reference on many columns and ragged blocks") {
  std::mt19937 rng(31);
  for (int64_t n : {1, 7, 15, 16, 17, 33, 100, 127, 128, 129, 255, 300, 513, 1031}) {
    for (int64_t m : {1, 2, 31, 32, 33, 100, 517}) {
      Case c;
      c.kind = OpKind::SumRows;
      c.in.push_back(random_tensor(Shape{m, n}, rng, /*specials=*/true, -3.0f, 3.0f));
      CAPTURE(m);
      CAPTURE(n);
      check_all_paths(c, false);
    }
  }
  // ±inf (an inf + −inf column becomes the one default NaN on every path) and cancelling magnitudes.
  Case c;
  c.kind = OpKind::SumRows;
  Tensor x = random_tensor(Shape{97, 141}, rng, true, -1.0f, 1.0f);
  for (int64_t i = 0; i < 97; ++i) x[i * 141 + 5] = (i % 2 ? 1.0f : -1.0f) * 3.0e38f;
  x[3 * 141 + 20] = kInf;
  x[4 * 141 + 21] = -kInf, x[60 * 141 + 21] = kInf;
  c.in.push_back(std::move(x));
  check_all_paths(c, false);
}
