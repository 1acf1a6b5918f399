// `tribunal report VERDICT`: the dispute as one self-contained HTML page (referee/report.h).
#include <cstdio>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "engine/error.h"
#include "engine/run_dir.h"
#include "referee/report.h"

namespace tribunal::cli {
namespace {

struct ReportSettings {
  std::string verdict, referee_key, dispute_log;
  std::filesystem::path store, out = "report.html";
  std::vector<std::filesystem::path> checkpoints;
  DataRegistry weights;  ///< --model / --weights: an imported model's file, to draw its located step
  bool json = false;
};

int run_report(const ReportSettings& s) {
  if (s.verdict.empty()) throw UsageError("give a verdict file");
  if (s.checkpoints.size() > 2) throw UsageError("--checkpoints takes one directory per claim, two at most");
  ReportInput in;
  in.verdict = read_file_bytes(s.verdict);
  in.models = s.weights;
  if (!s.referee_key.empty()) in.referee_key = public_key_arg("--referee-key", s.referee_key);
  const Envelope env = about_verdict_file(s.verdict, [&] { return open_envelope(in.verdict); });
  if (env.kind != MessageKind::Verdict) throw ProtocolError(s.verdict + ": not a verdict");
  const Verdict& v = std::get<Verdict>(env.body);
  if (!s.store.empty()) {
    // The referee's store is bound to its key: the trusted one, else the verdict's signer.
    if (!std::filesystem::exists(s.store / "referee.sqlite"))
      throw UsageError("--store: no referee store in " + s.store.string() + " (expected referee.sqlite)");
    RefereeStore store(s.store, in.referee_key.value_or(env.sender));
    // The rounds as played, stored as they happened; a dispute decided before the store kept them
    // (schema version 4) has its record replayed here, offline, while the record is kept.
    in.events = store.events(v.dispute_id);
    in.record = store.inputs(v.dispute_id);
    if (in.record.empty() && in.events.empty())
      throw ProtocolError(
          fmt::format("{}: no record of dispute {} (unknown, or pruned after its retention period)",
                      store.file().string(), to_hex(v.dispute_id).substr(0, 16)));
    if (in.events.empty()) in.events = dispute_events(in.record);
    if (const auto listing = store.listing(v.dispute_id)) in.decided_at = listing->decided_at;
  }
  if (!s.dispute_log.empty()) {
    std::ifstream log(s.dispute_log);
    if (!log) throw ProtocolError(s.dispute_log + ": cannot open");
    in.events = parse_dispute_log(log);
    if (in.events.empty()) throw ProtocolError(s.dispute_log + ": no \"round N: …\" line");
  }
  for (size_t i = 0; i < s.checkpoints.size(); ++i) {
    // A provider's store (STORE/<job id>/ inside it) or the job's directory itself.
    std::filesystem::path dir = s.checkpoints[i];
    if (std::filesystem::is_directory(dir / to_hex(v.job_id))) dir /= to_hex(v.job_id);
    // Another job's loss curve drawn in this dispute's report would mislead: refused, naming both.
    require_run_of_job(dir, v.job_id, "report --checkpoints (of the disputed job)");
    in.losses[i] = read_checkpoint_losses(dir);
    in.checkpoints[i] = dir;
    if (in.losses[i].empty()) throw EngineError(dir.string() + ": no checkpoint (step_*.safetensors)");
  }
  const std::string html = dispute_report_html(in);
  std::ofstream out(s.out, std::ios::binary);
  if (!(out << html)) throw ProtocolError(s.out.string() + ": cannot write");
  if (s.json) {
    const nlohmann::json summary = {{"out", s.out.string()},
                                    {"dispute_id", to_hex(v.dispute_id)},
                                    {"reason", reason_name(v.reason)},
                                    {"rounds", v.rounds},
                                    {"rounds_shown", in.events.size()},
                                    {"loss_curves", !in.losses[0].empty() + !in.losses[1].empty()}};
    std::printf("%s\n", summary.dump().c_str());
    return 0;
  }
  fmt::print("{}: dispute {} ({}), {} rounds, {} events shown, {} loss curve(s)\n", s.out.string(),
             to_hex(v.dispute_id).substr(0, 16), reason_name(v.reason), v.rounds, in.events.size(),
             !in.losses[0].empty() + !in.losses[1].empty());
  return 0;
}

}  // namespace

Command add_report(CLI::App& root) {
  auto s = std::make_shared<ReportSettings>();
  CLI::App* app = root.add_subcommand(
      "report", "write a dispute's verdict, narrowing, graph and losses as one self-contained HTML page");
  app->add_option("verdict", s->verdict, "the verdict file (verdict-<dispute id>.bin)")->type_name("VERDICT");
  app->add_option("--referee-key", s->referee_key,
                  "check the signature against this referee key (64 hex digits)")
      ->type_name("HEX");
  app->add_option("--store", s->store, "the referee's data directory: the dispute's rounds from its record")
      ->type_name("DIR");
  app->add_option("--dispute-log", s->dispute_log,
                  "the rounds from a log instead: the referee's log or `tribunal demo`'s output")
      ->type_name("FILE");
  add_repeatable(
      *app, "--checkpoints", "DIR", [s](const std::string& v) { s->checkpoints.emplace_back(v); },
      "a claim's checkpoints (a provider's --store, or its <job id> directory), claim 0 first: the loss "
      "curves");
  app->add_flag("--json", s->json, "print one JSON object (the page written, dispute id, reason, counts)");
  app->add_option("--out", s->out, "the HTML file to write")->type_name("FILE")->default_str("report.html");
  add_weights(*app, s->weights);  // an onnx job's --model: its located step's graph is built from the file
  return {app, [s] { return run_report(*s); }};
}

}  // namespace tribunal::cli
