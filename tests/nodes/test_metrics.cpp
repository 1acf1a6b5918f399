// Monitoring (docs/running.md, "Monitoring"): the Prometheus text the registry renders, and /metrics
// and /healthz of the real referee and provider nodes scraped over loopback while disputes run: the
// counts match the verdicts the client got.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/job.h"

#include "nodes/http_routes.h"
#include "nodes/metrics.h"
#include "referee/report.h"
#include "tests/http_get.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using tribunal::testing::corrupt;
using tribunal::testing::Network;

namespace {

// The value of the sample `series` (name and labels exactly as rendered), or -1 when absent.
double sample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') return std::stod(text.substr(at + series.size() + 1));
    at += series.size();
  }
  return -1;
}

// What the exposition breaks of Prometheus' naming conventions
// (https://prometheus.io/docs/practices/naming/): each metric has HELP and TYPE; names are snake case;
// a counter's name ends in _total and nothing else's does; units are base units spelled out (seconds,
// bytes), never ms, milliseconds, kb or mb, and a unit is the name's last word (before _total: a
// counter's `_received_bytes_total`, never `_bytes_received_total`); no two names differ only by a
// plural s (`_step` and `_steps` say nothing of which is which); a histogram's samples are its
// _bucket, _sum and _count.
std::vector<std::string> convention_breaches(const std::string& text) {
  std::vector<std::string> out;
  std::map<std::string, std::string> types;
  std::set<std::string> helped;
  std::istringstream lines(text);
  std::string line;
  static const std::regex name_re("^[a-z_][a-z0-9_]*$");
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string hash, kind, name, type;
    if (line.starts_with("# HELP ")) {
      f >> hash >> kind >> name;
      helped.insert(name);
    } else if (line.starts_with("# TYPE ")) {
      f >> hash >> kind >> name >> type;
      types[name] = type;
      if (!std::regex_match(name, name_re)) out.push_back(name + ": not snake case");
      if ((type == "counter") != name.ends_with("_total")) out.push_back(name + ": _total iff a counter");
      for (const char* unit : {"_ms", "_millis", "_milliseconds", "_kb", "_mb", "_percent"})
        if (name.find(unit) != std::string::npos) out.push_back(name + ": not a base unit");
      const std::string stem = name.ends_with("_total") ? name.substr(0, name.size() - 6) : name;
      for (const std::string unit : {"_seconds", "_bytes"})
        if (const size_t at = stem.find(unit); at != std::string::npos && at + unit.size() != stem.size())
          out.push_back(name + ": its unit is not its last word");
      for (const std::string& other :
           {name + "s", name.ends_with("s") ? name.substr(0, name.size() - 1) : ""})
        if (types.count(other)) out.push_back(name + ": differs from " + other + " only by a plural s");
      if (!helped.count(name)) out.push_back(name + ": no HELP before TYPE");
    } else if (!line.empty() && line[0] != '#') {
      const std::string series = line.substr(0, line.find_first_of("{ "));
      std::string base = series;
      for (const char* suffix : {"_bucket", "_sum", "_count"})
        if (series.ends_with(suffix) && types.count(series.substr(0, series.size() - strlen(suffix))))
          base = series.substr(0, series.size() - strlen(suffix));
      if (!types.count(base))
        out.push_back(series + ": a sample without TYPE");
      else if (base != series && types[base] != "histogram")
        out.push_back(series + ": suffix of a non-histogram");
    }
  }
  return out;
}

// The value of the first sample of `name` whatever its labels, and its label text ("" when none).
std::pair<double, std::string> first_sample(const std::string& text, const std::string& name) {
  std::smatch m;
  const std::regex re("(^|\\n)" + name + "(\\{[^}]*\\})? ([^\\n]+)");
  if (!std::regex_search(text, m, re)) return {-1, ""};
  return {std::stod(m[3].str()), m[2].str()};
}

uint16_t port_of(const std::string& url) {  // "ws://127.0.0.1:PORT/"
  return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

}  // namespace

