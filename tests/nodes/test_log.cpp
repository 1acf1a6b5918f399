// The nodes' logs (nodes/log.h, docs/running.md "Logs"): the JSON lines parse back to the message that
// was logged, whatever it holds; the text lines carry a UTC timestamp, the level and the node; a
// line_logger hands on the message alone, at its level or above.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "nodes/log.h"

using namespace tribunal::nodes;

namespace {

// The lines `format` writes for the messages logged by `write` (at info and above, named "referee").
std::vector<std::string> written(LogFormat format, const std::function<void(spdlog::logger&)>& write) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  sink->set_formatter(log_formatter(format));
  spdlog::logger logger("referee", sink);
  write(logger);
  std::vector<std::string> lines;
  std::istringstream in(out.str());
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("log: a JSON line per message with time, level, node and the message escaped") {
  const std::string tricky = "refused \"peer\" at C:\\path\nsecond line\ttab \x01 → done";
  const std::vector<std::string> lines = written(LogFormat::Json, [&](spdlog::logger& l) {
    l.warn(tricky);
    l.info("braces {} stay as they are");
  });
  REQUIRE(lines.size() == 2);  // the newline inside the message is escaped, not written
  const nlohmann::json first = nlohmann::json::parse(lines[0]);
  CHECK(first.size() == 4);
  CHECK(first.at("message") == tricky);
  CHECK(first.at("level") == "warning");
  CHECK(first.at("node") == "referee");
  CHECK(std::regex_match(first.at("time").get<std::string>(),
                         std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  CHECK(lines[0].find("\\\"peer\\\"") != std::string::npos);
  CHECK(lines[0].find("\\u0001") != std::string::npos);
  CHECK(nlohmann::json::parse(lines[1]).at("message") == "braces {} stay as they are");
  CHECK(nlohmann::json::parse(lines[1]).at("level") == "info");
}

TEST_CASE("log: a text line per message: UTC timestamp, level, node, message") {
  const std::vector<std::string> lines =
      written(LogFormat::Text, [](spdlog::logger& l) { l.error("referee: store failed"); });
  REQUIRE(lines.size() == 1);
  CHECK(std::regex_match(lines[0], std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z error \[referee\] )"
                                              R"(referee: store failed)")));
}

TEST_CASE("log: a line logger hands on the message alone, at its level or above; a quiet one drops all") {
  std::vector<std::string> got;
  const Logger log = line_logger(
      "provider", [&](const std::string& l) { got.push_back(l); }, spdlog::level::info);
  log->debug("per-frame detail");
  log->info("provider: training job 1");
  log->warn("provider: refused a frame");
  CHECK(got == std::vector<std::string>{"provider: training job 1", "provider: refused a frame"});
  CHECK(log->name() == "provider");

  got.clear();
  line_logger("provider", [&](const std::string& l) {
    got.push_back(l);
  })->debug("detail");  // debug by default
  CHECK(got == std::vector<std::string>{"detail"});

  const Logger quiet = quiet_logger();
  CHECK_FALSE(quiet->should_log(spdlog::level::critical));
  CHECK(quiet->sinks().empty());
}
