// Internal to ops/float64: this library's own binary64 exponential, for the float64 kernels whose
// value must not depend on the C library (docs/numerics.md "Rounding-log mode", GELU).
//
// Why not std::exp: libm's last bit differs between builds (glibc picks __exp_fma or __exp_sse2 on
// x86-64 at load time; arm64 has its own), and a formula that cancels (GELU's 1 + tanh u for u ≪ 0)
// turns that bit into a difference of many float32 spacings, beyond what τ allows two honest parties.
// This one is a fixed sequence of IEEE-754 multiplications and additions (no fma; the project builds
// with -ffp-contract=off), the same bits on every machine and on each SIMD path.
#pragma once

#include <cstddef>

namespace tribunal::f64 {

/// e^x in binary64, within 2 ulps of the exact value for every finite x (tests/ops/test_float64.cpp
/// holds it to std::exp and to long double). +inf for x > 709.78, +0 below −745.13 (subnormal results
/// in between), NaN for NaN. Cody–Waite reduction x = n·ln 2 + r, |r| ≤ ln 2 / 2, with ln 2 in two
/// parts (the high one has 11 trailing zero bits, so n·ln2_hi is exact), then e^r by its Taylor
/// polynomial of degree 13 (remainder < 2^-60), scaled by 2^n in two exact steps (Muller, "Elementary
/// Functions", 3rd ed., §11.3).
double exp(double x);

/// y[i] = exp(x[i]) for i < n, four lanes at a time where the SIMD path is AVX2 or wider (ops/simd.h):
/// the same operations lane by lane, so the same bits as the scalar exp. x and y may be the same array.
void exp(const double* x, double* y, size_t n);

}  // namespace tribunal::f64
