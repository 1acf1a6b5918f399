// Small helpers the benchmarks share: the median of timings and the machine's load average.
#pragma once

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

namespace tribunal::bench {

/// The median of `v` (the mean of the two middle values for an even count); v must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The first three fields of /proc/loadavg (1, 5, 15 minutes), "" where unreadable.
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : "";
}

}  // namespace tribunal::bench
