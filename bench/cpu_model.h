// The machine a benchmark ran on, for its JSON: figures from different CPUs are not comparable.
#pragma once

#include <fstream>
#include <string>

namespace tribunal::bench {

/// The first "model name" of /proc/cpuinfo (e.g. "AMD EPYC 9R45"); "" where there is none (not Linux,
/// or an arm64 kernel that does not name the model).
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "";
}

}  // namespace tribunal::bench
