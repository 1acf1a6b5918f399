// The dispute game as a pure state machine (sans-I/O; docs/protocol.md, "The game"; docs/architecture.md).
//
// The referee asks both parties the same questions and compares. At every level the two parties'
// Merkle trees are descended together: both open the children of the current node; the referee
// goes left when the left children differ and right otherwise, so it reaches the *first* leaf where
// the trees differ, and every leaf before it is agreed (equal subtree hashes). Level 1 descends the
// trajectory tree to a checkpoint interval, level 2 the interval's per-step tree to one step t,
// level 3 the tree of step t's node records (plus state_hash(t+1) as a last leaf) to one node. The
// referee then checks the node against the job's graph and the agreed producers and, if both
// parties' inputs are right, fetches the inputs (protocol/input_opening.h checks and reassembles
// them), has the node re-executed and compares outputs. Where the oracle knows a part of the node's op
// (StepOracle::part_inputs) and the first differing output spans several 64 KiB chunks, level 4 first
// descends that output's chunk tree to one chunk, and only what it reads is opened and re-executed.
//
// The game never touches a socket, a clock or a file: on_message/on_tick/on_reexecuted/on_resume take
// the input and the current time and return actions. Replaying the same inputs rebuilds the same
// state, which is what the referee's durable store relies on (referee/store.h): it records the inputs
// that changed the game and replays them after a restart.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/codec.h"
#include "protocol/input_opening.h"
#include "protocol/messages.h"
#include "protocol/terms.h"

