#include "bench/load/proc_sample.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace tribunal::load_bench {

ProcSample sample_proc(pid_t pid) {
  ProcSample s;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::stoull(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_kib = std::stoull(line.substr(6));
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t close = text.rfind(')');
  if (close != std::string::npos) {
    std::istringstream fields(text.substr(close + 2));
    std::string f;
    uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> f; ++i) {
      if (i == 10) s.minor_faults = std::stoull(f);
      if (i == 14) utime = std::stoull(f);
      if (i == 15) stime = std::stoull(f);
    }
    s.cpu_seconds = static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
  }
  return s;
}

double runqueue_wait_seconds(pid_t pid) {
  uint64_t wait_ns = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::ifstream in(task.path() / "schedstat");
    uint64_t run_ns = 0, waited_ns = 0;
    if (in >> run_ns >> waited_ns) wait_ns += waited_ns;
  }
  return static_cast<double>(wait_ns) * 1e-9;
}

PeakRss::PeakRss(pid_t pid)
    : thread_([this, pid] {
        while (sampling_) {
          const ProcSample s = sample_proc(pid);
          uint64_t p = peak_;
          while (s.rss_kib > p && !peak_.compare_exchange_weak(p, s.rss_kib)) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }) {}

PeakRss::~PeakRss() {
  stop();
}

void PeakRss::stop() {
  sampling_ = false;
  if (thread_.joinable()) thread_.join();
}

}  // namespace tribunal::load_bench
