// One dispute as the referee plays it: checks the opening (two claims, signed by two different
// providers, for the job the referee re-derives), drives the Game, checks every envelope's sender,
// context and sequence before the game sees it, re-executes the located node with RepOps, and signs
// the verdict. Transport-agnostic: it takes envelopes and returns envelopes (nodes/referee_node.cpp
// moves them over WebSocket).
//
// Event sourcing (docs/protocol.md "Resuming"): every input that changes the dispute — the opening, each
// envelope the game accepted (a party's opening of inputs once it completes or decides something), each tick
// that decided something, each resume — is reported through `on_input` before the messages it causes are
// returned, so a durable referee commits it first (referee/store.h) and can rebuild the dispute with replay()
// after a crash. The referee's own sequence numbers are a function of those inputs, so a replayed dispute
// continues them where the lost process left off.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dispute/job_oracle.h"
#include "engine/cost.h"
#include "engine/job.h"
#include "protocol/game.h"
#include "protocol/wire.h"

namespace tribunal {

/// Limits on what an opening may ask the referee to hold.
inline constexpr uint64_t kMaxDisputeSamples = uint64_t{1} << 26;
inline constexpr uint64_t kMaxDisputeFeatures = uint64_t{1} << 20;
inline constexpr uint64_t kMaxDisputeCheckpoints = uint64_t{1} << 20;

/// The referee operator's policy on what one dispute may cost (docs/protocol.md, "Bounds on a
/// dispute's cost"), checked against the job's derived DisputeCost when a dispute is opened.
struct DisputeLimits {
  int64_t max_parameters = int64_t{1} << 27;  ///< the model's parameters (state_hash(0) is derived from them)
  uint64_t max_reexecution_work = uint64_t{1}
                                  << 34;  ///< node_work of the heaviest node (multiply-adds or elements)
  uint64_t max_opened_bytes = uint64_t{1} << 30;  ///< input bytes of the node with the largest inputs (1 GiB)
  /// Nodes of one step graph: what building it (O(nodes)) and holding it cost, and the level-3
  /// bisection domain. 65536 is far above the shipped jobs (at most a few hundred, sharded ones
  /// about 1000) and far below a many-shard graph (16384 shards of a tiny MLP: 163840).
  uint64_t max_graph_nodes = uint64_t{1} << 16;
};

/// Throws ProtocolError saying which term of `cost` exceeds which limit, and by how much.
void check_dispute_cost(const DisputeCost& cost, const DisputeLimits& limits);

/// How the referee plays one dispute. Its time terms are not here: they are the job's (JobSpec::
/// dispute), which both providers signed.
struct DisputeOptions {
  /// Test hook: called before each re-execution attempt (1, 2, …); an exception it throws stands for
  /// an internal failure of the referee (tests/nodes: a bad_alloc must convict no one).
  std::function<void(int attempt)> reexecute_hook;
  /// The operator's limits on a new dispute's cost: when set, the constructor derives the cost from
  /// the opening's job text (engine/cost.h) and checks it right after the TOML parses, before it
  /// checks a signature, builds a graph or computes anything of the job (docs/protocol.md, "Bounds
  /// on a dispute's cost"). Unset for a replay: a recorded dispute was admitted when it was opened.
  std::optional<DisputeLimits> limits;
};

/// Low bits of the referee's sequence numbers that count the re-asks of one question: the k-th
/// message the referee signs for recorded inputs has sequence k · 2^12, its re-asks k · 2^12 + 1, ….
inline constexpr int kReaskSequenceBits = 12;

/// Re-execution attempts before a dispute ends undecided with VerdictReason::RefereeFault.
inline constexpr int kReexecuteAttempts = 3;

/// One input that changed a dispute, in the order the dispute saw it: what the durable store
/// records and replay() consumes.
struct DisputeInput {
  enum class Kind : uint8_t {
    Open = 1,      ///< the client's DisputeOpen envelope (`envelope`), started at `at`; always first
    Envelope = 2,  ///< an envelope from `party` (0 or 1) that the game accepted
    Tick = 3,      ///< a clock check at `at` that changed the game (someone forfeited)
    Resume = 4,    ///< the referee resumed the dispute at `at` (Game::on_resume)
    Asked = 5,  ///< the open question was written to `party`'s connection at `at` (Game::on_question_written)
  };
  Kind kind = Kind::Open;
  int party = 0;
  std::vector<uint8_t> envelope;
  GameTime at{};  ///< the referee's clock when the input arrived
  bool operator==(const DisputeInput&) const = default;
};

/// A structured event for logs and live displays: one per question round, one per narrowing (level
/// hand-off) and one for the verdict.
struct DisputeEvent {
  Phase phase;
  uint32_t round = 0;
  std::string text;  ///< one line, e.g. "level 1: checkpoints [2, 3) differ"
};

class RefereeDispute {
 public:
  /// `open` is the client's DisputeOpen envelope. Throws ProtocolError/EngineError if the claims are
  /// not two valid signed Claims by two different keys, each naming its endpoint, for the job and data
  /// set the opening describes, or the envelope is not addressed to dispute_id(opening).
  RefereeDispute(const KeyPair& referee_key, const Envelope& open, DisputeOptions options = {});

