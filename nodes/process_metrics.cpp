#include "nodes/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/job.h"

#ifndef TRIBUNAL_VERSION
#define TRIBUNAL_VERSION "unknown"
#endif

namespace tribunal::nodes {

namespace {

// /proc/self/statm: size and resident, in pages (proc(5)).
double statm_bytes(int field) {
  std::ifstream in("/proc/self/statm");
  double pages[2] = {NAN, NAN};
  if (!(in >> pages[0] >> pages[1])) return NAN;
  return pages[field] * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double open_fds() {
  std::error_code ec;
  double n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  // The directory's own descriptor, open while it is listed, is not one of the process's.
  return ec ? NAN : n - 1;
}

double max_fds() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return NAN;
  return static_cast<double>(r.rlim_cur);
}

// Field 22 of /proc/self/stat (clock ticks after boot) plus the boot time, btime of /proc/stat.
double start_time_seconds() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return NAN;
  const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return NAN;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  double ticks = NAN;
  for (int i = 3; i <= 22 && fields >> f; ++i)
    if (i == 22) ticks = std::stod(f);
  std::ifstream proc_stat("/proc/stat");
  double btime = NAN;
  while (std::getline(proc_stat, line))
    if (line.rfind("btime ", 0) == 0) btime = std::stod(line.substr(6));
  return btime + ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace

void add_process_metrics(MetricsRegistry& metrics) {
  metrics.gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                [] { return statm_bytes(1); });
  metrics.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                [] { return statm_bytes(0); });
  metrics.gauge("process_open_fds", "Number of open file descriptors.", open_fds);
  metrics.gauge("process_max_fds", "Maximum number of open file descriptors.", max_fds);
  const double start = start_time_seconds();  // fixed for the process: read once
  metrics.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                [start] { return start; });
  metrics.gauge("tribunal_build_info",
                "The node's release and RepOps numerics contract version (docs/numerics.md); always 1.",
                [] { return 1.0; },
                {{"version", TRIBUNAL_VERSION}, {"contract", std::to_string(kRepOpsContractVersion)}});
}

}  // namespace tribunal::nodes
