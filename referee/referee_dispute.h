// One dispute as the referee plays it: checks the opening (two claims, signed by two different
// providers, for the job the referee re-derives), drives the Game, checks every envelope's sender,
// context and sequence before the game sees it, re-executes the located node with RepOps, and signs
// the verdict. Sans-I/O (docs/architecture.md), in quinn-proto's shape: every handler takes one input
// and returns a RefereeDispute::Step — what to commit, what to send, what happened — and never calls
// back; nodes/referee_node.cpp moves the envelopes over WebSocket and the inputs into the store.
//
// Event sourcing (docs/protocol.md "Resuming"): every input that changes the dispute — the opening, each
// envelope the game accepted (a party's opening of inputs once it completes or decides something), each tick
// that decided something, each resume — is returned in its Step's `commit`, so a durable referee commits it
// before it sends the Step's messages (referee/store.h) and can rebuild the dispute with replay() after a
// crash. The referee's own sequence numbers are a function of those inputs, so a replayed dispute
// continues them where the lost process left off. An opening whose node is re-executed at once (no
// rounding log) is recorded as its re-execution's outcome, not its bytes (referee/opened_record.h).
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
#include <utility>
#include <vector>

#include "dispute/job_oracle.h"
#include "engine/cost.h"
#include "engine/data_registry.h"
#include "engine/job.h"
#include "protocol/game.h"
#include "protocol/wire.h"
#include "referee/opened_record.h"

namespace tribunal {

/// Limits on what an opening may ask the referee to hold.
inline constexpr uint64_t kMaxDisputeSamples = uint64_t{1} << 26;
inline constexpr uint64_t kMaxDisputeFeatures = uint64_t{1} << 20;
inline constexpr uint64_t kMaxDisputeCheckpoints = uint64_t{1} << 20;

/// The referee operator's policy on what one dispute may cost (docs/protocol.md, "Bounds on a
/// dispute's cost"), checked against the job's derived DisputeCost when a dispute is opened.
struct DisputeLimits {
  int64_t max_parameters = int64_t{1} << 27;  ///< the model's parameters (state_hash(0) is derived from them)
  uint64_t max_reexecution_work =
      uint64_t{1} << 34;  ///< node_reexecution_work of the heaviest node (multiply-adds or elements, by mode)
  uint64_t max_opened_bytes = uint64_t{1} << 30;  ///< input bytes of the node with the largest inputs (1 GiB)
  /// Bytes held to re-execute the node that needs the most (engine/cost.h node_memory: in a
  /// rounding-log job its float64 re-execution's), 4 GiB.
  uint64_t max_node_memory = uint64_t{1} << 32;
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
  /// The initial weights this referee holds (DataRegistry::add_weights; its data sets are not used):
  /// a dispute about a job with model.init is refused, naming the weights, unless they are
  /// registered here, since state 0 and the job id derive from their bytes (engine/init_weights.h).
  DataRegistry weights;
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
    /// The input opening of a node without a rounding log completed at `at` and the node was
    /// re-executed: `envelope` holds its OpenedRecord (encode_opened_record), recorded in place of the
    /// opening's pieces; always last, with the verdict.
    Opened = 6,
  };
  Kind kind = Kind::Open;
  int party = 0;
  std::vector<uint8_t> envelope;  ///< Open and Envelope: the envelope as received; Opened: its record
  GameTime at{};                  ///< the referee's clock when the input arrived
  bool operator==(const DisputeInput&) const = default;
};

/// A structured event for logs and live displays: one per question round, one per narrowing (level
/// hand-off) and one for the verdict.
struct DisputeEvent {
  Phase phase;
  uint32_t round = 0;
  std::string text;  ///< one line, e.g. "level 1: checkpoints [2, 3) differ"
  bool operator==(const DisputeEvent&) const = default;
};

