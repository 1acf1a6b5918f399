#include "nodes/log.h"

#include <ctime>
#include <mutex>
#include <utility>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace tribunal::nodes {
namespace {

thread_local LogKeys tls_keys;

// `s` as the inside of a JSON string (RFC 8259, section 7).
void append_escaped(spdlog::string_view_t s, spdlog::memory_buf_t& out) {
  for (const char c : s) {
    switch (c) {
      case '"':
        out.append(std::string_view("\\\""));
        break;
      case '\\':
        out.append(std::string_view("\\\\"));
        break;
      case '\n':
        out.append(std::string_view("\\n"));
        break;
      case '\r':
        out.append(std::string_view("\\r"));
        break;
      case '\t':
        out.append(std::string_view("\\t"));
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
        else
          out.push_back(c);
    }
  }
}

// One JSON object per line: time (ISO 8601 UTC, milliseconds), level, node (the logger's name), dispute
// and job (the thread's LogKeys, when set), message.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& out) override {
    const auto since = msg.time.time_since_epoch();
    const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since).count();
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since).count() % 1000;
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    fmt::format_to(
        std::back_inserter(out), "{{\"time\":\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z\",\"level\":\"",
        utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
    append_escaped(spdlog::level::to_string_view(msg.level), out);
    out.append(std::string_view("\",\"node\":\""));
    append_escaped(msg.logger_name, out);
    const LogKeys& keys = current_log_keys();
    if (!keys.dispute.empty()) {
      out.append(std::string_view("\",\"dispute\":\""));
      append_escaped(keys.dispute, out);
    }
    if (!keys.job.empty()) {
      out.append(std::string_view("\",\"job\":\""));
      append_escaped(keys.job, out);
    }
    out.append(std::string_view("\",\"message\":\""));
    append_escaped(msg.payload, out);
    out.append(std::string_view("\"}\n"));
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

// Hands each message's text to a LogFn, one call at a time.
class LineSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit LineSink(LogFn line) : line_(std::move(line)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    line_(std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

 private:
  LogFn line_;
};

}  // namespace

LogScope::LogScope(LogKeys keys) : saved_(std::exchange(tls_keys, std::move(keys))) {}

LogScope::~LogScope() {
  tls_keys = std::move(saved_);
}

const LogKeys& current_log_keys() {
  return tls_keys;
}

std::unique_ptr<spdlog::formatter> log_formatter(LogFormat format) {
  if (format == LogFormat::Json) return std::make_unique<JsonFormatter>();
  return std::make_unique<spdlog::pattern_formatter>("%Y-%m-%dT%H:%M:%S.%eZ %l [%n] %v",
                                                     spdlog::pattern_time_type::utc);
}

Logger stderr_logger(const std::string& node, LogFormat format, spdlog::level::level_enum level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_formatter(log_formatter(format));
  auto logger = std::make_shared<spdlog::logger>(node, std::move(sink));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  return logger;
}

Logger line_logger(const std::string& node, LogFn line, spdlog::level::level_enum level) {
  if (!line) return quiet_logger(node);
  auto logger = std::make_shared<spdlog::logger>(node, std::make_shared<LineSink>(std::move(line)));
  logger->set_level(level);
  return logger;
}

Logger quiet_logger(const std::string& node) {
  auto logger = std::make_shared<spdlog::logger>(node);  // no sink
  logger->set_level(spdlog::level::off);
  return logger;
}

}  // namespace tribunal::nodes
