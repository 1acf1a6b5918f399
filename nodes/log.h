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
  Json,  ///< `{"time":"2026-11-26T03:04:05.678Z","level":"info","node":"referee","message":"..."}`
};

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
