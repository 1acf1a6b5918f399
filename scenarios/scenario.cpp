#include "scenarios/scenario.h"

#include <array>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/dataset.h"
#include "engine/error.h"
#include "engine/job.h"
#include "engine/step.h"
#include "engine/suggest.h"
#include "engine/toml_reader.h"

namespace tribunal::scenarios {

using cheats::Fault;
using cheats::RoundingFault;
using cheats::SkipMode;

namespace {

constexpr std::array<std::pair<AnswerKind, const char*>, 25> kAnswerKinds = {{
    {AnswerKind::Honest, "honest"},
    {AnswerKind::BadProof, "bad_proof"},
    {AnswerKind::Equivocate, "equivocate"},
    {AnswerKind::ChangeRoot, "change_root"},
    {AnswerKind::AgreeThenDisagree, "agree_then_disagree"},
    {AnswerKind::AlwaysAgree, "always_agree"},
    {AnswerKind::AlwaysDisagree, "always_disagree"},
    {AnswerKind::BadHandoff, "bad_handoff"},
    {AnswerKind::ForgedBytes, "forged_bytes"},
    {AnswerKind::BadRecord, "bad_record"},
    {AnswerKind::Silent, "silent"},
    {AnswerKind::Late, "late"},
    {AnswerKind::LastMoment, "last_moment"},
    {AnswerKind::WithholdOpenings, "withhold_openings"},
    {AnswerKind::Disconnect, "disconnect"},
    {AnswerKind::CrashRestart, "crash_restart"},
    {AnswerKind::Truncated, "truncated"},
    {AnswerKind::Oversized, "oversized"},
    {AnswerKind::BadSignature, "bad_signature"},
    {AnswerKind::ForeignKey, "foreign_key"},
    {AnswerKind::ReplayRound, "replay_round"},
    {AnswerKind::ReplayDispute, "replay_dispute"},
    {AnswerKind::WrongRound, "wrong_round"},
    {AnswerKind::NanBytes, "nan_bytes"},
    {AnswerKind::ZeroHashes, "zero_hashes"},
}};

constexpr std::array<VerdictReason, 10> kReasons = {
    VerdictReason::WrongOutput,       VerdictReason::InconsistentInput, VerdictReason::BadProof,
    VerdictReason::Timeout,           VerdictReason::RefereeFault,      VerdictReason::Equivocation,
    VerdictReason::WrongInitialState, VerdictReason::WrongPostState,    VerdictReason::BadRoundingLog,
    VerdictReason::BothValid};

std::string names_of_answer_kinds() {
  std::string s;
  for (auto& [k, n] : kAnswerKinds) s += std::string(s.empty() ? "" : ", ") + n;
  return s;
}

std::optional<OpKind> op_of_name(const std::string& name) {
  for (size_t i = 0; i < kOpKindCount; ++i)
    if (name == op_name(static_cast<OpKind>(i))) return static_cast<OpKind>(i);
  return std::nullopt;
}

std::string op_names() {
  std::string s;
  for (size_t i = 0; i < kOpKindCount; ++i) s += std::string(i ? ", " : "") + op_name(static_cast<OpKind>(i));
  return s;
}

// [provider.work]: the wrong work a provider does (cheats/fault.h).
Fault read_work(const TableReader& w, std::string& kind, const JobSpec& job, const std::string& where) {
  Fault f;
  kind = w.string("kind", "honest");
  const int64_t steps = job.steps;
  const auto step = [&](const char* key) { return w.integer(key, 0, true, 0, steps - 1); };
  if (kind == "honest") {
    w.allow_only({"kind"});
  } else if (kind == "corrupt_node") {
    w.allow_only({"kind", "step", "node", "slot", "element", "delta"});
    f.step = step("step");
    f.node = w.integer("node", 0, true, 0, INT32_MAX);
    f.slot = static_cast<uint32_t>(w.integer("slot", 0, false, 0, 16));
    f.element = w.integer("element", 0, false, -1, INT64_MAX);
    // NaN and ±inf are allowed on purpose: a cheater's tensors may hold them (hashes canonicalize NaN).
    const toml::node* d = w.table()->get("delta");
    if (d) {
      auto v = d->value<double>();
      if (!v)
        throw EngineError(
            fmt::format("{}: work.delta must be a number (nan and inf allowed)", w.location("delta")));
      f.delta = static_cast<float>(*v);
    }
  } else if (kind == "skip_steps") {
    w.allow_only({"kind", "from", "count", "mode"});
    f.skip_from = step("from");
    f.skip_count = w.integer("count", 1, false, 1, steps);
    const std::string mode = w.string("mode", "unchanged");
    if (mode == "unchanged")
      f.skip_mode = SkipMode::Unchanged;
    else if (mode == "extrapolate")
      f.skip_mode = SkipMode::Extrapolate;
    else
      throw EngineError(
          fmt::format("{}: work.mode '{}' is not one of unchanged, extrapolate", w.location("mode"), mode));
  } else if (kind == "swap_sample") {
    w.allow_only({"kind", "step", "position", "row"});
    f.swap_step = step("step");
    f.swap_position = w.integer("position", 0, false, 0, job.batch_size - 1);
    f.swap_row = w.integer("row", 0, true, 0, INT64_MAX);
  } else if (kind == "relabel") {
    w.allow_only({"kind", "step", "position", "label"});
    f.relabel_step = step("step");
    f.relabel_position = w.integer("position", 0, false, 0, job.batch_size - 1);
    f.relabel_label = w.integer("label", 0, true, 0, expected_data_shape(job).classes - 1);
  } else if (kind == "reorder_batches") {
    w.allow_only({"kind", "step", "with"});
    f.reorder_step = step("step");
    f.reorder_with = step("with");
  } else if (kind == "hyperparameter") {
    w.allow_only({"kind", "from", "lr_scale", "wd_scale", "hidden"});
    f.hparam_from = step("from");
    f.lr_scale = w.number("lr_scale", 1.0f, 0.0, 1e6);
    f.wd_scale = w.number("wd_scale", 1.0f, 0.0, 1e6);
    f.hparam_hidden = w.boolean("hidden", false);
  } else if (kind == "bf16") {
    w.allow_only({"kind", "from", "op"});
    f.bf16_from = step("from");
    const std::string op = w.string("op", "linear");
    const auto k = op_of_name(op);
    if (!k)
      throw EngineError(
          fmt::format("{}: work.op '{}' is not an op kind ({})", w.location("op"), op, op_names()));
    f.bf16_op = *k;
  } else if (kind == "wrong_init") {
    w.allow_only({"kind", "delta"});
    f.init_delta = w.number("delta", 1e-3f, -1e6, 1e6);
  } else if (kind == "trajectory_length") {
    w.allow_only({"kind", "steps"});
    f.claim_steps = w.integer("steps", 0, true, 1, kMaxSteps);
  } else if (kind == "rounding_forge") {
    w.allow_only({"kind", "step", "node", "element"});
    f.rounding = RoundingFault::Forge;
    f.rounding_step = step("step");
    f.rounding_node = w.integer("node", 0, true, 0, INT32_MAX);
    f.rounding_element = w.integer("element", 0, false, 0, INT64_MAX);
  } else if (kind == "rounding_omit" || kind == "rounding_bloat") {
    // Omitting or bloating leaves every output as it was, so alone it changes no claim (equal claims
    // are never disputed): `corrupt_node` also adds `delta` to element 0 of that node's first output
    // later in the same step, and the game stops at the first differing record, the tampered log.
    const bool omit = kind == "rounding_omit";
    if (omit)
      w.allow_only({"kind", "step", "node", "corrupt_node", "delta"});
    else
      w.allow_only({"kind", "step", "corrupt_node", "delta"});
    f.rounding = omit ? RoundingFault::Omit : RoundingFault::Bloat;
    f.rounding_step = step("step");
    if (omit) f.rounding_node = w.integer("node", 0, true, 0, INT32_MAX);
    const int64_t corrupt = w.integer("corrupt_node", -1, false, -1, INT32_MAX);
    if (corrupt >= 0) {
      f.step = f.rounding_step;
      f.node = corrupt;
      f.element = 0;
      f.delta = w.number("delta", 1e-3f, -1e6, 1e6);
    }
  } else {
    const std::string guess =
        closest_name(kind, {"honest", "corrupt_node", "skip_steps", "swap_sample", "relabel",
                            "reorder_batches", "hyperparameter", "bf16", "wrong_init", "trajectory_length",
                            "rounding_forge", "rounding_omit", "rounding_bloat"});
    throw EngineError(
        fmt::format("{}: work.kind '{}' is not one of honest, corrupt_node, skip_steps, swap_sample, "
                    "relabel, reorder_batches, hyperparameter, bf16, wrong_init, trajectory_length, "
                    "rounding_forge, rounding_omit, rounding_bloat{}",
                    w.location("kind"), kind, guess.empty() ? "" : " (did you mean '" + guess + "'?)"));
  }
  const DataShape shape = expected_data_shape(job);
  try {
    cheats::check_fault(f, job, shape);
  } catch (const EngineError& e) {
    throw EngineError(fmt::format("{}: {}", where, e.what()));
  }
  return f;
}

LogServing read_log_serving(const TableReader& p) {
  static constexpr std::pair<LogServing, std::string_view> kNames[] = {
      {LogServing::Honest, "honest"},
      {LogServing::Withheld, "withheld"},
      {LogServing::Altered, "altered"},
      {LogServing::AlteredThrowawayKey, "altered_throwaway_key"}};
  const std::string name = p.string("serve_logs", "honest");
  for (const auto& [kind, n] : kNames)
    if (name == n) return kind;
  throw EngineError(
      fmt::format("{}: serve_logs '{}' is not one of honest, withheld, altered, "
                  "altered_throwaway_key",
                  p.location("serve_logs"), name));
}

AnswerBehaviour read_answers(const TableReader& a) {
  AnswerBehaviour b;
  const std::string kind = a.string("kind", "honest");
  bool found = false;
  for (auto& [k, n] : kAnswerKinds)
    if (kind == n) b.kind = k, found = true;
  if (!found)
    throw EngineError(fmt::format("{}: answers.kind '{}' is not one of {}", a.location("kind"), kind,
                                  names_of_answer_kinds()));
  a.allow_only({"kind", "round", "count", "instead", "down_ms", "mirror"});
  b.round = static_cast<uint32_t>(a.integer("round", 1, false, 1, 1 << 20));
  b.count = static_cast<uint32_t>(a.integer("count", 1, false, 1, 1 << 20));
  b.instead = a.boolean("instead", false);
  b.down = std::chrono::milliseconds(a.integer("down_ms", 500, false, 0, 600000));
  b.mirror = a.string("mirror", "");
  return b;
}

LinkConditions read_link(const TableReader& t, LinkConditions base) {
  base.latency = std::chrono::milliseconds(t.integer("latency_ms", base.latency.count(), false, 0, 60000));
  base.drop_rate = t.real("drop_rate", base.drop_rate, 0.0, 0.5);
  base.bytes_per_second = static_cast<uint64_t>(
      t.integer("bytes_per_second", static_cast<int64_t>(base.bytes_per_second), false, 0, int64_t{1} << 40));
  return base;
}

}  // namespace

const char* answer_kind_name(AnswerKind kind) {
  for (auto& [k, n] : kAnswerKinds)
    if (k == kind) return n;
  return "?";
}

Scenario load_scenario(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw EngineError(fmt::format("{}: cannot open scenario file", file.string()));
  std::ostringstream text;
  text << in.rdbuf();
  const std::string source = file.string();
  const toml::table root = parse_toml(text.str(), source);

  Scenario s;
  s.file = file;
  TableReader top(&root, "scenario", source);
  top.allow_only({"name", "about", "job", "seed", "roles", "models", "dispute", "network", "load", "provider",
                  "expect"});
  s.name = top.string("name", file.stem().string());
  s.roles = top.boolean("roles", false);
  s.about = top.string("about", "");
  s.seed = static_cast<uint64_t>(top.integer("seed", 1, false, 0, INT64_MAX));
  const std::string job_rel = top.string("job", "", true);
  s.job = file.parent_path() / job_rel;
  std::ifstream job_in(s.job, std::ios::binary);
  if (!job_in) throw EngineError(fmt::format("{}: cannot open the job file {}", source, s.job.string()));
  std::ostringstream job_text;
  job_text << job_in.rdbuf();
  s.job_text = job_text.str();
  // The scenario's [dispute] table becomes the job's: the time terms both providers sign.
  if (const toml::table* terms = root["dispute"].as_table()) {
    std::ostringstream table;
    table << "\n[dispute]\n" << *terms << "\n";
    s.job_text += table.str();
  }
  // [models]: the ONNX files an imported model's job names, registered on every node of the scenario.
  if (const toml::node* models = root.get("models")) {
    const toml::table* table = models->as_table();
    if (!table)
      throw EngineError(fmt::format("{}: models must be a table", toml_where(source, models->source())));
    for (const auto& [name, path] : *table) {
      const auto* text = path.as_string();
      if (!text)
        throw EngineError(
            fmt::format("{}: models.{} must be a path (a string, relative to the scenario file)",
                        toml_where(source, path.source()), name.str()));
      s.registry.add_model(std::string(name.str()), file.parent_path() / text->get());
    }
  }
  JobSpec job = parse_job(s.job_text, s.job.string());
  locate_data(job, s.registry);

  TableReader network(root, "network", source, false);
  network.allow_only({"latency_ms", "drop_rate", "bytes_per_second"});
  s.network = read_link(network, {});
  TableReader load(root, "load", source, false);
  load.allow_only({"cpu_hogs"});
  s.cpu_hogs = static_cast<int>(load.integer("cpu_hogs", 0, false, 0, 64));

  const toml::node* providers = root.get("provider");
  const toml::array* list = providers ? providers->as_array() : nullptr;
  if (!list || list->size() < 2 || list->size() > 8)
    throw EngineError(fmt::format("{}: a scenario needs 2 to 8 [[provider]] tables",
                                  providers ? toml_where(source, providers->source()) : source));
  std::set<std::string> names;
  for (const toml::node& n : *list) {
    const toml::table* t = n.as_table();
    if (!t)
      throw EngineError(
          fmt::format("{}: [[provider]] entries must be tables", toml_where(source, n.source())));
    TableReader p(t, "provider", source);
    p.allow_only({"name", "latency_ms", "drop_rate", "bytes_per_second", "slowdown", "device", "work",
                  "answers", "serve_logs"});
    ProviderSpec spec;
    spec.name = p.string("name", "", true);
    spec.serve_logs = read_log_serving(p);
    if (spec.name.empty() || spec.name == "none" || !names.insert(spec.name).second)
      throw EngineError(fmt::format("{}: provider.name '{}' must be unique, non-empty and not 'none'",
                                    p.location("name"), spec.name));
    spec.link = read_link(p, s.network);
    spec.slowdown = p.real("slowdown", 1.0, 1.0, 1000.0);
    try {
      spec.device = parse_device(p.string("device", "cpu"));
      require_device(spec.device);  // a device this build lacks fails the load, never a silent CPU run
    } catch (const EngineError& e) {
      throw EngineError(fmt::format("{}: provider.device: {}", p.location("device"), e.what()));
    }
    TableReader work(*t, "work", source, false);
    spec.work = read_work(work, spec.work_kind, job, p.location("work"));
    spec.answers = read_answers(TableReader(*t, "answers", source, false));
    s.providers.push_back(std::move(spec));
  }
  for (auto& p : s.providers) {
    const bool parrots = p.answers.kind == AnswerKind::ChangeRoot ||
                         p.answers.kind == AnswerKind::AlwaysAgree ||
                         p.answers.kind == AnswerKind::AgreeThenDisagree;
    if (!parrots) continue;
    if (p.answers.mirror.empty())
      for (auto& q : s.providers)
        if (&q != &p && !q.work.any()) p.answers.mirror = q.name;
    if (!names.count(p.answers.mirror) || p.answers.mirror == p.name)
      throw EngineError(
          fmt::format("{}: provider '{}': answers.mirror must name another provider", source, p.name));
  }

  TableReader expect(root, "expect", source, true);
  expect.allow_only(
      {"winner", "dispute", "reason", "step", "node", "op", "disputes", "crashes", "refused", "reconnects"});
  s.expect.winner = expect.string("winner", "", true);
  if (s.expect.winner != "none" && !names.count(s.expect.winner)) {
    std::vector<std::string_view> candidates(names.begin(), names.end());
    candidates.push_back("none");
    throw EngineError(fmt::format("{}: expect.winner '{}' is not a provider name or 'none'{}",
                                  expect.location("winner"), s.expect.winner,
                                  did_you_mean(s.expect.winner, candidates)));
  }
  if (expect.table()->get("dispute")) s.expect.dispute = expect.boolean("dispute", true);
  if (expect.table()->get("reason")) {
    const std::string r = expect.string("reason", "");
    for (VerdictReason v : kReasons)
      if (r == reason_name(v)) s.expect.reason = v;
    if (!s.expect.reason)
      throw EngineError(
          fmt::format("{}: expect.reason '{}' is not a verdict reason", expect.location("reason"), r));
  }
  if (expect.table()->get("step"))
    s.expect.step = static_cast<uint64_t>(expect.integer("step", 0, true, 0, job.steps - 1));
  if (expect.table()->get("node"))
    s.expect.node = static_cast<uint64_t>(expect.integer("node", 0, true, 0, INT32_MAX));
  for (auto [key, field] :
       {std::pair{"disputes", &s.expect.disputes}, std::pair{"crashes", &s.expect.crashes},
        std::pair{"refused", &s.expect.refused}, std::pair{"reconnects", &s.expect.reconnects}})
    if (expect.table()->get(key)) *field = static_cast<uint64_t>(expect.integer(key, 0, true, 0, 1000000));
  if (expect.table()->get("op")) {
    s.expect.op = expect.string("op", "");
    if (!op_of_name(*s.expect.op))
      throw EngineError(fmt::format("{}: expect.op '{}' is not an op kind ({})", expect.location("op"),
                                    *s.expect.op, op_names()));
  }
  return s;
}

}  // namespace tribunal::scenarios
