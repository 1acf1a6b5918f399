// The nodes' logs (nodes/log.h, docs/running.md "Logs"): the JSON lines parse back to the message that
// was logged, whatever it holds; the text lines carry a UTC timestamp, the level and the node; a
// line_logger hands on the message alone, at its level or above.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>

#include "nodes/log.h"
#include "referee/report.h"

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

TEST_CASE("log: a LogScope keys the JSON lines of its thread by dispute and job, nested and restored") {
  const std::string d(64, 'd'), j(64, 'a'), j2(64, 'b');
  std::string other_thread_keys = "unset";
  const std::vector<std::string> lines = written(LogFormat::Json, [&](spdlog::logger& l) {
    l.info("before");
    {
      const LogScope job({"", j});
      l.info("job only");
      {
        const LogScope both({d, j2});
        l.info("both");
        std::thread([&] { other_thread_keys = current_log_keys().dispute + current_log_keys().job; }).join();
      }
      l.info("job again");
    }
    l.info("after");
  });
  REQUIRE(lines.size() == 5);
  std::vector<nlohmann::json> p;
  for (const auto& line : lines) p.push_back(nlohmann::json::parse(line));
  CHECK(!p[0].contains("dispute"));
  CHECK(!p[0].contains("job"));
  CHECK(!p[1].contains("dispute"));
  CHECK(p[1].at("job") == j);
  CHECK(p[2].at("dispute") == d);
  CHECK(p[2].at("job") == j2);
  CHECK(p[2].at("message") == "both");
  CHECK(p[3].at("job") == j);
  CHECK(!p[3].contains("dispute"));
  CHECK(p[4].size() == 4);
  CHECK(other_thread_keys.empty());  // the keys are the logging thread's own
  // Text lines are unchanged: their messages name the ids.
  const std::vector<std::string> text = written(LogFormat::Text, [&](spdlog::logger& l) {
    const LogScope both({d, j});
    l.info("referee: dispute dddd round 1: x");
  });
  REQUIRE(text.size() == 1);
  CHECK(text[0].ends_with(" info [referee] referee: dispute dddd round 1: x"));
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
  const Logger log = line_logger("provider", [&](const std::string& l) { got.push_back(l); });  // info
  log->debug("per-frame detail");
  log->info("provider: training job 1");
  log->warn("provider: refused a frame");
  CHECK(got == std::vector<std::string>{"provider: training job 1", "provider: refused a frame"});
  CHECK(log->name() == "provider");

  got.clear();
  const Logger detailed = line_logger(
      "provider", [&](const std::string& l) { got.push_back(l); }, spdlog::level::debug);
  detailed->debug("detail");
  detailed->trace("finer");
  CHECK(got == std::vector<std::string>{"detail"});

  const Logger quiet = quiet_logger();
  CHECK_FALSE(quiet->should_log(spdlog::level::critical));
  CHECK(quiet->sinks().empty());
}

TEST_CASE("log: tribunal report reads a referee's rounds from its JSON log as from its text log") {
  std::vector<std::string> messages;
  const std::vector<std::string> json = written(LogFormat::Json, [&](spdlog::logger& l) {
    for (const char* m :
         {"referee: listening on 127.0.0.1:7000",
          "referee: dispute 35a96603f6cc round 1: level 1: open the children of leaves [0, 5)",
          "referee: dispute 35a96603f6cc round 9: level 2: step 12 is the first \"whose\" next "
          "state differs"}) {
      l.info(m);
      messages.emplace_back(m);
    }
  });
  std::string json_log, text_log;
  for (const std::string& line : json) json_log += line + "\n";
  for (const std::string& m : messages) text_log += m + "\n";
  std::istringstream from_json(json_log), from_text(text_log);
  const std::vector<tribunal::DisputeEvent> a = tribunal::parse_dispute_log(from_json),
                                            b = tribunal::parse_dispute_log(from_text);
  REQUIRE(a.size() == 2);
  REQUIRE(b.size() == 2);
  CHECK(a[1].round == 9);
  CHECK(a[1].text == "level 2: step 12 is the first \"whose\" next state differs");
  CHECK(a[1].phase == tribunal::Phase::Steps);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(a[i].round == b[i].round);
    CHECK(a[i].text == b[i].text);
  }
}
