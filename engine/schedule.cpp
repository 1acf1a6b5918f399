#include "engine/schedule.h"

#include "engine/job.h"

namespace tribunal {
namespace {

constexpr double kPi = 3.141592653589793;  // the binary64 nearest to π

// (−1)^k / n!, rounded once to binary64 (n! < 2^63 for n ≤ 20 is an exact integer; its conversion
// and the division are correctly rounded at compile time: fixed constants).
constexpr double taylor_coefficient(int n, int k) {
  int64_t f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return (k % 2 == 0 ? 1.0 : -1.0) / static_cast<double>(f);
}

// cos(r) for |r| ≤ π/4: Σ_{k=0..9} (−1)^k z^k/(2k)!, z = r², Horner from k = 9 down.
double cos_poly(double r) {
  const double z = r * r;
  double p = taylor_coefficient(18, 9);
  for (int k = 8; k >= 0; --k) p = p * z + taylor_coefficient(2 * k, k);
  return p;
}

// sin(r) for |r| ≤ π/4: r · Σ_{k=0..9} (−1)^k z^k/(2k+1)!, Horner from k = 9 down.
double sin_poly(double r) {
  const double z = r * r;
  double p = taylor_coefficient(19, 9);
  for (int k = 8; k >= 0; --k) p = p * z + taylor_coefficient(2 * k + 1, k);
  return r * p;
}

}  // namespace

double portable_cospi(double x) {
  if (!(x > 0.0)) x = 0.0;  // also maps NaN to 0
  if (x > 1.0) x = 1.0;
  double sign = 1.0;
  if (x > 0.5) {  // cos(π·x) = −cos(π·(1 − x)); 1 − x is exact for x ∈ [1/2, 1]
    x = 1.0 - x;
    sign = -1.0;
  }
  const double c = x <= 0.25 ? cos_poly(kPi * x) : sin_poly(kPi * (0.5 - x));  // 0.5 − x exact on [1/4, 1/2]
  return sign * c;
}

float learning_rate(const JobSpec& job, int64_t t) {
  const OptimizerSpec& o = job.optimizer;
  if (o.schedule == LrSchedule::Constant) return o.lr;
  const double lr = o.lr, min_lr = o.min_lr;
  const int64_t warmup = o.warmup_steps;
  if (t < warmup) return static_cast<float>(lr * static_cast<double>(t + 1) / static_cast<double>(warmup));
  const int64_t span = job.steps - warmup;
  if (span <= 0) return static_cast<float>(min_lr);
  const double progress = static_cast<double>(t - warmup) / static_cast<double>(span);
  if (progress >= 1.0) return static_cast<float>(min_lr);
  return static_cast<float>(min_lr + 0.5 * (lr - min_lr) * (1.0 + portable_cospi(progress)));
}

}  // namespace tribunal
