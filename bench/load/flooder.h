// bench_load's flooder: abusive peers of the referee during the abuse phase — silent connections
// past the per-address limit, oversized frames (> 1 MiB), junk frames, and frames trickled byte by
// byte — counting how the referee refuses and closes them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/context.h"
#include "net/session.h"

namespace tribunal::load_bench {

/// What the flooder did and saw; the counters are atomic, mu guards the rest. Setting `stop` ends
/// the flooding threads (join `threads` then).
struct Abuse {
  std::atomic<uint64_t> silent_open{0}, silent_refused{0}, silent_other{0}, silent_closed_by_referee{0};
  std::atomic<uint64_t> big_sent{0}, big_closed{0};
  std::atomic<uint64_t> junk_connections{0}, junk_frames{0}, junk_closed{0};
  std::atomic<uint64_t> trickle_started{0}, trickle_closed{0};
  std::mutex mu;
  std::vector<std::shared_ptr<Session>> held;
  std::map<std::string, uint64_t> close_codes;  // what the referee closed abusive sessions with
  std::vector<double> trickle_close_seconds;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;

  /// Counts a session of kind `what` ("silent", "oversized", "junk") closed with `info`'s code.
  void note_close(const std::string& what, const CloseInfo& info) {
    std::lock_guard lock(mu);
    ++close_codes[what + " " + std::to_string(static_cast<unsigned>(info.code))];
  }
};

/// Starts the flood against the referee at `url` (`port` on 127.0.0.1): `silent_count` silent
/// connections from 127.0.0.200, then threads sending oversized frames (127.0.0.201), junk frames
/// (127.0.0.202) and 20 tricklers (127.0.0.203), until `abuse.stop`. `ctx` must be running; `abuse`
/// and `ctx` must outlive the flood.
void start_abuse(NetContext& ctx, const std::string& url, uint16_t port, size_t silent_count, Abuse& abuse);

}  // namespace tribunal::load_bench
