// The dispute report's pieces that a demo's dispute does not reach (referee/report.h, docs/running.md
// "Dispute reports"): the loss chart's scale when a cheater's loss jumps or is not finite, and the
// /disputes list as JSON with each decided dispute's outcome.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>
#include <string>

#include "referee/report.h"
#include "referee/report_svg.h"

using namespace tribunal;

namespace {

// The y of every circle drawn for `who` (its <title> names it).
std::vector<double> ys(const std::string& svg, const std::string& who) {
  std::vector<double> out;
  const std::regex re("cy=\"([0-9.]+)\" r=\"3\" fill=\"[^\"]+\"><title>" + who + ": ");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stod((*it)[1].str()));
  return out;
}

}  // namespace

TEST_CASE("report: the loss chart keeps the honest curve readable when a cheater's loss jumps") {
  const std::array<std::vector<LossPoint>, 2> jump = {
      std::vector<LossPoint>{{0, 0}, {8, 2.0}, {16, 1.5}, {24, 1.2}},
      std::vector<LossPoint>{{0, 0}, {8, 2.0}, {16, 4000.0}, {24, 9000.0}}};
  const std::string svg = report_svg::losses(jump, 16, {"provider aaaa…", "provider bbbb…"});
  CHECK(svg.find(R"(data-scale="log")") != std::string::npos);
  CHECK(svg.find("training loss (log scale)") != std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);
  CHECK(svg.find("— provider aaaa…") != std::string::npos);
  CHECK(svg.find("— provider bbbb…") != std::string::npos);
  CHECK(svg.find("claim 0") == std::string::npos);
  // On a log axis the honest curve's drop from 2.0 to 1.2 spans over 10 px of the 236 px plot; on a
  // linear one up to 9000 it would be under 0.1 px.
  const std::vector<double> honest = ys(svg, "provider aaaa…");
  REQUIRE(honest.size() == 3);
  CHECK(honest[2] - honest[0] > 10);

  const std::array<std::vector<LossPoint>, 2> small = {std::vector<LossPoint>{{8, 2.0}, {16, 1.5}},
                                                       std::vector<LossPoint>{{8, 2.0}, {16, 1.7}}};
  const std::string linear = report_svg::losses(small, 16, {"a", "b"});
  CHECK(linear.find(R"(data-scale="linear")") != std::string::npos);
  CHECK(linear.find("(log scale)") == std::string::npos);

  // A loss that is not finite is drawn clipped at the top and said to be; the finite ones keep the scale.
  const std::array<std::vector<LossPoint>, 2> nan = {std::vector<LossPoint>{{8, 2.0}, {16, 1.5}},
                                                     std::vector<LossPoint>{{8, 2.0}, {16, NAN}}};
  const std::string clipped = report_svg::losses(nan, 16, {"a", "b"});
  CHECK(clipped.find("not finite (clipped)") != std::string::npos);
  const std::vector<double> b = ys(clipped, "b");
  REQUIRE(b.size() == 2);
  CHECK(b[1] < b[0]);
  CHECK(b[1] < 30);  // in the band above the plot
  CHECK(report_svg::losses(small, 16, {"a", "b"}).find("not finite") == std::string::npos);
}

TEST_CASE("report: /disputes as JSON: state, decided time and each decided dispute's outcome") {
  DisputeListing open;
  open.id[0] = 0xab;
  open.inputs = 7;
  DisputeListing decided;
  decided.id[0] = 0xcd;
  decided.decided = true;
  decided.decided_at = std::chrono::system_clock::time_point(std::chrono::seconds(1795000000));
  DisputeOutcome o;
  o.reason = "wrong_output";
  o.winners = {std::string(64, '1')};
  o.losers = {std::string(64, '2')};
  o.endpoints = {"ws://a/", "ws://b/"};
  o.level = 3;
  o.step = 12;
  o.node = 13;
  o.op = "adamw";
  o.rounds = 16;
  const std::vector<DisputeListing> list = {open, decided};
  const std::vector<std::optional<DisputeOutcome>> outcomes = {std::nullopt, o};
  const nlohmann::json j = nlohmann::json::parse(dispute_list_json(list, outcomes));
  REQUIRE(j.at("disputes").size() == 2);
  const auto& a = j["disputes"][0];
  CHECK(a.at("id") == "ab" + std::string(62, '0'));
  CHECK(a.at("state") == "open");
  CHECK(a.at("decided_at").is_null());
  CHECK(a.at("outcome").is_null());
  CHECK(a.at("inputs") == 7);
  const auto& d = j["disputes"][1];
  CHECK(d.at("state") == "decided");
  CHECK(d.at("decided_at") == 1795000000);
  CHECK(d.at("outcome").at("reason") == "wrong_output");
  CHECK(d.at("outcome").at("losers")[0] == std::string(64, '2'));
  CHECK(d.at("outcome").at("step") == 12);
  CHECK(d.at("outcome").at("op") == "adamw");
  const std::string html = dispute_list_html(list, outcomes);
  CHECK(html.find("wrong_output: convicted 22222222…; step 12, node 13 (adamw)") != std::string::npos);
  CHECK(is_self_contained(html));
}