namespace tribunal {

/// Where an input of a node comes from, as the referee knows it from the job's graph.
struct InputSpec {
  enum class Source : uint8_t { State, Data, Constant, Node };
  Source source = Source::Node;
  uint64_t index = 0;      ///< state tensor index, data table index, or producer node index
  uint32_t slot = 0;       ///< producer output slot
  Digest constant_hash{};  ///< Constant: the tensor leaf of the constant
  /// State and Node: the value's shape in the job's graph (empty: a scalar). An opened tensor must
  /// have exactly this shape, checked at its first chunk before any byte of it is kept.
  std::vector<int64_t> shape;
};

/// One node of step t's graph: what its record must say.
struct NodeSpec {
  uint8_t op = 0;
  std::vector<uint8_t> attrs;  ///< canonical attribute bytes
  std::vector<InputSpec> inputs;
  /// Output hashes of the record: the node's outputs, plus its rounding log's leaf as the last one
  /// when `rounding_log` is set (no input ever refers to that slot).
  uint32_t outputs = 0;
  /// The shapes of the node's outputs (not the log slot) in the job's graph, when the oracle gives
  /// them: level 4 descends an output's chunk tree only when its shape is known.
  std::vector<std::vector<int64_t>> output_shapes;
  std::vector<uint64_t> data_rows;  ///< data-set rows a node with a Data input reads (gather indices)
  /// A rounding-log job's node (docs/protocol.md, "Rounding-log jobs"): its record's last output hash
  /// is the tensor leaf of its rounding log, DType::Trits of shape [log_values], which each party
  /// opens (QueryKind::OpenLog) before re-execution.
  bool rounding_log = false;
  uint64_t log_values = 0;  ///< decisions in the log: the node's output elements
};

/// The graph of step t as the referee derives it from the job (no training needed).
struct StepSpec {
  std::vector<NodeSpec> nodes;
  uint32_t state_inputs = 0;
  std::vector<InputSpec> state_outputs;  ///< the next state's tensors, canonical order
};

/// The flat (row-major) elements [first, end) of a tensor.
struct ElementSpan {
  uint64_t first = 0;
  uint64_t end = 0;
  bool operator==(const ElementSpan&) const = default;
};

/// Supplies step graphs and the initial state; implemented over the engine by the referee (a pure
/// function of the job).
class StepOracle {
 public:
  virtual ~StepOracle() = default;
  virtual StepSpec step_spec(uint64_t step) const = 0;
  /// state_hash(0) of the job, derived by the referee: asked only when the trajectories differ in
  /// their first state, never taken from a party or the opener.
  virtual Digest initial_state_hash() const = 0;
  /// What re-executing elements `out` of output `slot` of node `node` of step `step` reads: per node
  /// input (in order) the elements of it, when the node's op computes such a range from ranges of its
  /// inputs (a part, docs/numerics.md "Parts of an op"); nullopt when only the whole node computes it.
  /// Level 4 of the game is played only where this gives a part (docs/protocol.md, "The game").
  virtual std::optional<std::vector<ElementSpan>> part_inputs(uint64_t step, uint64_t node, uint32_t slot,
                                                              ElementSpan out) const {
    (void)step, (void)node, (void)slot, (void)out;
    return std::nullopt;
  }
};

/// A time on the referee's clock: milliseconds of a steady clock. The game never reads a clock: every
/// call takes the time of its input, so a replay of the same inputs is the same game.
using GameTime = std::chrono::time_point<std::chrono::steady_clock, std::chrono::milliseconds>;

/// Everything fixed when a dispute opens.
struct GameParams {
  Digest job_id{};
  Digest dispute_id{};
  uint64_t steps = 0;   ///< T
  uint64_t stride = 0;  ///< s
  Digest dataset_root{};
  uint64_t dataset_samples = 0;  ///< N, the size of the tree under dataset_root
  uint64_t label_width = 0;      ///< 0: class-id labels; L: label sequences of L values
  uint64_t features = 0;         ///< values per sample (sizes an opening of samples)
  std::array<Claim, 2> claims{};
  DisputeTerms terms;  ///< what each question may take (the job's [dispute] table)
  /// A rounding-log job with roles (docs/protocol.md, "Rounding-log jobs"): the party (0 or 1) whose
  /// claim is the trainer's, the other one an auditor that replayed the trainer's logs; the referee
  /// derives it from the job and the claims' signed endpoints. At the located node only the trainer
  /// opens its log, and it decides for both parties. −1: independent trainers, each opens its own.
  int trainer = -1;
  /// The trainer's claim key (trainer ≥ 0): what an auditor's LogEvidence must be signed by.
  std::array<uint8_t, 32> trainer_key{};
};

/// A question to send to one party; it must answer before `deadline`: the time it was asked plus
/// the party's clock (query.clock).
struct SendQuery {
  int party = 0;
  Query query;
  GameTime deadline{};
};

/// The referee must re-execute one node: run op `spec.op` with `spec.attrs` on `inputs` (in the
/// node's input order; a Data input arrives as `samples`) and call on_reexecuted with the hashes of
/// the outputs (tensor leaves, in output order).
struct Reexecute {
  uint64_t step = 0;
  uint64_t node = 0;
  NodeSpec spec;
  /// One entry per node input: shape and float32 values (empty for Data and Constant inputs).
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<float>> inputs;
  /// For a Data input: the opened samples, in data_rows order.
  std::vector<std::vector<float>> sample_inputs;
  std::vector<std::vector<float>> sample_labels;  ///< one per sample: 1 value, or label_width values
  /// Level 4 located chunk `chunk` of output `slot` (elements `out` of it): only those elements are
  /// computed, from the opened chunks of each input, which start at element `input_first[i]` of input
  /// i (inputs[i] holds the chunks that cover StepOracle::part_inputs' range). The re-execution's result
  /// is then that chunk's hash (tensor_chunk_hash), one per party. nullopt: the whole node.
  struct Part {
    uint32_t slot = 0;
    uint64_t chunk = 0;
    ElementSpan out;
    std::vector<uint64_t> input_first;
  };
  std::optional<Part> part;
  /// spec.rounding_log: each party's opened rounding log of the node, packed trits (⌈log_values / 5⌉
  /// bytes, proven against the party's own record; their digits are checked when unpacked). Empty
  /// otherwise. The referee re-executes once per party (Game::on_reexecuted with PartyReexecution).
  /// In a job with roles only the trainer's log is opened: the auditor's entry stays empty.
  std::array<std::vector<uint8_t>, 2> logs;
};

/// The re-execution's result for one party. RepOps: the same outputs for both parties. Rounding-log:
/// the referee's float64 outputs rounded by the party's own log (round_replayed), or why the log is
/// refused.
struct PartyReexecution {
  /// Tensor leaves of the node's outputs, in order (no log slot); for a Reexecute::part, the one
  /// chunk's hash.
  std::vector<Digest> outputs;
  /// Non-empty: a decision of the party's log is not allowed for the referee's float64 value (or the
  /// log does not unpack): the party loses with BadRoundingLog, `outputs` is not looked at.
  std::string bad_log;
};

/// The game ended.
struct Finished {
  Verdict verdict;  ///< unsigned; the referee signs it
};

/// A message from a party was refused; game state is unchanged.
struct Rejected {
  int party = 0;
  std::string reason;
  /// The message would count against its sender, but its signature was not checked (on_message with
  /// `signed_by_sender` false): check it, then submit it again, or drop it as not the sender's.
  bool needs_signature = false;
  /// Nothing wrong with it: it carries a piece of the opening the game already holds (the other
  /// party sent it first). Not worth a log line or a refusal count.
  bool redundant = false;
};

using Action = std::variant<SendQuery, Reexecute, Finished, Rejected>;

/// True when `actions` (returned by Game::on_message) is a refusal: exactly one Rejected action.
/// A refused message leaves the game unchanged; any other result of on_message changed its state
/// (an accepted answer, a loss, a timeout found on the way), so a durable referee must record it.
inline bool is_refusal(const std::vector<Action>& actions) {
  return actions.size() == 1 && std::holds_alternative<Rejected>(actions.front());
}

/// Something the game did that logs and reports tell, in the order it did it (taken with
/// Game::poll_event, as quinn-proto's Connection::poll). It asks nothing of the referee: the actions
/// carry every duty.
struct GameEvent {
  enum class Kind : uint8_t {
    Round,    ///< a new question round was put to both parties: `query` (its round number set)
    Located,  ///< a level's descent ended at `index`: level 1 (Level::Checkpoints) the checkpoint
              ///< interval k, level 2 (Level::Steps) the step t, level 3 (Level::Nodes) the node (the
              ///< step's node count when every record agrees and the next states differ), level 4
              ///< (Level::Chunks) the chunk of the located node's output Game::located_part() names
  };
  Kind kind = Kind::Round;
  Level level = Level::Checkpoints;
  uint64_t index = 0;
  Query query;  ///< Round only
};

/// What the game is doing now (for logs and demos). A durable referee stores each event's phase by
/// its number (referee/store.h): a number never changes meaning, a new phase takes the next one.
enum class Phase : uint8_t {
  Checkpoints = 0,  ///< level 1 descent
  IntervalCommit = 1,
  Steps = 2,  ///< level 2 descent
  StepCommit = 3,
  Nodes = 4,  ///< level 3 descent
  OpenRecords = 5,
  OpenInputs = 6,
  OpenLog = 7,  ///< rounding-log jobs: each party opens its own log of the located node
  Reexecute = 8,
  Done = 9,
  Chunks = 10,  ///< level 4 descent: one output's chunk tree, inside the located node (after OpenRecords)
};

class Game {
 public:
  /// `oracle` must outlive the game. Throws ProtocolError if the claims agree or the params are
  /// inconsistent (T, s, claim steps).
  Game(GameParams params, const StepOracle& oracle);

