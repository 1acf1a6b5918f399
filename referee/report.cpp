#include "referee/report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <set>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/safetensors.h"
#include "engine/state.h"
#include "engine/step.h"
#include "ops/registry.h"
#include "protocol/trajectory.h"
#include "referee/report_svg.h"

namespace tribunal {

using report_svg::escape;

namespace {

constexpr const char* kStyle = R"css(
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1c2833;background:#fafafa;margin:0}
main{max-width:1010px;margin:0 auto;padding:24px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #cfd8dc;padding-bottom:4px}
.id{font-family:ui-monospace,monospace;font-size:13px;color:#546e7a;word-break:break-all}
.badge{display:inline-block;padding:3px 10px;border-radius:12px;color:#fff;font-weight:600;font-size:14px}
.won{background:#2e7d32}.lost{background:#c62828}.undecided{background:#6d4c41}
dl{display:grid;grid-template-columns:180px 1fr;gap:4px 12px;margin:0}dt{color:#546e7a}dd{margin:0}
table{border-collapse:collapse;width:100%;font-size:14px}td,th{border-bottom:1px solid #e0e0e0;padding:4px 6px;text-align:left;vertical-align:top}
th{color:#546e7a;font-weight:600}.mono{font-family:ui-monospace,monospace;font-size:12.5px;word-break:break-all}
.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}.warn{color:#ef6c00;font-weight:600}
svg text{font:12px system-ui,sans-serif;fill:#37474f}svg .lvl{font-weight:600;font-size:14px;fill:#1c2833}
svg .hl{fill:#c62828;font-weight:600}svg .note{fill:#546e7a;font-style:italic}
svg .axis{stroke:#455a64;stroke-width:2}svg .tick{stroke:#78909c;stroke-width:1}svg .zoom{fill:#c62828;opacity:.08}
svg .edge{fill:none;stroke:#b0bec5;stroke-width:1}svg .edge.hot{stroke:#c62828;stroke-width:2}
svg .node{font:11px ui-monospace,monospace;fill:#263238}svg .node.hot{fill:#fff;font-weight:600}
.scroll{overflow-x:auto;background:#fff;border:1px solid #e0e0e0;border-radius:6px;padding:6px}
ol.rounds{font-size:14px;padding-left:28px}ol.rounds li.narrow{color:#c62828;font-weight:600}
.absent{color:#78909c;font-style:italic}
)css";

std::string hex16(const Digest& d) {
  return to_hex(d).substr(0, 16);
}

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape(title) +
         "</title><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><style>" + kStyle +
         "</style></head><body><main>" + body + "</main></body></html>\n";
}

// The level of an event's phase: 1 (checkpoints), 2 (steps), 3 (nodes and the openings after them).
int level_of(Phase p) {
  switch (p) {
    case Phase::Checkpoints:
    case Phase::IntervalCommit:
      return 1;
    case Phase::Steps:
    case Phase::StepCommit:
      return 2;
    default:
      return 3;
  }
}

// Each party's opened node record of the located node, from the dispute's record.
std::array<std::optional<NodeRecord>, 2> located_records(std::span<const DisputeInput> record,
                                                         uint64_t node) {
  std::array<std::optional<NodeRecord>, 2> out;
  for (const DisputeInput& in : record) {
    if (in.kind != DisputeInput::Kind::Envelope || in.party < 0 || in.party > 1) continue;
    const Envelope env = open_envelope(in.envelope, SignatureCheck::DeferTensorChunks);
    if (const auto* r = std::get_if<Records>(&env.body))
      for (size_t i = 0; i < r->indices.size() && i < r->records.size(); ++i)
        if (r->indices[i] == node) out[static_cast<size_t>(in.party)] = r->records[i];
  }
  return out;
}

// The referee's recomputed output leaves of `node`, from its "re-executed node N: …" event
// (referee_dispute.cpp): per party (the same for both in a RepOps job). Empty when not in the events.
std::array<std::vector<std::string>, 2> recomputed_leaves(std::span<const DisputeEvent> events,
                                                          uint64_t node) {
  static const std::regex hex(R"([0-9a-f]{64})");
  std::array<std::vector<std::string>, 2> out;
  const std::string prefix = fmt::format("re-executed node {}: ", node);
  for (const DisputeEvent& e : events) {
    if (!e.text.starts_with(prefix)) continue;
    const std::string rest = e.text.substr(prefix.size());
    const size_t split = rest.find("; party 1 ");
    const auto leaves = [&](const std::string& part) {
      std::vector<std::string> l;
      for (auto it = std::sregex_iterator(part.begin(), part.end(), hex); it != std::sregex_iterator(); ++it)
        l.push_back(it->str());
      return l;
    };
    out[0] = leaves(rest.substr(0, split));
    out[1] = split == std::string::npos ? out[0] : leaves(rest.substr(split));
  }
  return out;
}

// A provider as the page names it: its key's first 16 hex digits and its claim's endpoint.
struct Party {
  std::string key;       // full hex
  std::string endpoint;  // from its signed claim
  std::string label() const { return key.substr(0, 16) + "… at " + endpoint; }
  std::string short_label() const { return "provider " + key.substr(0, 8) + "…"; }
};

// Per level, when the game entered it and left it (the record's times: the referee's monotonic clock,
// so only differences are meaningful), from a replay's trace.
struct LevelSpan {
  std::optional<GameTime> begin, end;
};

std::string duration_text(std::chrono::milliseconds ms) {
  const double s = std::chrono::duration<double>(ms).count();
  return s < 120 ? fmt::format("{:.3f} s", s) : fmt::format("{:.1f} min", s / 60);
}

// The checkpoint of `step` in a provider's checkpoint directory.
std::filesystem::path checkpoint_at(const std::filesystem::path& dir, int64_t step) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) == 0 && entry.path().extension() == ".safetensors" &&
        static_cast<int64_t>(read_checkpoint_header(entry.path()).step) == step)
      return entry.path();
  }
  throw EngineError(fmt::format("{}: no checkpoint of step {}", dir.string(), step));
}

// Both providers' states at the first differing checkpoint, tensor by tensor: how many elements differ
// (bitwise) and the largest |Δ| among them.
std::string state_difference(const std::array<std::filesystem::path, 2>& dirs, int64_t step,
                             const std::string& a, const std::string& b_name) {
  const SafetensorsFile f0 = read_safetensors(checkpoint_at(dirs[0], step));
  const SafetensorsFile f1 = read_safetensors(checkpoint_at(dirs[1], step));
  std::string rows;
  size_t differing_tensors = 0;
  for (const auto& entry : f0.tensors) {
    const std::string& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    const auto& t0 = entry.second;
    const auto it =
        std::find_if(f1.tensors.begin(), f1.tensors.end(), [&](const auto& t) { return t.first == name; });
    if (it == f1.tensors.end() || it->second.numel() != t0.numel()) continue;
    const float* x = t0.data();
    const float* y = it->second.data();
    int64_t count = 0;
    double max_delta = 0;
    for (int64_t i = 0; i < t0.numel(); ++i) {
      if (std::memcmp(&x[i], &y[i], sizeof(float)) == 0) continue;
      ++count;
      const double d = std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
      max_delta = std::isnan(d) ? d : std::max(max_delta, d);
    }
    if (count == 0) continue;
    ++differing_tensors;
    rows += fmt::format(R"(<tr><td class="mono">{}</td><td>{} of {}</td><td class="mono">{:.6g}</td></tr>)",
                        escape(name), count, t0.numel(), max_delta);
  }
  return fmt::format(
      R"(<h2>The first differing checkpoint</h2><p>Step {}: {} of {} state tensors differ between {} and {} (element by element, from the checkpoints given).</p><table id="state-diff"><tr><th>tensor</th><th>elements that differ</th><th>max |Δ|</th></tr>{}</table>)",
      step, differing_tensors, f0.tensors.size(), escape(a), escape(b_name), rows);
}

std::string seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:.3f} s", std::chrono::duration<double>(ms).count());
}

}  // namespace

std::vector<DisputeEvent> dispute_events(std::span<const DisputeInput> inputs) {
  std::vector<DisputeEvent> events;
  // Any key: the replayed verdict is not kept, only what the game did. Only for a record whose events
  // the store does not hold (a dispute decided before schema version 4 kept them): the store's
  // events are read otherwise (RefereeStore::events).
  RefereeDispute::replay(generate_keypair(), inputs, {}, &events);
  return events;
}

std::vector<DisputeEvent> parse_dispute_log(std::istream& log) {
  static const std::regex referee(R"(round (\d+): (.*)$)"), demo(R"(\[round +(\d+)\] (.*)$)"),
      level(R"(^level (\d))");
  std::vector<DisputeEvent> events;
  std::string line;
  int current = 1;
  while (std::getline(log, line)) {
    // A node's JSON log line (nodes/log.h, `--log-format json`): its message is the text line.
    if (line.starts_with('{')) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("message") && j["message"].is_string())
        line = j["message"].get<std::string>();
    }
    std::smatch m;
    if (!std::regex_search(line, m, demo) && !std::regex_search(line, m, referee)) continue;
    DisputeEvent e;
    e.round = static_cast<uint32_t>(std::stoul(m[1].str().substr(0, 9)));
    e.text = m[2].str();
    std::smatch lm;
    if (std::regex_search(e.text, lm, level)) current = lm[1].str()[0] - '0';
    e.phase = current == 1 ? Phase::Checkpoints : current == 2 ? Phase::Steps : Phase::Nodes;
    events.push_back(std::move(e));
  }
  return events;
}

std::vector<LossPoint> read_checkpoint_losses(const std::filesystem::path& dir) {
  std::vector<std::pair<int64_t, std::filesystem::path>> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) != 0 || entry.path().extension() != ".safetensors") continue;
    files.emplace_back(read_checkpoint_header(entry.path()).step, entry.path());
  }
  if (ec) throw EngineError(dir.string() + ": cannot list the checkpoints: " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<LossPoint> out;
  for (const auto& [step, path] : files) {
    const SafetensorsFile f = read_safetensors(path);
    const auto it =
        std::find_if(f.tensors.begin(), f.tensors.end(), [](const auto& t) { return t.first == "loss"; });
    if (it == f.tensors.end() || it->second.numel() != 1)
      throw EngineError(path.string() + ": no scalar 'loss' tensor");
    out.emplace_back(step, static_cast<double>(it->second.data()[0]));
  }
  return out;
}

std::string dispute_report_html(const ReportInput& in) {
  const Envelope env = open_envelope(in.verdict);  // throws on a malformed or badly signed envelope
  if (env.kind != MessageKind::Verdict)
    throw ProtocolError("the file is a signed message, but not a verdict");
  const Verdict& v = std::get<Verdict>(env.body);

  std::string signature;
  if (in.referee_key) {
    try {
      verify_verdict(in.verdict, *in.referee_key);
      signature = fmt::format(
          R"(<span class="ok">valid</span>: signed by the trusted referee key <span class="mono">{}</span>; its dispute id is the hash of the opening it carries and both claims are validly signed for its job)",
          to_hex(Digest(*in.referee_key)));
    } catch (const std::exception& e) {
      signature = fmt::format(
          R"(<span class="bad">FAILED</span> against the referee key <span class="mono">{}</span>: {})",
          to_hex(Digest(*in.referee_key)), escape(e.what()));
    }
  } else {
    signature = fmt::format(
        R"(<span class="warn">not checked against a trusted key</span> (give the referee's key); the envelope is signed by <span class="mono">{}</span>)",
        to_hex(Digest(env.sender)));
  }

  const JobSpec job = parse_job(v.opening.job_toml, "the verdict's job");
  const DataShape shape{static_cast<int64_t>(v.opening.dataset_samples),
                        static_cast<int64_t>(v.opening.features), static_cast<int64_t>(v.opening.classes),
                        static_cast<int64_t>(v.opening.label_width)};
  const std::vector<uint64_t> cps =
      checkpoint_steps(static_cast<uint64_t>(job.steps), static_cast<uint64_t>(job.stride));
  const int level = static_cast<int>(v.level);

  std::vector<std::string> claim_rows;
  std::array<Party, 2> parties;
  for (size_t i = 0; i < v.opening.claims.size(); ++i) {
    const Envelope c = open_envelope(v.opening.claims[i]);
    const Claim& claim = std::get<Claim>(c.body);
    if (i < 2) parties[i] = {to_hex(Digest(c.sender)), claim.endpoint};
    const bool won = std::find(v.winners.begin(), v.winners.end(), i) != v.winners.end();
    const bool lost = std::find(v.losers.begin(), v.losers.end(), i) != v.losers.end();
    claim_rows.push_back(fmt::format(
        R"(<tr><td>claim {}</td><td>{}</td><td class="mono">{}</td><td class="mono">{}</td><td class="mono">{}</td><td>{}</td></tr>)",
        i,
        won    ? R"(<span class="badge won">stands</span>)"
        : lost ? R"(<span class="badge lost">lost</span>)"
               : "—",
        hex16(Digest(c.sender)), escape(claim.endpoint), hex16(claim.trajectory_root),
        i < v.clocks.size() ? seconds(v.clocks[i]) : "?"));
  }
  const bool undecided = is_undecided(v.reason);
  const std::string outcome =
      undecided           ? R"(<span class="badge undecided">undecided</span>)"
      : v.winners.empty() ? R"(<span class="badge lost">no valid claim</span>)"
                          : fmt::format(R"(<span class="badge won">claim {} stands</span>)", v.winners[0]);
  const std::string op =
      v.op < kOpKindCount ? op_name(static_cast<OpKind>(v.op)) : "op " + std::to_string(v.op);

  // The located interval: the checkpoint k with cps[k-1] ≤ t < cps[k].
  uint64_t interval = 0;
  if (level >= 2)
    for (size_t k = 1; k < cps.size(); ++k)
      if (cps[k - 1] <= v.step && v.step < cps[k]) interval = k;
  StepGraph g;
  std::string no_graph;  // why the located step's graph cannot be drawn
  if (level >= 3) {
    try {  // an imported model's graph is in its file: drawn only where the file is registered
      JobSpec located = job;
      locate_model_files(located, in.models);
      g = build_step_graph(located, shape, static_cast<int64_t>(v.step),
                           std::vector<int64_t>(static_cast<size_t>(located.batch_size), 0));
    } catch (const EngineError& e) {
      no_graph = e.what();
    }
  }

  // The record replayed without re-executing (the hook refuses every attempt): the time each level took
  // and the located node's opened inputs. A page never re-executes a node (nodes/dispute_pages.h).
  ReplayTrace trace;
  std::string no_timeline = "The times are in the dispute's record (the referee's store), not given here.";
  if (!in.record.empty()) {
    try {
      DisputeOptions replay_options;
      replay_options.reexecute_hook = [](int) { throw std::runtime_error("not re-executed for a report"); };
      RefereeDispute::replay(generate_keypair(), in.record, replay_options, nullptr, &trace);
    } catch (const std::exception& e) {
      trace.phases.clear();
      no_timeline = std::string("The dispute's record does not replay: ") + e.what();
    }
  }
  std::array<LevelSpan, 3> spans;
  if (!trace.phases.empty()) {
    int current = 1;
    spans[0].begin = in.record.front().at;
    for (const auto& [at, phase] : trace.phases) {
      const int lv = phase == Phase::Done ? 4 : level_of(phase);
      for (; current < lv; ++current) {
        spans[static_cast<size_t>(current - 1)].end = at;
        if (current < 3) spans[static_cast<size_t>(current)].begin = at;
      }
    }
  }

  // The located node's output tensor, by its name in the step graph.
  std::string tensor;
  if (level >= 3 && v.node < g.nodes.size() && !g.nodes[v.node].outputs.empty())
    tensor = g.values[g.nodes[v.node].outputs[0]].name;
  const auto who = [&](size_t p) {
    return p < 2 ? fmt::format(R"(provider <span class="mono">{}</span>)", escape(parties[p].label()))
                 : std::string("a provider");
  };
  std::string summary;
  if (undecided) {
    summary = fmt::format("The dispute ended undecided ({}): no provider was convicted. {}",
                          reason_name(v.reason), escape(v.detail));
  } else if (v.losers.empty()) {
    summary = fmt::format("Both claims stand ({}).", reason_name(v.reason));
  } else {
    std::string convicted;
    for (size_t k = 0; k < v.losers.size(); ++k) {
      if (k) convicted += " and ";
      convicted += who(v.losers[k]);
    }
    const std::string stands = v.winners.empty() ? std::string(" No claim stands.")
                                                 : fmt::format(" The claim of {} stands.", who(v.winners[0]));
    if (v.reason == VerdictReason::WrongOutput && level >= 3) {
      summary = fmt::format(
          R"({} committed a wrong <b>{}</b> output{} at step <b>{}</b> (node {}); the referee re-executed that op on the inputs both providers had agreed on and recomputed it.{})",
          convicted, op, tensor.empty() ? "" : fmt::format(R"( <b class="mono">{}</b>)", escape(tensor)),
          v.step, v.node, stands);
    } else {
      summary = fmt::format("{} lost ({}) at level {}{}: {}.{}", convicted, reason_name(v.reason), level,
                            level >= 2 ? fmt::format(", step {}", v.step) : "", escape(v.detail), stands);
    }
  }

  report_svg::Narrowing n;
  n.checkpoints = cps;
  n.level = level;
  n.interval = interval;
  n.step = v.step;
  n.nodes = g.nodes.size();
  n.node = v.node;
  std::array<std::set<uint32_t>, 3> rounds_at;
  for (const DisputeEvent& e : in.events)
    rounds_at[static_cast<size_t>(level_of(e.phase) - 1)].insert(e.round);
  for (size_t i = 0; i < 3; ++i) n.rounds[i] = static_cast<uint32_t>(rounds_at[i].size());

  std::string b;
  b += fmt::format(R"(<h1>Dispute {} {}</h1><div class="id">dispute {}<br>job {}</div>)", hex16(v.dispute_id),
                   outcome, to_hex(v.dispute_id), to_hex(v.job_id));
  b += R"(<p id="summary" class="summary">)" + summary + "</p>";
  b += "<h2>Verdict</h2><dl>";
  b += fmt::format(R"(<dt>outcome</dt><dd id="outcome">{}</dd>)",
                   undecided           ? "undecided, no one convicted"
                   : v.winners.empty() ? "no valid claim"
                                       : fmt::format("claim {} stands", v.winners[0]));
  b += fmt::format(R"(<dt>reason</dt><dd id="reason">{}</dd>)", reason_name(v.reason));
  b += fmt::format(
      R"(<dt>located at</dt><dd>level {}{}{}</dd>)", level,
      level >= 2 ? fmt::format(R"(, step <b id="located-step">{}</b>)", v.step) : "",
      level >= 3
          ? fmt::format(R"(, node <b id="located-node">{}</b> (<b id="located-op">{}</b>))", v.node, op)
          : "");
  b += fmt::format(
      R"(<dt>rounds</dt><dd><span id="rounds">{}</span> questions asked (the verdict's count){}</dd>)",
      v.rounds,
      in.events.empty()
          ? std::string()
          : fmt::format(
                "; the {} events listed under Narrowing are those questions, the level hand-offs, the "
                "re-execution and the verdict",
                in.events.size()));
  b += fmt::format(R"(<dt>detail</dt><dd>{}</dd>)", escape(v.detail));
  b += fmt::format(R"(<dt>signature</dt><dd id="signature">{}</dd>)", signature);
  b += fmt::format(R"(<dt>job</dt><dd>{} steps, batch {}, stride {} ({} checkpoints), seed {}</dd>)",
                   job.steps, job.batch_size, job.stride, cps.size(), job.seed);
  b += "</dl>";
  b +=
      R"(<table id="claims"><tr><th></th><th>outcome</th><th>provider key</th><th>endpoint</th><th>trajectory root</th><th>clock left</th></tr>)";
  for (const auto& r : claim_rows) b += r;
  b += "</table>";

  b += "<h2>Timeline</h2>";
  if (trace.phases.empty()) {
    b += R"(<p class="absent" id="no-timeline">)" + escape(no_timeline) + "</p>";
  } else {
    const GameTime t0 = in.record.front().at, t1 = trace.phases.back().first;
    b += R"(<dl id="timeline">)";
    if (in.decided_at) {
      const auto decided = std::chrono::floor<std::chrono::seconds>(*in.decided_at);
      b += fmt::format(R"(<dt>opened</dt><dd id="opened-at">{:%Y-%m-%d %H:%M:%S} UTC</dd>)",
                       std::chrono::floor<std::chrono::seconds>(*in.decided_at - (t1 - t0)));
      b += fmt::format(R"(<dt>decided</dt><dd id="decided-at">{:%Y-%m-%d %H:%M:%S} UTC</dd>)", decided);
    }
    b += fmt::format(R"(<dt>duration</dt><dd id="duration">{}</dd>)", duration_text(t1 - t0));
    static constexpr const char* kLevelName[3] = {"level 1 (checkpoints)", "level 2 (steps)",
                                                  "level 3 (nodes, openings, re-execution)"};
    for (size_t k = 0; k < 3; ++k) {
      if (!spans[k].begin) continue;
      const GameTime end = spans[k].end.value_or(t1);
      b += fmt::format(R"(<dt>{}</dt><dd id="level-{}-time">{}, from +{} to +{}</dd>)", kLevelName[k], k + 1,
                       duration_text(end - *spans[k].begin), duration_text(*spans[k].begin - t0),
                       duration_text(end - t0));
    }
    b += "</dl>";
  }

  b += "<h2>The job</h2>";
  b += fmt::format(
      R"(<p>{} steps, batch {}, stride {} ({} checkpoints), seed {}; the job's hyperparameters as every party signed them (job {}):</p><pre id="job-toml" class="mono scroll">{}</pre>)",
      job.steps, job.batch_size, job.stride, cps.size(), job.seed, hex16(v.job_id),
      escape(v.opening.job_toml));

  b += "<h2>Narrowing</h2>";
  b += R"(<div class="scroll">)" + report_svg::narrowing(n) + "</div>";
  if (in.events.empty()) {
    b += R"(<p class="absent" id="no-rounds">)" + escape(in.no_rounds) + "</p>";
  } else {
    b += R"(<ol class="rounds">)";
    for (const DisputeEvent& e : in.events) {
      const bool narrow = e.text.find("first differ") != std::string::npos ||
                          e.text.find("is the first") != std::string::npos || e.text.rfind("verdict", 0) == 0;
      b += fmt::format(R"(<li{} value="{}">{}</li>)", narrow ? R"( class="narrow")" : "", e.round,
                       escape(e.text));
    }
    b += "</ol>";
  }

  b += "<h2>The located step's graph</h2>";
  if (level >= 3 && v.node < g.nodes.size()) {
    const std::vector<size_t> shown = report_svg::graph_nodes_shown(g, v.node);
    b += fmt::format(
        R"(<p>Step {}: {} nodes in topological order, column by column{}; node {} ({}) in red, the nodes producing its inputs outlined orange, those using its outputs blue.</p>)",
        v.step, g.nodes.size(),
        shown.size() < g.nodes.size()
            ? fmt::format(" (here {} of them: its neighbours in that order and the nodes it is connected to)",
                          shown.size())
            : "",
        v.node, op);
    b += R"(<div class="scroll">)" + report_svg::graph(g, v.node, shown) + "</div>";
    const Node& node = g.nodes[v.node];
    b += "<h2>The located op</h2>";
    b += fmt::format(
        R"(<p><b>{}</b>, node {} of step {}. The referee opened its inputs (checked against the agreed records and state), re-executed it with RepOps and compared output hashes: {}</p>)",
        op, v.node, v.step, escape(v.detail));
    b +=
        R"(<table id="op-table"><tr><th></th><th>value</th><th>shape</th><th>elements</th><th>from</th></tr>)";
    const auto value_row = [&](const char* role, ValueId id) {
      const Value& val = g.values[id];
      std::string from = "node output";
      if (val.source != ValueSource::Node) {
        const auto in_list = [&](const std::vector<ValueId>& l) {
          return std::find(l.begin(), l.end(), id) != l.end();
        };
        from = in_list(g.state_inputs) ? "state(t)" : in_list(g.data_inputs) ? "data set" : "constant";
      } else {
        for (size_t p = 0; p < g.nodes.size(); ++p)
          for (ValueId o : g.nodes[p].outputs)
            if (o == id) from = fmt::format("node {} ({})", p, op_name(g.nodes[p].op));
      }
      if (std::string(role) == "output") from = "this node";
      b += fmt::format(
          R"(<tr><td>{}</td><td class="mono">{}</td><td class="mono">{}</td><td>{}</td><td>{}</td></tr>)",
          role, escape(val.name), val.shape.str(), val.shape.numel(), escape(from));
    };
    for (ValueId id : node.inputs) value_row("input", id);
    for (ValueId id : node.outputs) value_row("output", id);
    b += "</table>";
    if (in.record.empty()) {
      b +=
          R"(<p class="absent">The hashes each party committed for this node are in the dispute's record (the referee's store), not given here.</p>)";
    } else {
      const std::array<std::optional<NodeRecord>, 2> records = located_records(in.record, v.node);
      const OpenedSummary* opened = trace.opened && trace.opened->node == v.node ? &*trace.opened : nullptr;
      // Each party's committed hashes of the node's inputs and outputs; a hash the parties differ on in red.
      const std::array<std::vector<std::string>, 2> recomputed = recomputed_leaves(in.events, v.node);
      b += fmt::format(
          R"(<h3>Output hashes: each provider's committed node record and the referee's re-execution</h3><table id="hashes"><tr><th></th><th>{} (claim 0)</th><th>{} (claim 1)</th><th>referee recomputed</th></tr>)",
          escape(parties[0].short_label()), escape(parties[1].short_label()));
      const auto rows = [&](const char* role, auto member) {
        const bool outputs = std::string(role) == "output";
        size_t n = 0;
        for (const auto& r : records)
          if (r) n = std::max(n, ((*r).*member).size());
        for (size_t i = 0; i < n; ++i) {
          std::array<std::string, 2> h;
          for (size_t p = 0; p < 2; ++p)
            if (records[p] && i < ((*records[p]).*member).size()) h[p] = to_hex(((*records[p]).*member)[i]);
          // Against the referee's recomputed leaf where there is one (outputs); else against each other.
          std::array<std::string, 2> ref;
          for (size_t p = 0; p < 2; ++p)
            if (outputs && i < recomputed[p].size()) ref[p] = recomputed[p][i];
          const auto cls = [&](size_t p) {
            if (h[p].empty()) return "";
            if (!ref[p].empty()) return h[p] == ref[p] ? " ok" : " bad";
            return !h[0].empty() && !h[1].empty() && h[0] != h[1] ? " bad" : "";
          };
          std::string ref_cell = outputs ? "not in the record's events" : "(agreed input)";
          if (!ref[0].empty())
            ref_cell = ref[0] == ref[1] ? ref[0].substr(0, 32)
                                        : fmt::format("claim 0: {}<br>claim 1: {}", ref[0].substr(0, 32),
                                                      ref[1].substr(0, 32));
          b += fmt::format(
              R"(<tr><td>{} {}</td><td class="mono{}">{}</td><td class="mono{}">{}</td><td class="mono"{}>{}</td></tr>)",
              role, i, cls(0), h[0].empty() ? "—" : h[0].substr(0, 32), cls(1),
              h[1].empty() ? "—" : h[1].substr(0, 32),
              outputs && !ref[0].empty() ? R"( id="referee-hash")" : "", ref_cell);
        }
      };
      rows("input", &NodeRecord::inputs);
      rows("output", &NodeRecord::outputs);
      b += "</table>";
      b +=
          R"(<p>The protocol opens a node's inputs, never its outputs: outputs are compared by their hashes, so the size of the located op's wrong output is not known to anyone but its provider. Where both providers' checkpoints are given, the first differing checkpoint is compared element by element below.</p>)";
      if (opened && !opened->first.empty()) {
        // The opened values are the node's tensor inputs (state or node outputs) in input order, the data
        // set's and constant inputs left out (protocol/game.cpp, OpenInputs).
        std::vector<ValueId> opened_ids;
        for (ValueId id : node.inputs)
          if (g.values[id].source == ValueSource::Node ||
              std::find(g.state_inputs.begin(), g.state_inputs.end(), id) != g.state_inputs.end())
            opened_ids.push_back(id);
        b +=
            R"(<h3>Tensors opened for the re-execution (first elements)</h3><p>The inputs are agreed, so each chunk is taken from whichever provider sends it first.</p><table id="opened"><tr><th>by</th><th>tensor</th><th>shape</th><th>first elements</th></tr>)";
        for (const OpenedSummary::First& o : opened->first) {
          std::string first;
          for (const float f : o.values) first += fmt::format("{}{:.6g}", first.empty() ? "" : ", ", f);
          const std::string name =
              o.value < opened_ids.size() ? g.values[opened_ids[o.value]].name : fmt::format("#{}", o.value);
          b += fmt::format(
              R"(<tr><td>{}</td><td class="mono">{}</td><td class="mono">[{}]</td><td class="mono">{}, …</td></tr>)",
              escape(parties[static_cast<size_t>(o.party)].short_label()), escape(name),
              fmt::join(o.shape, ", "), first);
        }
        b += "</table>";
      }
      // The whole of each opened input, as the referee re-executed it (its summary in the record).
      if (opened && !opened->whole.empty()) {
        b +=
            R"(<h3>The opened inputs, whole</h3><table id="opened-stats"><tr><th>tensor</th><th>shape</th><th>elements</th><th>min</th><th>max</th><th>mean</th><th>non-finite</th></tr>)";
        for (const OpenedSummary::Whole& w : opened->whole) {
          if (w.input >= node.inputs.size()) continue;  // not an input of the node drawn
          b += fmt::format(
              R"(<tr><td class="mono">{}</td><td class="mono">[{}]</td><td>{}</td><td class="mono">{:.6g}</td><td class="mono">{:.6g}</td><td class="mono">{:.6g}</td><td>{}</td></tr>)",
              escape(g.values[node.inputs[w.input]].name), fmt::join(w.shape, ", "), w.elements, w.min, w.max,
              w.mean, w.non_finite);
        }
        b += "</table>";
      }
    }
  } else if (level >= 3) {
    b += fmt::format(
        R"(<p class="absent">Node {} ({}) of step {} was located; its graph is not drawn here: {}</p>)",
        v.node, op, v.step, escape(no_graph));
  } else {
    b += fmt::format(R"(<p class="absent">The dispute ended at level {}, before a node was located.</p>)",
                     level);
  }

  b += "<h2>Losses</h2>";
  const int64_t first_differing = interval > 0 ? static_cast<int64_t>(cps[interval]) : level == 1 ? 0 : -1;
  std::string diff;
  if (first_differing > 0 && !in.checkpoints[0].empty() && !in.checkpoints[1].empty()) {
    try {
      diff = state_difference(in.checkpoints, first_differing, parties[0].short_label(),
                              parties[1].short_label());
    } catch (const std::exception& e) {
      diff = R"(<p class="absent">The first differing checkpoints cannot be compared: )" + escape(e.what()) +
             "</p>";
    }
  }
  const std::string chart =
      report_svg::losses(in.losses, first_differing, {parties[0].short_label(), parties[1].short_label()});
  if (chart.empty()) {
    b +=
        R"(<p class="absent">No losses: give each party's checkpoint directory (a provider's STORE/&lt;job id&gt;/); the referee never sees them.</p>)";
  } else {
    b += fmt::format(
        R"(<p>Each provider's training loss at its checkpoints (the loss is part of the committed state). The trajectories first differ at the checkpoint of step {}.</p>)",
        first_differing);
    b += R"(<div class="scroll">)" + chart + "</div>";
  }
  b += diff;
  return page(fmt::format("Dispute {} — {}", hex16(v.dispute_id), reason_name(v.reason)), b);
}

DisputeOutcome dispute_outcome(const std::vector<uint8_t>& verdict) {
  const Envelope env = open_envelope(verdict);
  if (env.kind != MessageKind::Verdict)
    throw ProtocolError("the file is a signed message, but not a verdict");
  const Verdict& v = std::get<Verdict>(env.body);
  DisputeOutcome o;
  o.reason = reason_name(v.reason);
  o.level = static_cast<int>(v.level);
  o.step = v.step;
  o.node = v.node;
  o.rounds = v.rounds;
  if (o.level >= 3)
    o.op = v.op < kOpKindCount ? op_name(static_cast<OpKind>(v.op)) : "op " + std::to_string(v.op);
  std::vector<std::string> keys;
  for (const auto& claim_bytes : v.opening.claims) {
    const Envelope c = open_envelope(claim_bytes);
    keys.push_back(to_hex(Digest(c.sender)));
    o.endpoints.push_back(std::get<Claim>(c.body).endpoint);
  }
  for (uint8_t w : v.winners)
    if (w < keys.size()) o.winners.push_back(keys[w]);
  for (uint8_t l : v.losers)
    if (l < keys.size()) o.losers.push_back(keys[l]);
  return o;
}

namespace {

const std::optional<DisputeOutcome>* outcome_at(std::span<const std::optional<DisputeOutcome>> outcomes,
                                                size_t i) {
  return i < outcomes.size() && outcomes[i] ? &outcomes[i] : nullptr;
}

std::string outcome_text(const DisputeOutcome& o) {
  std::string where = o.level >= 3   ? fmt::format("step {}, node {} ({})", o.step, o.node, o.op)
                      : o.level == 2 ? fmt::format("step {}", o.step)
                                     : std::string("level 1");
  std::string who;
  for (const auto& k : o.losers) {
    if (!who.empty()) who += ", ";
    who += k.substr(0, 8) + "…";
  }
  return fmt::format("{}{}; {}", o.reason, who.empty() ? "" : ": convicted " + who, where);
}

}  // namespace

std::string dispute_list_html(std::span<const DisputeListing> disputes,
                              std::span<const std::optional<DisputeOutcome>> outcomes) {
  std::string b = "<h1>Disputes</h1>";
  if (disputes.empty()) b += R"(<p class="absent">No dispute recorded.</p>)";
  b += R"(<p>Also as JSON: <span class="mono">/disputes.json</span>.</p>)";
  b +=
      R"(<table id="disputes"><tr><th>dispute</th><th>state</th><th>outcome</th><th>decided at (UTC)</th><th>recorded inputs</th></tr>)";
  for (size_t i = 0; i < disputes.size(); ++i) {
    const DisputeListing& d = disputes[i];
    std::string when;
    if (d.decided_at)
      when = fmt::format("{:%Y-%m-%d %H:%M:%S}", std::chrono::floor<std::chrono::seconds>(*d.decided_at));
    const auto* o = outcome_at(outcomes, i);
    b += fmt::format(
        R"(<tr><td class="mono"><a href="/disputes/{}">{}</a></td><td>{}</td><td class="outcome">{}</td><td>{}</td><td>{}</td></tr>)",
        to_hex(d.id), hex16(d.id), d.decided ? "decided" : "open", o ? escape(outcome_text(**o)) : "—", when,
        d.inputs);
  }
  return page("Disputes", b + "</table>");
}

namespace {

// A game phase as /disputes.json names it.
const char* progress_phase_name(Phase p) {
  switch (p) {
    case Phase::Checkpoints:
      return "checkpoints";
    case Phase::IntervalCommit:
      return "interval_commit";
    case Phase::Steps:
      return "steps";
    case Phase::StepCommit:
      return "step_commit";
    case Phase::Nodes:
      return "nodes";
    case Phase::OpenRecords:
      return "open_records";
    case Phase::Chunks:
      return "chunks";
    case Phase::OpenInputs:
      return "open_inputs";
    case Phase::OpenLog:
      return "open_log";
    case Phase::Reexecute:
      return "reexecute";
    case Phase::Done:
      return "done";
  }
  return "unknown";
}

// The level a phase works at: the commit that opens a level is of that level (as the game's query).
int progress_level(Phase p) {
  switch (p) {
    case Phase::Checkpoints:
      return 1;
    case Phase::IntervalCommit:
    case Phase::Steps:
      return 2;
    case Phase::Chunks:
      return 4;
    default:
      return 3;
  }
}

nlohmann::json progress_json(const DisputeProgress& p) {
  const bool descent = p.phase == Phase::Checkpoints || p.phase == Phase::Steps || p.phase == Phase::Nodes ||
                       p.phase == Phase::Chunks;
  return {{"phase", progress_phase_name(p.phase)},
          {"level", progress_level(p.phase)},
          {"round", p.round},
          {"range", descent ? nlohmann::json::array({p.lo, p.hi}) : nlohmann::json(nullptr)},
          {"leaves", p.leaves}};
}

}  // namespace

std::string dispute_list_json(std::span<const DisputeListing> disputes,
                              std::span<const std::optional<DisputeOutcome>> outcomes,
                              std::span<const std::optional<DisputeProgress>> progress) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < disputes.size(); ++i) {
    const DisputeListing& d = disputes[i];
    nlohmann::json j = {{"id", to_hex(d.id)},    {"state", d.decided ? "decided" : "open"},
                        {"decided_at", nullptr}, {"inputs", d.inputs},
                        {"outcome", nullptr},    {"progress", nullptr}};
    if (i < progress.size() && progress[i]) j["progress"] = progress_json(*progress[i]);
    if (d.decided_at)
      j["decided_at"] =
          std::chrono::duration_cast<std::chrono::seconds>(d.decided_at->time_since_epoch()).count();
    if (const auto* o = outcome_at(outcomes, i)) {
      const DisputeOutcome& x = **o;
      j["outcome"] = {{"reason", x.reason},       {"winners", x.winners}, {"losers", x.losers},
                      {"endpoints", x.endpoints}, {"level", x.level},     {"step", x.step},
                      {"node", x.node},           {"op", x.op},           {"rounds", x.rounds}};
    }
    list.push_back(std::move(j));
  }
  return nlohmann::json{{"disputes", list}}.dump() + "\n";
}

bool is_self_contained(const std::string& html) {
  for (const char* external : {"http://", "https://", "src=", "url(", "@import", "href=\"//"})
    if (html.find(external) != std::string::npos) return false;
  return true;
}

}  // namespace tribunal