TEST_CASE("metrics: the naming check finds what breaks Prometheus' conventions") {
  MetricsRegistry m;
  m.counter("t_bytes_received_total", "Bytes, unit not last.");
  m.gauge("t_step", "Step now.", [] { return 0.0; });
  m.gauge("t_steps", "Steps of the job.", [] { return 0.0; });
  m.gauge("t_wait_ms", "Not a base unit.", [] { return 0.0; });
  m.gauge("t_sent_bytes", "Fine.", [] { return 0.0; });
  m.counter("t_received_bytes_total", "Fine.");
  CHECK(convention_breaches(m.render()) ==
        std::vector<std::string>{"t_bytes_received_total: its unit is not its last word",
                                 "t_steps: differs from t_step only by a plural s",
                                 "t_wait_ms: not a base unit"});
}

// The text is prometheus-cpp's TextSerializer: a histogram's count and sum come before its buckets.
TEST_CASE("metrics: counters, labelled series, gauges and histograms in the Prometheus text format") {
  MetricsRegistry m;
  Counter& a = m.counter("t_total", "Things.", {{"kind", "a"}});
  Counter& b = m.counter("t_total", "Things.", {{"kind", "q\"uote\\back\nline"}});
  Histogram& h = m.histogram("t_seconds", "Durations.", {0.1, 1});
  m.gauge("t_open", "Open now.", [] { return 3.0; });
  a.inc();
  a.inc(2.5);
  b.inc();
  h.observe(0.05);
  h.observe(0.1);  // le is inclusive
  h.observe(7);
  CHECK(m.render() ==
        "# HELP t_total Things.\n# TYPE t_total counter\n"
        "t_total{kind=\"a\"} 3.5\n"
        "t_total{kind=\"q\\\"uote\\\\back\\nline\"} 1\n"
        "# HELP t_seconds Durations.\n# TYPE t_seconds histogram\n"
        "t_seconds_count 3\nt_seconds_sum 7.15\n"
        "t_seconds_bucket{le=\"0.1\"} 2\nt_seconds_bucket{le=\"1\"} 2\nt_seconds_bucket{le=\"+Inf\"} 3\n"
        "# HELP t_open Open now.\n# TYPE t_open gauge\nt_open 3\n");
  CHECK_THROWS_AS(m.counter("bad name", "x"), std::invalid_argument);
  CHECK_THROWS_AS(m.gauge("t_total", "x", [] { return 0.0; }), std::invalid_argument);  // a counter already
  CHECK_THROWS_AS(m.histogram("t_bad_seconds", "x", {1, 0.5}), std::invalid_argument);
  CHECK_THROWS_AS(m.histogram("t_bad_seconds", "x", {1, 1}), std::invalid_argument);
}