  /// The first questions. Call once, at the start.
  std::vector<Action> start(GameTime now);

  /// A decoded message from party 0 or 1 (the referee maps keys to parties). `signed_by_sender`
  /// false: its signature was not checked (SignatureCheck::DeferTensorChunks), so it may be accepted
  /// (an opened chunk proves itself) but never held against the party: where it would be, the game
  /// refuses it with needs_signature set and stays unchanged.
  std::vector<Action> on_message(int party, const Body& body, GameTime now, bool signed_by_sender = true);

  /// Checks deadlines. Returns no action unless a party forfeited (then Finished): a tick with no
  /// action left the state unchanged.
  std::vector<Action> on_tick(GameTime now);

  /// The referee restarted (or otherwise resumes the game) at `now`: re-issues the open round's
  /// question to every party that still owes an answer, its clock restarted from `now` with the
  /// time it had when asked, so no party forfeits (or is charged) because the referee was down. A partly
  /// received OpenInputs stream is discarded (the party re-sends it whole in answer to the re-issued
  /// question). The round number stays the same; answers already accepted stand. No action once the game is
  /// done.
  std::vector<Action> on_resume(GameTime now);

  /// The open question was written to `party`'s connection at `at` (docs/protocol.md, "Clocks"): its
  /// clock starts then, not when the referee decided to ask, so the referee's own delays (queues,
  /// store commits, a loaded machine) are never charged to the party. Only moves the start later;
  /// ignored unless the party owes an answer. Returns whether it changed the game (then a durable
  /// referee records it before the next input).
  bool on_question_written(int party, GameTime at);

