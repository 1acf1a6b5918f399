#include "net/error.h"

#include <cstdio>
#include <mutex>

namespace tribunal {

namespace {

std::mutex& sink_mutex() {
  static std::mutex mutex;
  return mutex;
}

NetLogSink& sink() {
  static NetLogSink current;
  return current;
}

}  // namespace

void set_net_log_sink(NetLogSink new_sink) {
  std::lock_guard lock(sink_mutex());
  sink() = std::move(new_sink);
}

void net_log(std::string_view line) noexcept {
  // One lock around the write keeps lines from different I/O threads whole.
  std::lock_guard lock(sink_mutex());
  try {
    if (sink()) {
      sink()(line);
      return;
    }
  } catch (...) {
    // A failing sink must not take an I/O handler down; fall back to stderr for this line.
  }
  std::fprintf(stderr, "[net] %.*s\n", static_cast<int>(line.size()), line.data());
}

}  // namespace tribunal