  /// An envelope to deliver to party 0 or 1.
  struct Outgoing {
    int party;
    std::vector<uint8_t> envelope;
    /// Non-zero for a question sent the first time: its sequence number, to report to on_written()
    /// once the envelope has been written to the party's connection.
    uint64_t question = 0;
  };

  /// The first questions; also the DisputeOpen forwarded to both providers, so they know the job.
  /// Reports an Open input.
  std::vector<Outgoing> start(GameTime now);

  /// An envelope received from a party's connection. Envelopes not signed by that party's claim key,
  /// for another dispute, or with a stale sequence number are refused without effect (returned in
  /// `refused`). An envelope opened with SignatureCheck::DeferTensorChunks whose chunk the game would
  /// hold against the party has its signature checked first, and is refused if it does not verify.
  /// Reports an Envelope input when the game accepted it.
  std::vector<Outgoing> on_envelope(int party, const Envelope& env, GameTime now,
                                    std::string* refused = nullptr);

  /// Checks deadlines; reports a Tick input when a party forfeited. Otherwise asks again what a
  /// party owes and is due for (Game::reask; docs/protocol.md, "Lost frames"): not an input, nothing
  /// is reported. The re-asks are numbered between the question's sequence number and the next one's
  /// (kReaskSequenceBits), so the sequence numbers of every recorded input's messages stay a function
  /// of the record.
  std::vector<Outgoing> on_tick(GameTime now);

  /// The question with sequence `question` (an Outgoing's) was written to `party`'s connection at
  /// `at`: the party's clock starts then (Game::on_question_written). Reports an Asked input while the
  /// party owes an answer to it.
  void on_written(int party, uint64_t question, GameTime at);

  /// When on_tick() has something to do next: the earliest deadline (plus 1 ms) or re-ask.
  std::optional<GameTime> next_wakeup() const;

  /// Resumes the dispute after a restart: re-issues the open questions with fresh (higher) sequence
  /// numbers and clocks restarted from `now` (Game::on_resume). Reports a Resume input.
  std::vector<Outgoing> resume(GameTime now);

  /// What a (re)connected provider connection must receive: the DisputeOpen, then the question the
  /// party still owes an answer to, if any, as it was last sent (same bytes and sequence: the
  /// provider's new connection is a new session). Nothing once the dispute is done.
  std::vector<Outgoing> reconnect(int party) const;

  /// Rebuilds a dispute from its recorded inputs (the first must be its Open): the same inputs give
  /// the same game, the same referee sequence numbers and the same verdict. No input is reported and
  /// no event emitted while replaying. Throws ProtocolError naming the input if the record does not
  /// replay (an envelope the game now refuses, an Open that is not first). With `events`, the events
  /// the dispute emitted when it was played are emitted again to it (a report's rounds).
  static std::unique_ptr<RefereeDispute> replay(const KeyPair& referee_key,
                                                std::span<const DisputeInput> inputs,
                                                DisputeOptions options = {},
                                                std::function<void(const DisputeEvent&)> events = {});