  /// A lost frame is asked for again (docs/protocol.md, "Lost frames"): the open question re-sent to
  /// each party that owes an answer and is due for it — silent since its question was written for
  /// longer than a quarter of the terms' base, at least kReaskSilence (doubling per re-ask, at most the
  /// base), or whose opening stream skipped a piece. Openings ask only for the missing chunks (and the
  /// samples if they are missing). Same round, the party's clock keeps running; the game's decisions do not
  /// change, so nothing needs recording.
  std::vector<SendQuery> reask(GameTime now);
  /// When reask() has something to send next; nullopt when nothing is owed.
  std::optional<GameTime> next_reask() const;

  /// The next event the game made (GameEvent), oldest first; nullopt when none is left.
  std::optional<GameEvent> poll_event();

  /// When on_tick() or reask() has something to do next (docs/protocol.md, "Clocks", "Lost frames"):
  /// the earliest of 1 ms past the deadline of each party the game awaits (on_tick decides a timeout
  /// only past it) and the next re-ask. nullopt once done, or while no party owes an answer.
  std::optional<GameTime> next_deadline() const;
  /// Whether on_tick(now) would find that `party` ran out of time: it owes an answer and `now` is past
  /// its deadline.
  bool overdue(int party, GameTime now) const { return awaiting(party) && now > deadline(party); }

  /// True while `party` owes an answer to the open round (what on_resume would re-issue to it).
  bool awaiting(int party) const {
    return !done() && party >= 0 && party <= 1 && asked_[party] && !party_[party].answer;
  }
  /// The open round's question (valid once start() has been called).
  const Query& current_query() const { return current_; }
  /// The deadline of `party`'s open question: when its clock runs out.
  GameTime deadline(int party) const { return asked_at_[party] + clock_[party]; }

  /// The re-execution's output hashes (tensor leaves), after a Reexecute action, the same for both
  /// parties (RepOps; an empty list when the op refuses the committed inputs: both lose).
  std::vector<Action> on_reexecuted(const std::vector<Digest>& outputs, GameTime now);
  /// The re-execution's result per party (rounding-log jobs: each party's outputs replayed by its own
  /// log). A party whose `bad_log` is set loses with BadRoundingLog, one whose outputs differ from its
  /// record's with WrongOutput; when neither loses in a rounding-log job the game ends undecided with
  /// BothValid (docs/protocol.md, "Rounding-log jobs"). In a job with roles (GameParams::trainer) the
  /// trainer's entry decides for both: its `bad_log` convicts the trainer (BadRoundingLog); otherwise
  /// its `outputs` and its log's leaf are the record both parties owed, and each party whose record's
  /// outputs differ loses with WrongOutput, so the game never ends BothValid. A pure function of its
  /// inputs, like every input of the game, so a replayed game that re-executes again decides the same.
  std::vector<Action> on_reexecuted(const std::array<PartyReexecution, 2>& parties, GameTime now);
  /// The referee could not re-execute the located node for a reason of its own (out of memory, an
  /// internal error), not because of the inputs both parties committed to: the game ends undecided,
  /// reason RefereeFault, with neither winners nor losers. `why` goes into the verdict's detail.
  std::vector<Action> on_reexecution_failed(const std::string& why, GameTime now);
  /// Replay only: the OpenInputs round ended at `now` with every piece taken, as a durable referee's
  /// record says where it keeps the re-execution's outcome instead of the opened bytes (docs/protocol.md,
  /// "Resuming"). The clocks stop as when the last piece arrives, and the Reexecute action comes back
  /// with the node's shapes and no values: its outcome is the record's. No action outside OpenInputs or
  /// at a rounding-log node (whose opened inputs wait for the logs, so its record keeps them).
  std::vector<Action> on_opening_recorded(GameTime now);