/// What a replay saw besides its events, for the dispute report (referee/report.h): the game's phase
/// after each recorded input, at that input's time, and the located node's opened inputs.
struct ReplayTrace {
  std::vector<std::pair<GameTime, Phase>> phases;  ///< one per recorded input, in order
  /// The located node's opened inputs as re-executed: the record's Opened summary, or computed from the
  /// opened pieces of a record that keeps them (a rounding-log node's, or an older referee's). The
  /// recomputed outputs are in the events ("re-executed node N: output leaves …"); a report that needs
  /// only this trace replays with a DisputeOptions::reexecute_hook that throws, so nothing is re-executed.
  std::optional<OpenedSummary> opened;
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
    /// Non-zero for the OpenInputs question (first sent, re-asked or sent again on a new connection):
    /// its answer's size on the wire, about (Game::opening_bytes). It makes the party stream the located
    /// node's inputs, so the node bounds these across its disputes (nodes/opening_budget.h).
    uint64_t opening_bytes = 0;
  };

  /// What one handler call asks of its driver, in this order (write-ahead, docs/protocol.md
  /// "Resuming"): commit `commit` to the durable store, in order, `verdict` with the last input; only
  /// once that succeeded send `send` (if the commit throws, nothing is sent and the dispute stops);
  /// then log or keep `events`.
  struct Step {
    /// The inputs that changed the dispute, in the order replay() needs them: the Open (start), the
    /// accepted envelope (on_envelope; with it, first, the pieces of an opening it completed — or,
    /// where that opening's node was re-executed in the same call, one Opened input in place of them
    /// all), the deciding Tick, the Resume, the Asked (on_written). Empty when nothing durable changed.
    std::vector<DisputeInput> commit;
    std::vector<Outgoing> send;  ///< the envelopes to deliver, in order
    /// What happened, in order (rounds, narrowings, refusals, re-executions, the verdict).
    std::vector<DisputeEvent> events;
    /// The signed verdict envelope when this step decided the dispute (then `commit` is not empty).
    std::optional<std::vector<uint8_t>> verdict;
    /// on_envelope only: why the envelope was refused before the game saw it (wrong key, another
    /// dispute, stale sequence, a deferred signature that does not verify); empty otherwise.
    std::string refused;
    /// on_envelope only: the game refused the envelope (a Rejected action; its reason is in `events`).
    bool rejected = false;
  };

  /// The first questions; also the DisputeOpen forwarded to both providers, so they know the job.
  /// Commits the Open input.
  Step start(GameTime now);

  /// An envelope received from a party's connection, opened (decoded, and signature-checked unless
  /// deferred) once by the caller. Envelopes not signed by that party's claim key, for another
  /// dispute, or with a stale sequence number are refused without effect (Step::refused). An envelope
  /// opened with SignatureCheck::DeferTensorChunks whose chunk the game would hold against the party
  /// has its signature checked here first — the only second look at an envelope — and is refused if
  /// it does not verify. Commits an Envelope input when the game accepted it: the envelope's bytes
  /// move into it (Envelope::bytes, as received), so a caller hands over an envelope it no longer needs.
  Step on_envelope(int party, Envelope env, GameTime now);

  /// Checks deadlines; commits a Tick input when a party forfeited. Otherwise asks again what a
  /// party owes and is due for (Game::reask; docs/protocol.md, "Lost frames"): not an input, nothing
  /// to commit. The re-asks are numbered between the question's sequence number and the next one's
  /// (kReaskSequenceBits), so the sequence numbers of every recorded input's messages stay a function
  /// of the record.
  Step on_tick(GameTime now);

  /// The question with sequence `question` (an Outgoing's) was written to `party`'s connection at
  /// `at`: the party's clock starts then (Game::on_question_written). Commits an Asked input while the
  /// party owes an answer to it; sends nothing.
  Step on_written(int party, uint64_t question, GameTime at);

  /// When on_tick() has something to do next (Game::next_deadline); nullopt once done.
  std::optional<GameTime> next_wakeup() const;

  /// Resumes the dispute after a restart: re-issues the open questions with fresh (higher) sequence
  /// numbers and clocks restarted from `now` (Game::on_resume). Commits a Resume input.
  Step resume(GameTime now);

  /// What a (re)connected provider connection must receive: the DisputeOpen, then the question the
  /// party still owes an answer to, if any, as it was last sent (same bytes and sequence: the
  /// provider's new connection is a new session). Nothing once the dispute is done.
  std::vector<Outgoing> reconnect(int party) const;

  /// Rebuilds a dispute from its recorded inputs (the first must be its Open): feeds them through the
  /// same handlers and drops what they would send (the lost process sent it; resume() re-issues what is
  /// still open), so the same inputs give the same game, the same referee sequence numbers and the
  /// same verdict (an Opened input gives the recorded re-execution's outcome to the game instead of
  /// re-executing). Questions are not signed while replaying (nothing is sent). Throws ProtocolError
  /// naming the input if the record does not replay (an envelope the game now refuses, an Open that is
  /// not first). With `events`, the events the dispute made when it was played are appended to it
  /// (refusals of envelopes that were never recorded aside).
  static std::unique_ptr<RefereeDispute> replay(const KeyPair& referee_key,
                                                std::span<const DisputeInput> inputs,
                                                DisputeOptions options = {},
                                                std::vector<DisputeEvent>* events = nullptr,
                                                ReplayTrace* trace = nullptr);

  bool done() const { return verdict_envelope_.has_value(); }
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
  /// The last sequence number the referee gave a message of this dispute (re-asks aside: see on_tick).
  uint64_t sequence() const { return sequence_; }
  /// The client's DisputeOpen envelope.
  const std::vector<uint8_t>& open_envelope_bytes() const { return open_bytes_; }
  /// Who signed the DisputeOpen (the opening client's key).
  const PublicKey& opener() const { return opener_; }

 private:
  // A handler's result before its questions are signed: replay() drops it unsigned, the public
  // handlers seal it (sealed()). A Draft with a query is a message numbered `sequence`: a question
  // asked the first time (`question`) or a re-ask.
  struct Draft {
    int party = 0;
    uint64_t sequence = 0;
    bool question = false;
    std::optional<Query> query;     // a message to sign
    std::vector<uint8_t> envelope;  // else an envelope already sealed (the opening, the verdict)
  };
  struct Turn {
    std::vector<DisputeInput> commit;
    std::vector<Draft> send;
    std::vector<DisputeEvent> events;
    bool decided = false;
    std::string refused;
    bool rejected = false;
    std::optional<OpenedRecord> opened;  // the node re-executed (without a rounding log): its record
  };
  Turn start_turn(GameTime now);
  Turn envelope_turn(int party, Envelope&& env, GameTime now);
  Turn tick_turn(GameTime now);
  Turn written_turn(int party, uint64_t question, GameTime at);
  Turn resume_turn(GameTime now);
  Step sealed(Turn turn);

  void handle(Turn& turn, std::vector<Action> actions, GameTime now);
  std::vector<Action> reexecute(Turn& turn, const Reexecute& rx, GameTime now);
  ReexecutionOutcome run_reexecution(const Reexecute& rx) const;
  uint64_t next_sequence();
  void take_game_events(Turn& turn);
  void emit(Turn& turn, std::string text) const;
  uint64_t reask_sub_ = 0;                       // re-asks sealed since the last next_sequence
  std::array<uint64_t, 2> question_sequence_{};  // the open question's sequence, per party

  KeyPair key_;
  std::function<void(int)> reexecute_hook_;
  ReplayTrace* trace_ = nullptr;  // a replay's, when asked for (keeps the re-execution's inputs)
  Digest job_id_{}, dispute_id_{};
  std::vector<uint8_t> open_bytes_;
  DisputeOpen opening_msg_;  // the opening, decoded once (the verdict carries it)
  PublicKey opener_{};
  std::array<PublicKey, 2> party_keys_{};
  std::array<uint64_t, 2> last_sequence_{};
  std::vector<std::string> providers_;
  JobSpec job_;
  DisputeCost cost_;
  std::unique_ptr<JobOracle> oracle_;
  std::unique_ptr<Game> game_;
  uint64_t sequence_ = 0;
  bool started_ = false;
  std::array<std::vector<uint8_t>, 2> last_query_;  // the last question sent to each party
  std::vector<DisputeInput> opening_;               // OpenInputs envelopes taken, not yet recorded
  OpenedSummary opened_;                            // what the report keeps of the opened inputs
  std::optional<ReexecutionOutcome> recorded_;      // a replayed Opened input's, for reexecute()
  Verdict verdict_;
  std::optional<std::vector<uint8_t>> verdict_envelope_;
};

/// Checks a verdict envelope offline: decodes it, verifies that `referee` signed it, that its dispute
/// id is the hash of the opening it carries, that the opening's job and data set give its job id, and
/// that the claims inside are validly signed Claims for that job. The referee's key is required: a
/// signature by an unknown key proves nothing (anyone can sign a verdict). Throws ProtocolError (or
/// EngineError for a job that does not parse) saying what is wrong; returns the verdict. A job with
/// model.init needs its weights in `weights` (their hash is in the job id): without them, or with
/// other bytes, the job id cannot be checked and ProtocolError says so.
Verdict verify_verdict(std::span<const uint8_t> envelope, const PublicKey& referee,
                       const DataRegistry* weights = nullptr);

}  // namespace tribunal
