// How the nodes report: a spdlog logger per node (Debian libspdlog-dev), with levels — info for
// lifecycle, warn for refused peers and frames, error for failures, debug for per-round and per-frame
// detail — written to stderr as text or JSON lines (docs/running.md, "Logs"), or handed line by line to
// a test, a scenario or the demo.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace tribunal::nodes {

/// One log message (no newline, no timestamp or level), as a line_logger hands it on; called from any
/// thread, one call at a time per logger.
using LogFn = std::function<void(const std::string&)>;

/// A node's logger (thread-safe). Never null: quiet_logger() drops everything.
using Logger = std::shared_ptr<spdlog::logger>;

/// How stderr_logger writes a line.
enum class LogFormat {
  Text,  ///< `2026-11-26T03:04:05.678Z info [referee] message`
  /// `{"time":"2026-11-26T03:04:05.678Z","level":"info","node":"referee","dispute":"…","job":"…","message":"..."}`
  /// (dispute and job: the thread's LogKeys, when set)
  Json,
};

/// What a log line is about: a dispute and a job (64 lowercase hex digits each, or empty). A JSON line
/// carries them as the fields `dispute` and `job` (absent when empty), so a log system can select one
/// dispute's or job's lines without parsing messages; a text line's message names them already.
struct LogKeys {
  std::string dispute;
  std::string job;
};

/// Sets the LogKeys of the lines the current thread logs while it lives (loggers here are synchronous:
/// the line is formatted on the logging thread), restoring the previous keys at its end. Nest freely.
class LogScope {
 public:
  explicit LogScope(LogKeys keys);
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  LogKeys saved_;
};

/// The current thread's LogKeys (empty outside any LogScope).
const LogKeys& current_log_keys();

/// The formatter of `format`: UTC timestamps (ISO 8601, milliseconds); JSON strings escaped per RFC 8259
/// (quote, backslash and control characters; other bytes as they are).
std::unique_ptr<spdlog::formatter> log_formatter(LogFormat format);

/// A logger named `node` writing each message at `level` or above to stderr in `format`, flushed at
/// once (scripts read a node's "listening on" line while it runs).
Logger stderr_logger(const std::string& node, LogFormat format = LogFormat::Text,
                     spdlog::level::level_enum level = spdlog::level::info);

/// A logger named `node` handing each message at `level` or above, its text only, to `line`.
Logger line_logger(const std::string& node, LogFn line,
                   spdlog::level::level_enum level = spdlog::level::info);

/// A logger that drops everything.
Logger quiet_logger(const std::string& node = "quiet");

}  // namespace tribunal::nodes