TEST_CASE(
    "metrics: /metrics of the referee and the providers, scraped while disputes run, match the verdicts") {
  testing::TempDir store("metrics");
  RefereeNodeOptions options;
  options.data_dir = store.path;  // store commits are measured
  // Every live dispute of this short job is near its clock's end by this measure (its clocks are seconds).
  options.near_clock_end = std::chrono::hours(1);
  Network net(options);
  const uint16_t referee_port = port_of(net.referee_url);

  // A scrape from inside the first dispute (its strand, mid-game): one dispute open, none decided yet.
  std::atomic<bool> scraped{false};
  std::string during;
  net.referee.on_event = [&](const DisputeEvent& e) {
    if (e.phase == Phase::Steps && !scraped.exchange(true))
      during = testing::http_get(referee_port, "/metrics").body;
  };

  const std::string honest = net.provider(Fault{});
  const std::vector<std::string> cheaters = {net.provider(corrupt(3, 4)), net.provider(corrupt(20, 11))};
  std::map<std::string, int> verdicts;  // by reason
  std::vector<Verdict> decided;
  for (const std::string& cheater : cheaters) {
    const DelegateOutcome o = net.delegate({honest, cheater});
    REQUIRE(o.verdicts.size() == 1);
    decided.push_back(net.verify(o.verdicts[0]));
    ++verdicts[reason_name(decided.back().reason)];
  }
  CHECK(verdicts["wrong_output"] == 2);

  REQUIRE(scraped);
  CHECK(sample(during, "tribunal_referee_disputes_open") == 1);
  CHECK(sample(during, "tribunal_referee_disputes_opened_total") == 1);
  CHECK(sample(during, "tribunal_referee_disputes_decided_total{reason=\"wrong_output\"}") == 0);
  CHECK(sample(during, "tribunal_referee_disputes_near_clock_end") == 1);
  CHECK(during.find("# HELP tribunal_referee_disputes_near_clock_end Undecided disputes whose awaited party "
                    "has under 3600 seconds left") != std::string::npos);

  const testing::HttpReply reply = testing::http_get(referee_port, "/metrics");
  REQUIRE(reply.status == 200);
  CHECK(reply.headers.find("text/plain; version=0.0.4") != std::string::npos);
  const std::string& after = reply.body;
  CHECK(sample(after, "tribunal_referee_disputes_open") == 0);
  CHECK(sample(after, "tribunal_referee_disputes_opened_total") == 2);
  for (const char* reason : {"wrong_output", "inconsistent_input", "timeout", "bad_proof"})
    CHECK(sample(after, std::string("tribunal_referee_disputes_decided_total{reason=\"") + reason + "\"}") ==
          verdicts[reason]);
  CHECK(sample(after, "tribunal_referee_dispute_rounds_count") == 2);
  CHECK(sample(after, "tribunal_referee_dispute_rounds_sum") >= 2 * 4);
  CHECK(sample(after, "tribunal_referee_dispute_cpu_seconds_count") == 2);
  CHECK(sample(after, "tribunal_referee_received_bytes_total") > 0);
  CHECK(sample(after, "tribunal_referee_sent_bytes_total") > 0);
  // Every round but the verdict's asked both providers something they answered.
  CHECK(sample(after, "tribunal_referee_answer_latency_seconds_count") >= 2 * 4);
  CHECK(sample(after, "tribunal_referee_answer_latency_seconds_bucket{le=\"+Inf\"}") ==
        sample(after, "tribunal_referee_answer_latency_seconds_count"));
  // Every round after the first asked its questions on a provider's answer: the referee's own
  // latency, from that frame's arrival to the question's write.
  CHECK(sample(after, "tribunal_referee_handling_seconds_count") >= 2 * 3);
  CHECK(sample(after, "tribunal_referee_handling_seconds_bucket{le=\"+Inf\"}") ==
        sample(after, "tribunal_referee_handling_seconds_count"));
  CHECK(sample(after, "tribunal_referee_store_commit_seconds_count") > 2);
  CHECK(sample(after, "tribunal_connections_refused_total") == 0);
  CHECK(sample(after, "process_cpu_seconds_total") > 0);

  const testing::HttpReply provider = testing::http_get(port_of(honest), "/metrics");
  REQUIRE(provider.status == 200);
  CHECK(sample(provider.body, "tribunal_provider_jobs_total{outcome=\"claimed\"}") == 2);
  CHECK(sample(provider.body, "tribunal_provider_queries_total") > 0);
  CHECK(sample(provider.body, "tribunal_provider_answer_seconds_count") ==
        sample(provider.body, "tribunal_provider_queries_total"));
  CHECK(sample(provider.body, "tribunal_provider_answer_bytes_total") > 0);

  // Issue 34, item 6: the process series, the build, the provider's progress and the dispute monitor's
  // series, all named per Prometheus' conventions.
  for (const std::string* body : {&after, &provider.body}) {
    const std::vector<std::string> breaches = convention_breaches(*body);
    CHECK_MESSAGE(breaches.empty(), fmt::format("{}", fmt::join(breaches, "; ")));
    CHECK(sample(*body, "process_resident_memory_bytes") > 1e6);
    CHECK(sample(*body, "process_open_fds") >= 3);
    CHECK(sample(*body, "process_open_fds") < sample(*body, "process_max_fds"));
    const double start = sample(*body, "process_start_time_seconds");
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    CHECK(start > now - 3600);
    CHECK(start <= now + 1);
    const auto [info, labels] = first_sample(*body, "tribunal_build_info");
    CHECK(info == 1);
    CHECK(labels == fmt::format(R"({{contract="{}",version="{}"}})", kRepOpsContractVersion, "0.1.0"));
  }
  CHECK(after.find("# TYPE tribunal_build_info gauge") != std::string::npos);
  CHECK(after.find("# TYPE process_start_time_seconds gauge") != std::string::npos);
  CHECK(sample(after, "tribunal_referee_verdicts_total{outcome=\"one_claim_stands\"}") == 2);
  CHECK(sample(after, "tribunal_referee_verdicts_total{outcome=\"undecided\"}") == 0);
  CHECK(sample(after, "tribunal_referee_disputes_near_clock_end") == 0);
  CHECK(after.find("\ntribunal_referee_dispute_clock_left_min_seconds Nan\n") != std::string::npos);
  // No training now: the progress gauges read 0 (the jobs were trained before the disputes).
  CHECK(sample(provider.body, "tribunal_provider_training_step") == 0);
  CHECK(sample(provider.body, "tribunal_provider_training_job_steps") == 0);
  CHECK(sample(provider.body, "tribunal_provider_training_steps_per_second") == 0);
  CHECK(provider.body.find("# TYPE tribunal_provider_training_steps_per_second gauge") != std::string::npos);

  CHECK(testing::http_get(referee_port, "/healthz").body == "ok\n");
  CHECK(testing::http_get(referee_port, "/nothing").status == 404);
  CHECK(testing::http_get(referee_port, "/metrics", "POST").status == 405);

  // The dispute pages, from the store: the list links both; each page shows its verdict, the located
  // step and node, a valid signature and the rounds replayed from the record; all self-contained.
  const testing::HttpReply list = testing::http_get(referee_port, "/disputes");
  REQUIRE(list.status == 200);
  CHECK(is_self_contained(list.body));
  const std::vector<std::pair<int, int>> located = {{3, 4}, {20, 11}};
  for (size_t i = 0; i < decided.size(); ++i) {
    const std::string id = to_hex(decided[i].dispute_id);
    CHECK(list.body.find("/disputes/" + id) != std::string::npos);
    const testing::HttpReply page = testing::http_get(referee_port, "/disputes/" + id);
    REQUIRE(page.status == 200);
    CHECK(page.headers.find("text/html") != std::string::npos);
    CHECK(is_self_contained(page.body));
    CHECK(page.body.find(R"(id="reason">wrong_output<)") != std::string::npos);
    CHECK(page.body.find(fmt::format(R"(id="located-step">{}<)", located[i].first)) != std::string::npos);
    CHECK(page.body.find(fmt::format(R"(id="located-node">{}<)", located[i].second)) != std::string::npos);
    CHECK(page.body.find(R"(<span class="ok">valid</span>)") != std::string::npos);
    CHECK(page.body.find("level 2: step " + std::to_string(located[i].first) + " is the first") !=
          std::string::npos);
    CHECK(page.body.find(R"(id="located-box")") != std::string::npos);
  }
  CHECK(testing::http_get(referee_port, "/disputes/" + std::string(64, '0')).status == 404);
  CHECK(testing::http_get(referee_port, "/disputes/../referee.sqlite").status == 404);
  CHECK(testing::http_get(referee_port, "/disputes/XYZ").status == 404);

  // The same on a separate metrics address.
  const uint16_t metrics_port = net.referee.listen_metrics("127.0.0.1", 0);
  CHECK(sample(testing::http_get(metrics_port, "/metrics").body, "tribunal_referee_disputes_opened_total") ==
        2);
}