  /// Receives each input that changed the dispute, after the game took it and before its outgoing
  /// messages are returned (write-ahead: a durable referee commits it here; if this throws, the
  /// exception propagates and the messages must not be sent). `verdict` is the signed verdict
  /// envelope when this input ended the dispute, else null.
  std::function<void(const DisputeInput& input, const std::vector<uint8_t>* verdict)> on_input;

  bool done() const { return verdict_envelope_.has_value(); }
  /// Whether the game refused the envelope of the last on_envelope call (a Rejected action).
  bool refused_last() const { return refused_by_game_; }
  const Digest& dispute_id() const { return dispute_id_; }
  const Digest& job_id() const { return job_id_; }
  /// The signed verdict envelope, once done.
  const std::vector<uint8_t>& verdict_envelope() const { return *verdict_envelope_; }
  const Verdict& verdict() const { return verdict_; }
  /// The providers' endpoints, each from its own signed claim (never from the opener).
  const std::vector<std::string>& providers() const { return providers_; }
  const Game& game() const { return *game_; }
  const JobOracle& oracle() const { return *oracle_; }
  /// What this dispute can cost the referee, derived from its job text (engine/cost.h; no graph is built).
  const DisputeCost& cost() const { return cost_; }
  /// The last sequence number the referee signed in this dispute (re-asks aside: see on_tick).
  uint64_t sequence() const { return sequence_; }
  /// The client's DisputeOpen envelope.
  const std::vector<uint8_t>& open_envelope_bytes() const { return open_bytes_; }

  /// Receives every event (DisputeEvent).
  std::function<void(const DisputeEvent&)> on_event;

 private:
  std::vector<Outgoing> handle(std::vector<Action> actions, GameTime now);
  std::vector<Action> reexecute(const Reexecute& rx, GameTime now);
  std::vector<uint8_t> seal_next(const Body& body);
  uint64_t reask_sub_ = 0;                       // re-asks sealed since the last seal_next
  std::array<uint64_t, 2> question_sequence_{};  // the open question's sequence, per party
  void emit(std::string text);
  void record(DisputeInput input);

  KeyPair key_;
  std::function<void(int)> reexecute_hook_;
  Digest job_id_{}, dispute_id_{};
  std::vector<uint8_t> open_bytes_;
  std::array<PublicKey, 2> party_keys_{};
  std::array<uint64_t, 2> last_sequence_{};
  std::vector<std::string> providers_;
  JobSpec job_;
  DisputeCost cost_;
  std::unique_ptr<JobOracle> oracle_;
  std::unique_ptr<Game> game_;
  uint64_t sequence_ = 0;
  bool started_ = false;
  bool replaying_ = false;                          // replay(): no signing of queries, no reports
  bool events_while_replaying_ = false;             // replay() with events
  bool refused_by_game_ = false;                    // the last on_envelope was refused by the game
  std::array<std::vector<uint8_t>, 2> last_query_;  // the last question sent to each party
  std::vector<DisputeInput> opening_;               // OpenInputs envelopes taken, not yet recorded
  Verdict verdict_;
  std::optional<std::vector<uint8_t>> verdict_envelope_;
  Phase last_phase_ = Phase::Checkpoints;
  uint32_t last_logged_round_ = 0;
};

/// Checks a verdict envelope offline: decodes it, verifies that `referee` signed it, that its dispute
/// id is the hash of the opening it carries, that the opening's job and data set give its job id, and
/// that the claims inside are validly signed Claims for that job. The referee's key is required: a
/// signature by an unknown key proves nothing (anyone can sign a verdict). Throws ProtocolError (or
/// EngineError for a job that does not parse) saying what is wrong; returns the verdict.
Verdict verify_verdict(std::span<const uint8_t> envelope, const PublicKey& referee);

}  // namespace tribunal
