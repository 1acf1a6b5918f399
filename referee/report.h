// A dispute as one self-contained HTML page (inline CSS and SVG, no script, no network): the narrowing
// from trajectory to checkpoint interval to step to node with its rounds, the located step's graph
// with the node highlighted, both parties' losses with the first differing checkpoint, the located
// op's inputs and outputs, the verdict and its signature check. `tribunal report` writes it; the
// referee serves it at /disputes/<id> (docs/running.md, "Dispute reports").
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "referee/referee_dispute.h"
#include "referee/store.h"

namespace tribunal {

/// One party's loss at a checkpoint: (step, loss of the step that produced that state).
using LossPoint = std::pair<int64_t, double>;

/// What a report is made of. Only the verdict is required; every other part, when absent, is shown
/// as absent with what would supply it.
struct ReportInput {
  std::vector<uint8_t> verdict;  ///< the signed verdict envelope (a verdict file, or the store's)
  /// The referee key the signature is checked against; unset: the envelope's own signer is shown,
  /// marked as not checked against a trusted key.
  std::optional<PublicKey> referee_key;
  std::vector<DisputeEvent>
      events;  ///< the rounds: the store's (RefereeStore::events), dispute_events() or parse_dispute_log()
  /// Shown in place of the rounds when `events` is empty: why there are none and what would supply them.
  std::string no_rounds = "No rounds: give the dispute's record (the referee's store) or its log.";
  /// The dispute's recorded inputs (the referee's store), when kept: each party's opened record of the
  /// located node (its input and output hashes) and the first elements of the tensors opened.
  std::vector<DisputeInput> record;
  /// Each party's losses at its checkpoints (claim order), e.g. read_checkpoint_losses() of its store.
  std::array<std::vector<LossPoint>, 2> losses;
  /// Each party's checkpoint directory (a provider's STORE/<job_id>/), when given: the state tensors of
  /// the first differing checkpoint are compared element by element (max |Δ|, elements that differ).
  std::array<std::filesystem::path, 2> checkpoints;
  /// When the referee decided the dispute (its store's DisputeListing::decided_at), to date the
  /// timeline; the record's own times are the referee's monotonic clock, only their differences shown.
  std::optional<std::chrono::system_clock::time_point> decided_at;
  /// The model files (and initial weights) of the node drawing the page (--model, --weights): an
  /// imported model's step graph is built from its file; without it the located node is named but
  /// its graph is not drawn.
  DataRegistry models;
};

/// The page. Throws ProtocolError when the verdict envelope does not open (malformed or its signature
/// does not verify under its own signer); a verdict signed by another key than `referee_key` is
/// rendered with the failed check in red.
std::string dispute_report_html(const ReportInput& input);

/// The events of a dispute replayed from its recorded inputs (RefereeDispute::replay with events; the
/// located node is re-executed once). Throws ProtocolError when the record does not replay.
std::vector<DisputeEvent> dispute_events(std::span<const DisputeInput> inputs);

/// The events in a referee's log or `tribunal demo`'s output: lines holding "round N: TEXT" (the
/// referee's log, text or JSON lines: docs/running.md, "Logs") or "[round N] TEXT" (the demo). Other lines
/// are skipped; the phase is not in a log and is set from the text's "level K".
std::vector<DisputeEvent> parse_dispute_log(std::istream& log);

/// The loss tensor of every checkpoint in `dir` (a provider's STORE/<job_id>/), in step order. Throws
/// EngineError naming a checkpoint file that cannot be read.
std::vector<LossPoint> read_checkpoint_losses(const std::filesystem::path& dir);

/// A listed dispute's outcome, read from its signed verdict (absent while it is undecided).
struct DisputeOutcome {
  std::string reason;                  ///< reason_name(verdict.reason), e.g. "wrong_output"
  std::vector<std::string> winners;    ///< the standing claims' provider keys (hex)
  std::vector<std::string> losers;     ///< the convicted claims' provider keys (hex)
  std::vector<std::string> endpoints;  ///< both claims' endpoints, in claim order
  int level = 0;                       ///< where the game ended (1, 2 or 3)
  uint64_t step = 0, node = 0;         ///< the located step (level ≥ 2) and node (level 3)
  std::string op;                      ///< the located node's op (level 3)
  uint32_t rounds = 0;                 ///< questions asked
};

/// The outcome a verdict envelope states (its signature is not checked here). Throws ProtocolError
/// when it does not open or is not a verdict.
DisputeOutcome dispute_outcome(const std::vector<uint8_t>& verdict);

/// The referee's /disputes page: its most recent disputes with their outcomes (`outcomes[i]` for
/// `disputes[i]`, absent for an open one; may be shorter), each linking to /disputes/<id hex>.
std::string dispute_list_html(std::span<const DisputeListing> disputes,
                              std::span<const std::optional<DisputeOutcome>> outcomes = {});

/// Where an undecided dispute's game stands now (the referee's live view, for /disputes.json).
struct DisputeProgress {
  Phase phase = Phase::Checkpoints;
  uint32_t round = 0;       ///< the open question round (1, 2, …)
  uint64_t lo = 0, hi = 0;  ///< the leaf range [lo, hi) the level's descent narrows (descents only)
  uint64_t leaves = 0;      ///< the level's leaves (Game::leaves_at_level; 0 outside the descents)
};

/// The same list as JSON (/disputes with `Accept: application/json`, or /disputes.json): {"disputes":
/// [{"id", "state": "open"|"decided", "decided_at" (Unix seconds or null), "inputs", "outcome": null |
/// {"reason", "winners", "losers", "endpoints", "level", "step", "node", "op", "rounds"}, "progress":
/// null | {"phase", "level", "round", "range": [lo, hi] | null, "leaves"}}]}. `progress[i]`, when
/// given, is the live state of open dispute `disputes[i]`: its game phase (`checkpoints`,
/// `interval_commit`, `steps`, `step_commit`, `nodes`, `open_records`, `open_inputs`, `open_log`,
/// `reexecute`), its level (1 checkpoints, 2 steps, 3 nodes and what follows them), the open round and,
/// in a descent, the leaf range left of the level's `leaves`.
std::string dispute_list_json(std::span<const DisputeListing> disputes,
                              std::span<const std::optional<DisputeOutcome>> outcomes = {},
                              std::span<const std::optional<DisputeProgress>> progress = {});

/// Every HTML page here is self-contained: true when `html` names no external resource (no
/// "http://", "https://" or "//" URL in a src, href or url()).
bool is_self_contained(const std::string& html);

}  // namespace tribunal
