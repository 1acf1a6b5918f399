// The per-element formulas of Unary and UnaryBackward (docs/numerics.md "Elementwise functions"), shared by
// the CPU kernels (ops/kernels/unary.cpp) and the CUDA kernels (ops/cuda/kernels/unary.cuh): one
// definition, so every backend executes the same operation sequence. Every function is ops/math.h's own
// (never libm's or CUDA's intrinsics), so the bits are equal everywhere. TRIBUNAL_HD: host and device.
#pragma once

#include <cstdint>

#include "ops/math.h"
#include "ops/portable.h"

namespace tribunal {

/// The function codes of Unary (ints[0]): y = f(x) elementwise.
enum class UnaryFn : int64_t {
  Neg = 0,         ///< −x
  Reciprocal = 1,  ///< 1/x
  Sqrt = 2,        ///< sqrt32(x), correctly rounded
  Exp = 3,         ///< exp32(x)
  Log = 4,         ///< log32(x)
  Tanh = 5,        ///< tanh32(x)
  Erf = 6,         ///< erf32(x)
  Sigmoid = 7,     ///< sigmoid32(x)
  Sin = 8,         ///< sin32(x)
  Cos = 9,         ///< cos32(x)
  Pow = 10,        ///< pow32(x, p), p = floats[0]
};
inline constexpr int64_t kUnaryFnCount = 11;

inline constexpr float kTwoOverSqrtPi = 1.12837922573089599609375f;  // 2/√π rounded to float

/// y = f(x) for function code `fn` (0 ≤ fn < kUnaryFnCount; anything else gives NaN) and exponent `p`.
TRIBUNAL_HD float unary32(int64_t fn, float x, float p) {
  switch (fn) {
    case 0:
      return -x;
    case 1:
      return 1.0f / x;
    case 2:
      return sqrt32(x);
    case 3:
      return exp32(x);
    case 4:
      return log32(x);
    case 5:
      return tanh32(x);
    case 6:
      return erf32(x);
    case 7:
      return sigmoid32(x);
    case 8:
      return sin32(x);
    case 9:
      return cos32(x);
    case 10:
      return pow32(x, p);
    default:
      return NAN;
  }
}

/// dx = dy·f'(x) for function code `fn`, given x, the forward output y = unary32(fn, x, p) and dy. The
/// order of each (docs/numerics.md "Elementwise functions"):
///   neg −dy;  reciprocal dy·(−(y·y));  sqrt (dy·0.5)/y;  exp dy·y;  log dy/x;  tanh dy·fma(−y, y, 1);
///   erf dy·(c·exp32(−(x·x))), c = 2/√π rounded to float;  sigmoid dy·(y·(1 − y));  sin dy·cos32(x);
///   cos dy·(−sin32(x));  pow: p = 0 → dy·0, else dy·(p·pow32(x, p − 1)).
TRIBUNAL_HD float unary_grad32(int64_t fn, float x, float y, float dy, float p) {
  switch (fn) {
    case 0:
      return -dy;
    case 1:
      return dy * -(y * y);
    case 2:
      return (dy * 0.5f) / y;
    case 3:
      return dy * y;
    case 4:
      return dy / x;
    case 5:
      return dy * fma32(-y, y, 1.0f);
    case 6:
      return dy * (kTwoOverSqrtPi * exp32(-(x * x)));
    case 7:
      return dy * (y * (1.0f - y));
    case 8:
      return dy * cos32(x);
    case 9:
      return dy * -sin32(x);
    case 10:
      return p == 0.0f ? dy * 0.0f : dy * (p * pow32(x, p - 1.0f));
    default:
      return NAN;
  }
}

}  // namespace tribunal
