#include "bench/load/referee_process.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>

#include "bench/load/load.h"
#include "net/error.h"
#include "nodes/heap_reuse.h"
#include "nodes/referee_node.h"

namespace tribunal::load_bench {
namespace {

// What the referee's transport logged (one line per refusal and per session end).
struct ChildStats {
  std::atomic<uint64_t> finished{0};
  std::atomic<uint64_t> refused_429{0}, refused_503{0}, unanswered{0};
  std::atomic<uint64_t> no_message{0}, too_slow{0}, handshake_failed{0};
  std::mutex mu;
  std::map<std::string, uint64_t> closes;  // "closed 1009 (message too big) by us" → count
};

[[noreturn]] void run_referee(const KeyPair& key, int threads, int port_fd, bool verbose,
                              uint64_t opening_memory) {
  static ChildStats stats;
  static bool log_lines = verbose;
  set_net_log_sink([](std::string_view line) {
    if (log_lines) std::fprintf(stderr, "referee [net] %.*s\n", static_cast<int>(line.size()), line.data());
    auto has = [&](std::string_view s) { return line.find(s) != std::string_view::npos; };
    if (has("(HTTP 429)")) ++stats.refused_429;
    if (has("(HTTP 503)")) ++stats.refused_503;
    if (has("unanswered")) ++stats.unanswered;
    if (const size_t at = line.find(": closed "); at != std::string_view::npos) {
      const std::string_view rest = line.substr(at + 9);
      std::string what(rest.substr(0, rest.find(' ')));  // the close code, and who closed first
      what += rest.find(" by us") != std::string_view::npos     ? " by us"
              : rest.find(" by peer") != std::string_view::npos ? " by peer"
                                                                : "";
      std::lock_guard lock(stats.mu);
      ++stats.closes[what];
    }
    if (has("no message within")) ++stats.no_message;
    if (has("message not complete")) ++stats.too_slow;
    if (has("handshake failed")) ++stats.handshake_failed;
  });
  double cpu = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  std::mutex cpu_mu;
  {
    nodes::keep_freed_buffers();  // as `tribunal referee` does
    NetContext ctx(threads, /*handle_signals=*/true);
    ctx.set_shutdown_grace(std::chrono::milliseconds(2000));
    nodes::RefereeNodeOptions options;
    options.max_disputes_per_client = options.max_live_disputes;  // every dispute comes from loopback
    options.opening_memory = opening_memory;
    // The disputes' clients spread over kClientAddresses addresses; the flooder's silent connections
    // come from one address of their own and meet the per-address limit.
    options.max_connections_per_address = kMaxConnectionsPerAddress;
    nodes::RefereeNode node(ctx, key, options,
                            verbose ? nodes::stderr_logger("referee") : nodes::quiet_logger("referee"),
                            nodes::loopback_policy());
    node.on_finished = [&](const RefereeDispute&, const nodes::DisputeStats& s) {
      ++stats.finished;
      std::lock_guard lock(cpu_mu);
      cpu += s.cpu_seconds;
      bytes_in += s.bytes_in;
      bytes_out += s.bytes_out;
    };
    const uint16_t port = node.listen("127.0.0.1", 0);
    if (write(port_fd, &port, sizeof port) != sizeof port) _exit(2);
    ctx.run();  // until SIGTERM
  }
  const nlohmann::json out = {{"finished", stats.finished.load()},
                              {"dispute_cpu_seconds", cpu},
                              {"dispute_bytes_in", bytes_in},
                              {"dispute_bytes_out", bytes_out},
                              {"refused_429", stats.refused_429.load()},
                              {"refused_503", stats.refused_503.load()},
                              {"refused_unanswered_bursts", stats.unanswered.load()},
                              {"session_ends", stats.closes},
                              {"closed_no_first_message", stats.no_message.load()},
                              {"closed_message_too_slow", stats.too_slow.load()},
                              {"handshakes_failed", stats.handshake_failed.load()}};
  const std::string text = out.dump();
  if (write(port_fd, text.data(), text.size()) < 0) _exit(3);
  _exit(0);
}

}  // namespace

RefereeProcess::RefereeProcess(const KeyPair& key, int threads, bool verbose, int cpu,
                               uint64_t opening_memory) {
  int pipe_fd[2];
  if (pipe(pipe_fd) != 0) throw std::runtime_error("cannot make a pipe for the referee");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("cannot fork the referee");
  if (pid_ == 0) {
    close(pipe_fd[0]);
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(4);
    }
    run_referee(key, threads, pipe_fd[1], verbose, opening_memory);
  }
  close(pipe_fd[1]);
  report_fd_ = pipe_fd[0];
  if (read(report_fd_, &port_, sizeof port_) != sizeof port_)
    throw std::runtime_error("the referee did not start");
}

nlohmann::json RefereeProcess::stop() {
  kill(pid_, SIGTERM);
  std::string child_text;
  char buf[4096];
  for (ssize_t k; (k = read(report_fd_, buf, sizeof buf)) > 0;)
    child_text.append(buf, static_cast<size_t>(k));
  int status = 0;
  waitpid(pid_, &status, 0);
  close(report_fd_);
  try {
    return nlohmann::json::parse(child_text);
  } catch (const std::exception&) {
    return "no report (exit status " + std::to_string(status) + ")";
  }
}

}  // namespace tribunal::load_bench
