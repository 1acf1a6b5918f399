// bench_load's referee under test: the real nodes::RefereeNode on its own NetContext, in a child
// process, so that its memory and CPU can be read from /proc apart from everyone else's.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include <nlohmann/json.hpp>

#include "protocol/envelope.h"

namespace tribunal::load_bench {

/// A forked referee process listening on 127.0.0.1 (any free port), with `threads` I/O threads, the
/// loopback address policy and as many disputes per client as live disputes (every client is on
/// loopback). Its transport's log lines are counted (refusals, session ends by close code, timeouts)
/// and, with `verbose`, printed on stderr with its own log.
class RefereeProcess {
 public:
  /// Forks the referee and waits until it listens. Must run before this process starts any thread
  /// (fork copies only the calling one). With `cpu` ≥ 0 the referee (every thread it starts) runs
  /// on that CPU only (sched_setaffinity). `opening_memory`: the referee's budget of opened bytes in
  /// flight (nodes::RefereeNodeOptions::opening_memory). Throws std::runtime_error if it cannot be started.
  RefereeProcess(const KeyPair& key, int threads, bool verbose, int cpu, uint64_t opening_memory);
  RefereeProcess(const RefereeProcess&) = delete;
  RefereeProcess& operator=(const RefereeProcess&) = delete;

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  /// Stops the referee (SIGTERM: a graceful shutdown), waits for it and returns its report: disputes
  /// finished, their CPU seconds, refusals, session ends and timeouts (JSON); a string saying why when
  /// it gave none.
  nlohmann::json stop();

 private:
  pid_t pid_ = -1;
  int report_fd_ = -1;  // the pipe: the port first, the report at exit
  uint16_t port_ = 0;
};

}  // namespace tribunal::load_bench