  Phase phase() const { return phase_; }
  /// The OpenInputs answer's size on the wire, about (an upper estimate: each tensor's float32 bytes,
  /// plus 2 KiB per 64 KiB chunk and each sample with its proof; docs/protocol.md, "Clocks"). Valid
  /// once the node is located (phase OpenInputs and after).
  uint64_t opening_bytes() const;
  uint32_t rounds() const { return round_; }
  bool done() const { return phase_ == Phase::Done; }
  /// The located position so far (valid once the corresponding level has ended).
  uint64_t located_interval() const { return interval_; }
  uint64_t located_step() const { return step_; }
  uint64_t located_node() const { return node_; }
  /// Level 4: the located node's output slot whose chunk tree is descended, and its chunk count;
  /// nullopt when the game decides the node whole (no part, one chunk, a rounding-log node).
  std::optional<std::pair<uint32_t, uint64_t>> located_part() const {
    if (!part_slot_) return std::nullopt;
    return std::pair{*part_slot_, chunk_count_};
  }
  /// The located chunk (valid once level 4's descent has ended).
  uint64_t located_chunk() const { return chunk_; }
  /// The leaf range being descended at the current level.
  std::pair<uint64_t, uint64_t> range() const { return {lo_, hi_}; }
  /// The leaves of the current level's tree (checkpoints; states of the located interval; the located
  /// step's nodes and its post state); 0 outside the three descents.
  uint64_t leaves_at_level() const;

 private:
  struct PartyState {
    Digest root{};               // root of the current level's tree
    Digest node{};               // hash of the current descent node
    std::optional<Body> answer;  // accepted answer to the current round
    bool lost = false;
    VerdictReason reason = VerdictReason::Timeout;
    std::string detail;
    Digest level1_value{};             // value at the located checkpoint (end of the interval)
    Digest level2_value{};             // value at the located step's end (state_hash(t+1))
    Digest chunk_value{};              // level 4: the hash of the located chunk of the disputed output
    Digest pre_root{};                 // state_hash(t), from the StepCommit
    std::vector<Digest> state_leaves;  // opened leaves of state t, by position in state_indices_
    std::vector<Digest> post_state;    // every leaf of state t+1, when opened (the post state's node)
    std::vector<NodeRecord> records;   // opened records, by position in record_indices_
  };

  Query query(QueryKind kind, Level level) const;  // a query about the current position
  std::vector<Action> ask_both(Query q, GameTime now, std::chrono::milliseconds allowance);
  // Puts `q` to the parties marked in `who` only; the others owe nothing this round.
  std::vector<Action> ask(Query q, GameTime now, std::chrono::milliseconds allowance,
                          std::array<bool, 2> who);
  std::vector<Action> decide_with_trainer_log(const std::array<PartyReexecution, 2>& parties,
                                              const std::string& where);
  std::optional<GameTime> reask_due(int party) const;
  void heard(int party, GameTime now, const Body& body);  // a message of the open round came from `party`
  void stop_clock(int party, GameTime now);               // the referee no longer waits for `party`
  std::vector<Action> advance(GameTime now);
  std::vector<Action> after_descent(GameTime now);
  std::vector<Action> check_records(GameTime now);
  std::vector<Action> open_inputs(GameTime now);
  std::vector<Action> collect_inputs(GameTime now);
  std::vector<Action> inputs_collected(OpenedInputs opened, GameTime now);
  std::vector<Action> collect_log(int party, GameTime now);
  std::vector<Action> take_evidence(int party, const LogEvidence& e, GameTime now);
  std::vector<Action> logs_answered(GameTime now);
  Query question_for(int party) const;                // the open round's question as put to `party`
  const NodeRecord& located_record(int party) const;  // party's opened record of node_
  std::vector<Action> undecided(VerdictReason reason, std::string detail);
  std::vector<Action> finish(VerdictReason reason, std::string detail);
  std::vector<Action> finish_if_lost();
  void lose(int party, VerdictReason reason, std::string detail);
  bool accept(int party, const Body& body, std::string& why);

  Level level_of_phase() const;

  GameParams params_;
  const StepOracle& oracle_;
  std::vector<uint64_t> checkpoints_;  // checkpoint steps 0, s, …, T
  Phase phase_ = Phase::Checkpoints;
  uint32_t round_ = 0;
  Query current_{};
  std::array<bool, 2> asked_{};
  std::array<GameTime, 2> asked_at_{};                // when the open question was put to each party
  std::array<std::chrono::milliseconds, 2> clock_{};  // time left on each party's clock
  GameTime now_{};                                    // the time of the input being handled
  std::array<PartyState, 2> party_;
  uint64_t lo_ = 0, hi_ = 0;              // current descent range
  uint64_t interval_ = 0;                 // level 1 leaf k (interval [c_{k−1}, c_k])
  uint64_t step_ = 0;                     // located step t
  uint64_t node_ = 0;                     // located node (or G for the post state)
  std::optional<StepSpec> spec_;          // step t's graph, once located
  std::vector<uint64_t> record_indices_;  // records opened in OpenRecords
  std::vector<uint64_t> state_indices_;   // leaves of state t opened with them (increasing)
  bool post_state_opened_ = false;        // and every leaf of state t+1 (the located leaf is G)
  std::optional<uint32_t> part_slot_;     // level 4: the output whose chunk tree is descended
  uint64_t chunk_count_ = 0;              // its chunks
  uint64_t chunk_ = 0;                    // the located chunk
  std::vector<ElementSpan> part_inputs_;  // what the located chunk reads of each node input
  InputOpening opening_;  // the OpenInputs round, both parties': what is expected, what has arrived
  std::array<InputOpening, 2> logs_;  // the OpenLog round: each party's own log of node_
  std::optional<Reexecute> pending_;  // rounding-log jobs: the opened inputs, while the logs arrive
  std::optional<Digest> evidence_;    // roles: the trainer's signed leaf of node_ the auditor showed
  // Asking again (reask): not part of any decision, so not recorded or replayed.
  std::array<GameTime, 2> heard_at_{};  // the question written, or the party's last message
  std::array<uint32_t, 2> reasks_{};    // re-asks of the open question since the party was heard
  std::array<std::optional<std::pair<uint32_t, uint32_t>>, 2>
      gap_{};  // a skipped piece before (value, chunk)
  std::array<std::optional<GameTime>, 2> last_reask_{};
  std::deque<GameEvent> events_;  // made, not yet polled
};

/// The first re-ask of a silent party comes this long (or a quarter of the terms' base, if longer)
/// after it was last heard (docs/protocol.md, "Lost frames").
inline constexpr std::chrono::milliseconds kReaskSilence{250};
/// Re-asks for a gap in an opening stream come at most this often per party.
inline constexpr std::chrono::milliseconds kReaskGapInterval{100};
/// The most chunk ranges one re-ask lists (the rest are asked for by the next one).
inline constexpr size_t kReaskMaxRanges = 1024;

}  // namespace tribunal
