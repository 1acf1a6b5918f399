// The dispute game. See game.h; docs/protocol.md, "The game".
#include "protocol/game.h"

#include <algorithm>
#include <bit>
#include <set>
#include <tuple>

#include "protocol/envelope.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"
#include "protocol/trajectory.h"

namespace tribunal {
namespace {

// One action, moved in: `return {std::move(rx)};` would build the vector from an initializer_list,
// whose elements are const, and so copy a Reexecute's opened inputs (megabytes) instead of moving them.
std::vector<Action> one_action(Action a) {
  std::vector<Action> out;
  out.push_back(std::move(a));
  return out;
}

// float32 elements in one 64 KiB tensor chunk (docs/commitments.md, "Tensor leaf").
constexpr uint64_t kChunkElements = kTensorChunkBytes / 4;

// The elements of a tensor of `shape` (a shape of the job's graph: no negative dimension).
uint64_t elements_of(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(std::max<int64_t>(d, 0));
  return n;
}

// The chunks [first, end) that hold elements `e` of a float32 tensor (at least one: an empty range is
// in the chunk of its first element).
std::pair<uint64_t, uint64_t> chunks_of(ElementSpan e) {
  const uint64_t first = e.first / kChunkElements;
  return {first, std::max(first + 1, (e.end + kChunkElements - 1) / kChunkElements)};
}

// The elements of chunk `chunk` of a float32 tensor of `shape`.
ElementSpan chunk_elements(const std::vector<int64_t>& shape, uint64_t chunk) {
  return {chunk * kChunkElements, std::min(elements_of(shape), (chunk + 1) * kChunkElements)};
}

// RFC 6962 split of a range of n > 1 leaves: the largest power of two < n.
uint64_t split_of(uint64_t n) {
  return std::bit_floor(n - 1);
}

bool proof_is(const InclusionProof& p, uint64_t index, uint64_t size) {
  return p.index == index && p.size == size;
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Checkpoints:
      return "checkpoints";
    case Phase::IntervalCommit:
      return "interval commit";
    case Phase::Steps:
      return "steps";
    case Phase::StepCommit:
      return "step commit";
    case Phase::Nodes:
      return "nodes";
    case Phase::OpenRecords:
      return "open records";
    case Phase::Chunks:
      return "chunks";
    case Phase::OpenInputs:
      return "open inputs";
    case Phase::OpenLog:
      return "open logs";
    case Phase::Reexecute:
      return "re-execution";
    case Phase::Done:
      return "done";
  }
  return "?";
}

// What kind of body answers a query of each phase.
bool answers_phase(Phase phase, const Body& body) {
  switch (phase) {
    case Phase::Checkpoints:
    case Phase::Steps:
    case Phase::Nodes:
    case Phase::Chunks:
      return std::holds_alternative<Children>(body);
    case Phase::IntervalCommit:
      return std::holds_alternative<IntervalCommit>(body);
    case Phase::StepCommit:
      return std::holds_alternative<StepCommit>(body);
    case Phase::OpenRecords:
      return std::holds_alternative<Records>(body);
    case Phase::OpenInputs:
      return std::holds_alternative<TensorChunk>(body) || std::holds_alternative<Samples>(body);
    case Phase::OpenLog:
      return std::holds_alternative<TensorChunk>(body) || std::holds_alternative<LogEvidence>(body);
    default:
      return false;
  }
}

uint32_t round_of(const Body& body) {
  return std::visit(
      [](const auto& m) -> uint32_t {
        if constexpr (requires { m.round; })
          return m.round;
        else
          return 0;
      },
      body);
}

}  // namespace

Game::Game(GameParams params, const StepOracle& oracle) : params_(std::move(params)), oracle_(oracle) {
  if (params_.stride == 0 || params_.steps == 0) throw ProtocolError("dispute: steps and stride must be ≥ 1");
  for (const Claim& c : params_.claims) {
    if (c.job_id != params_.job_id) throw ProtocolError("dispute: a claim is for another job");
    if (c.steps != params_.steps) throw ProtocolError("dispute: a claim does not cover the job's steps");
  }
  if (params_.trainer < -1 || params_.trainer > 1)
    throw ProtocolError("dispute: the trainer is party 0 or 1");
  if (params_.claims[0].trajectory_root == params_.claims[1].trajectory_root)
    throw ProtocolError("dispute: the two claims agree; there is nothing to dispute");
  checkpoints_ = checkpoint_steps(params_.steps, params_.stride);
  for (int p = 0; p < 2; ++p) party_[p].root = party_[p].node = params_.claims[p].trajectory_root;
  lo_ = 0;
  hi_ = checkpoints_.size();
}

uint64_t Game::leaves_at_level() const {
  switch (phase_) {
    case Phase::Checkpoints:
      return checkpoints_.size();
    case Phase::Steps:
      return checkpoints_[interval_] - checkpoints_[interval_ - 1] + 1;
    case Phase::Nodes:
      return spec_->nodes.size() + 1;
    case Phase::Chunks:
      return chunk_count_;
    default:
      return 0;
  }
}

Level Game::level_of_phase() const {
  switch (phase_) {
    case Phase::Checkpoints:
      return Level::Checkpoints;
    case Phase::IntervalCommit:
    case Phase::Steps:
      return Level::Steps;
    default:
      return Level::Nodes;
  }
}

// Puts `q` to both parties: each one's clock gains the question's allowance and runs from now.
std::vector<Action> Game::ask_both(Query q, GameTime now, std::chrono::milliseconds allowance) {
  return ask(std::move(q), now, allowance, {true, true});
}

std::vector<Action> Game::ask(Query q, GameTime now, std::chrono::milliseconds allowance,
                              std::array<bool, 2> who) {
  q.round = ++round_;
  current_ = q;
  events_.push_back({GameEvent::Kind::Round, q.level, 0, q});
  std::vector<Action> out;
  for (int p = 0; p < 2; ++p) {
    party_[p].answer.reset();
    asked_[p] = who[p];
    if (!who[p]) continue;
    asked_at_[p] = now;
    heard_at_[p] = now;
    reasks_[p] = 0;
    gap_[p].reset();
    last_reask_[p].reset();
    clock_[p] += allowance;
    Query mine = question_for(p);
    mine.clock = clock_[p];
    out.push_back(SendQuery{p, std::move(mine), deadline(p)});
  }
  return out;
}

// The party answered (or the round ended without its answer): its clock stops, charged for the wait.
void Game::stop_clock(int party, GameTime now) {
  if (!asked_[party]) return;
  const auto waited = std::max(now - asked_at_[party], std::chrono::milliseconds{0});
  clock_[party] = std::max(clock_[party] - waited, std::chrono::milliseconds{0});
  asked_at_[party] = now;
}

// What the OpenInputs answer puts on the wire, from above: each tensor's float32 bytes plus, per
// chunk, its envelope, header and proof; each sample's values and proof.
uint64_t Game::opening_bytes() const {
  constexpr uint64_t kPerChunk = 2048;   // envelope (142 B), shape, chunk root, proof path of ≤ 40 hashes
  constexpr uint64_t kPerSample = 1536;  // index, proof path of ≤ 40 hashes, list counts
  uint64_t bytes = 0;
  const NodeSpec& node = spec_->nodes[node_];
  for (const InputSpec& in : node.inputs) {
    if (in.source == InputSpec::Source::Data) {
      const uint64_t values = params_.features + std::max<uint64_t>(params_.label_width, 1);
      bytes += node.data_rows.size() * (values * 4 + kPerSample);
      continue;
    }
    if (in.source == InputSpec::Source::Constant) continue;
    uint64_t elements = elements_of(in.shape);
    if (part_slot_) {  // level 4: only the chunks that hold the located chunk's inputs
      const auto [first, end] = chunks_of(part_inputs_[static_cast<size_t>(&in - node.inputs.data())]);
      elements = std::min(elements, end * kChunkElements) - first * kChunkElements;
    }
    bytes += elements * 4 + (elements * 4 / kTensorChunkBytes + 1) * kPerChunk;
  }
  return bytes;
}

Query Game::query(QueryKind kind, Level level) const {
  Query q;
  q.kind = kind;
  q.level = level;
  q.interval = interval_;
  q.step = step_;
  q.lo = lo_;
  q.hi = hi_;
  return q;
}

std::vector<Action> Game::start(GameTime now) {
  now_ = now;
  return ask_both(query(QueryKind::Children, Level::Checkpoints), now, allowance(params_.terms, 0, 0));
}

void Game::lose(int party, VerdictReason reason, std::string detail) {
  if (party_[party].lost) return;
  party_[party].lost = true;
  party_[party].reason = reason;
  party_[party].detail = std::move(detail);
}

std::vector<Action> Game::finish_if_lost() {
  if (party_[0].lost || party_[1].lost) return finish(party_[party_[0].lost ? 0 : 1].reason, "");
  return {};
}

std::vector<Action> Game::finish(VerdictReason reason, std::string detail) {
  for (int p = 0; p < 2; ++p) {
    if (asked_[p] && !party_[p].answer) stop_clock(p, now_);
    asked_[p] = false;
    if (party_[p].lost && party_[p].reason == VerdictReason::Timeout)
      clock_[p] = std::chrono::milliseconds{0};
  }
  Verdict v;
  v.clocks = {clock_[0], clock_[1]};
  v.job_id = params_.job_id;
  v.dispute_id = params_.dispute_id;
  for (uint8_t p = 0; p < 2; ++p) (party_[p].lost ? v.losers : v.winners).push_back(p);
  v.reason = reason;
  v.level = level_of_phase();
  v.step = step_;
  v.node = node_;
  if (spec_ && node_ < spec_->nodes.size() && phase_ != Phase::Nodes && phase_ > Phase::StepCommit)
    v.op = spec_->nodes[node_].op;  // from OpenRecords on (Chunks included)
  v.rounds = round_;
  std::string d = detail;
  for (int p = 0; p < 2; ++p)
    if (party_[p].lost)
      d += (d.empty() ? "" : "; ") + std::string("party ") + char('0' + p) + ": " + party_[p].detail;
  v.detail = d;
  phase_ = Phase::Done;
  return {Finished{std::move(v)}};
}

std::vector<Action> Game::on_tick(GameTime now) {
  if (done()) return {};
  now_ = std::max(now_, now);
  for (int p = 0; p < 2; ++p)
    if (asked_[p] && !party_[p].answer && now > deadline(p))
      lose(p, VerdictReason::Timeout,
           std::string("no valid answer in ") + phase_name(phase_) + " round " + std::to_string(round_) +
               " before the deadline");
  return finish_if_lost();
}

std::vector<Action> Game::on_resume(GameTime now) {
  if (done()) return {};
  now_ = std::max(now_, now);
  // The question is re-issued, so the party sends its whole stream again: start over.
  if (phase_ == Phase::OpenInputs) opening_.restart();
  if (phase_ == Phase::OpenLog)
    for (int p = 0; p < 2; ++p)
      if (awaiting(p)) logs_[p].restart();  // a complete log is an accepted answer: it stands
  std::vector<Action> out;
  for (int p = 0; p < 2; ++p) {
    if (!awaiting(p)) continue;
    // The clock restarts with the time the party had when asked: the referee's downtime is not its.
    asked_at_[p] = now;
    heard_at_[p] = now;
    reasks_[p] = 0;
    gap_[p].reset();
    Query q = question_for(p);
    q.clock = clock_[p];
    out.push_back(SendQuery{p, std::move(q), deadline(p)});
  }
  return out;
}

bool Game::on_question_written(int party, GameTime at) {
  if (!awaiting(party) || at <= asked_at_[party]) return false;
  asked_at_[party] = at;
  heard_at_[party] = std::max(heard_at_[party], at);
  return true;
}

void Game::heard(int party, GameTime now, const Body& body) {
  heard_at_[party] = std::max(heard_at_[party], now);
  reasks_[party] = 0;
  // A provider streams its opening in order (values in order, each chunk 0 to n − 1, then the
  // samples): a piece still missing before this one was lost on the way, so it is asked for again
  // without waiting for the party to fall silent.
  std::pair<uint32_t, uint32_t> at{static_cast<uint32_t>(opening_.expected_values()), 0};
  if (const auto* c = std::get_if<TensorChunk>(&body)) at = {c->value, c->chunk};
  const bool gap = phase_ == Phase::OpenInputs ? opening_.missing_before(at.first, at.second)
                   : phase_ == Phase::OpenLog  ? logs_[party].missing_before(at.first, at.second)
                                               : false;
  if (gap && (!gap_[party] || *gap_[party] < at)) gap_[party] = at;
}

std::optional<GameTime> Game::reask_due(int party) const {
  if (!awaiting(party) || phase_ == Phase::Reexecute) return std::nullopt;
  if (gap_[party]) return last_reask_[party] ? *last_reask_[party] + kReaskGapInterval : heard_at_[party];
  // Silence: first after a quarter of the base (at least kReaskSilence), then twice as long each time,
  // at most the base. A party still computing its answer gets the question again meanwhile: it answers
  // the last copy only (a provider skips a question asked again behind it), from what it computed.
  const auto quarter = std::max(kReaskSilence, params_.terms.base / 4);
  const auto wait = std::min(quarter * (int64_t{1} << std::min<uint32_t>(reasks_[party], 16)),
                             std::max(quarter, params_.terms.base));
  return heard_at_[party] + wait;
}

std::optional<GameTime> Game::next_reask() const {
  std::optional<GameTime> next;
  for (int p = 0; p < 2; ++p)
    if (const auto due = reask_due(p)) next = next ? std::min(*next, *due) : *due;
  return next;
}

std::optional<GameEvent> Game::poll_event() {
  if (events_.empty()) return std::nullopt;
  GameEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

std::optional<GameTime> Game::next_deadline() const {
  std::optional<GameTime> next = next_reask();
  for (int p = 0; p < 2; ++p)
    if (awaiting(p)) {
      const GameTime past = deadline(p) + std::chrono::milliseconds(1);
      next = next ? std::min(*next, past) : past;
    }
  return next;
}

std::vector<SendQuery> Game::reask(GameTime now) {
  std::vector<SendQuery> out;
  for (int p = 0; p < 2; ++p) {
    const auto due = reask_due(p);
    if (!due || now < *due) continue;
    Query q = question_for(p);
    q.clock = std::max(clock_[p] - std::max(now - asked_at_[p], std::chrono::milliseconds{0}),
                       std::chrono::milliseconds{0});
    if (phase_ == Phase::OpenInputs || (phase_ == Phase::OpenLog && q.kind == QueryKind::OpenLog)) {
      const InputOpening& o = phase_ == Phase::OpenInputs ? opening_ : logs_[p];
      // A gap asks for what is missing before the party's stream position (the rest may still be on its
      // way); silence for everything missing.
      const auto before = gap_[p].value_or(std::pair<uint32_t, uint32_t>{UINT32_MAX, 0});
      q.chunks = o.missing(kReaskMaxRanges, before.first, before.second);
      // The samples come last in a stream: wanted when missing and the stream has passed them.
      const bool samples = o.samples_missing() && before.first >= static_cast<uint32_t>(o.expected_values());
      if (phase_ == Phase::OpenInputs && !samples) q.indices.clear();
      if (q.chunks.empty() && (phase_ == Phase::OpenLog || q.indices.empty())) {
        gap_[p].reset();  // the other party filled the gap meanwhile
        continue;
      }
      if (q.chunks.empty()) q.values.clear();  // only the samples (no chunks listed would mean every chunk)
    }
    if (gap_[p])
      gap_[p].reset();
    else
      ++reasks_[p];
    heard_at_[p] = now;
    last_reask_[p] = now;
    out.push_back(SendQuery{p, std::move(q), deadline(p)});
  }
  return out;
}

std::vector<Action> Game::on_message(int party, const Body& body, GameTime now, bool signed_by_sender) {
  // An unsigned message may only be accepted, never held against its sender (Rejected::needs_signature).
  const auto needs_signature = [&](std::string reason) {
    return std::vector<Action>{Rejected{party, std::move(reason), true}};
  };
  if (!signed_by_sender && !std::holds_alternative<TensorChunk>(body))
    return needs_signature("only an opened tensor chunk is taken without its signature");
  if (done()) return {Rejected{party, "the dispute is over"}};
  if (party < 0 || party > 1) return {Rejected{party, "unknown party"}};
  // The input opening completes with whichever party's stream finishes first; the other's stream may
  // still be coming when the logs are asked for (of the trainer alone, in a job with roles). Its
  // chunks are redundant, not worth a refusal.
  if (phase_ == Phase::OpenLog && round_of(body) + 1 == round_ &&
      (std::holds_alternative<TensorChunk>(body) || std::holds_alternative<Samples>(body)))
    return {Rejected{party, "already opened", false, true}};
  if (!asked_[party]) return {Rejected{party, "no question is open for this party"}};
  if (!answers_phase(phase_, body))
    return {Rejected{party, std::string("unexpected message in ") + phase_name(phase_)}};
  if (round_of(body) != round_)
    return {Rejected{party, "answer for round " + std::to_string(round_of(body)) + ", the open round is " +
                                std::to_string(round_)}};
  now_ = std::max(now_, now);
  if (signed_by_sender && !std::holds_alternative<TensorChunk>(body)) heard(party, now, body);
  if (now > deadline(party)) {
    // Late: the clock decides. Nothing to decide means this party had answered in time; its late
    // message is refused without effect (is_refusal), so a durable referee does not record it.
    auto decided = on_tick(now);
    if (decided.empty()) return {Rejected{party, "past the deadline of round " + std::to_string(round_)}};
    return decided;
  }
  PartyState& ps = party_[party];
  if (ps.answer) {
    // One answer per question: the same bytes again are a replay, different bytes equivocation.
    if (phase_ == Phase::OpenInputs || phase_ == Phase::OpenLog)
      return {Rejected{party, "duplicate opening"}};
    // (An answer to a question asked again, or a duplicated frame: nothing to record.)
    if (encode_body(*ps.answer) == encode_body(body))
      return {Rejected{party, "replayed answer", false, true}};
    lose(party, VerdictReason::Equivocation,
         "two different signed answers in round " + std::to_string(round_));
    return finish_if_lost();
  }

  std::string why;
  if (phase_ == Phase::OpenInputs) {
    const auto* samples = std::get_if<Samples>(&body);
    const Acceptance a =
        samples ? opening_.accept(*samples, why) : opening_.accept(std::get<TensorChunk>(body), why);
    if (a == Acceptance::Taken || a == Acceptance::Redundant) heard(party, now, body);
    switch (a) {
      case Acceptance::Taken:
        return collect_inputs(now);
      case Acceptance::Redundant:
        return {Rejected{party, "already opened", false, true}};
      case Acceptance::Ignored:
        return {Rejected{party, why}};
      case Acceptance::Refused:
        if (!signed_by_sender) return needs_signature(why);  // the opening is unchanged
        lose(party, VerdictReason::BadProof, why);
        return finish_if_lost();
    }
  }
  if (phase_ == Phase::OpenLog) {
    const bool auditor = params_.trainer >= 0 && party != params_.trainer;
    if (const auto* e = std::get_if<LogEvidence>(&body)) {
      if (!auditor) return {Rejected{party, "unexpected LogEvidence: only an auditor is asked for it"}};
      return take_evidence(party, *e, now);
    }
    if (auditor) return {Rejected{party, "unexpected TensorChunk: an auditor shows evidence, not a log"}};
    // Each party opens its own log, proven against its own record: nothing is taken from the other
    // (in a job with roles, the trainer alone).
    const Acceptance a = logs_[party].accept(std::get<TensorChunk>(body), why);
    if (a == Acceptance::Taken || a == Acceptance::Redundant) heard(party, now, body);
    switch (a) {
      case Acceptance::Taken:
        return collect_log(party, now);
      case Acceptance::Redundant:
        return {Rejected{party, "already opened", false, true}};
      case Acceptance::Ignored:
        return {Rejected{party, "rounding log: " + why}};
      case Acceptance::Refused:
        if (!signed_by_sender) return needs_signature(why);
        lose(party, VerdictReason::BadProof, "rounding log: " + why);
        return finish_if_lost();
    }
  }
  if (!accept(party, body, why)) {
    lose(party, VerdictReason::BadProof, why);
    return finish_if_lost();
  }
  stop_clock(party, now);
  ps.answer = body;
  for (int p = 0; p < 2; ++p)
    if (asked_[p] && !party_[p].answer) return {};  // wait for the other party
  return advance(now);
}

// Checks one answer against the party's own commitments; on success records what it proves.
bool Game::accept(int party, const Body& body, std::string& why) {
  PartyState& ps = party_[party];
  switch (phase_) {
    case Phase::Checkpoints:
    case Phase::Steps:
    case Phase::Nodes:
    case Phase::Chunks: {
      const auto& a = std::get<Children>(body);
      const uint64_t mid = lo_ + split_of(hi_ - lo_);
      const Digest l = mid - lo_ == 1 ? merkle_leaf_hash(a.left) : a.left;
      const Digest r = hi_ - mid == 1 ? merkle_leaf_hash(a.right) : a.right;
      Digest node = merkle_node_hash(l, r);
      if (phase_ == Phase::Chunks && lo_ == 0 && hi_ == chunk_count_) {
        // The root of the output's chunk tree: with the output's shape and length from the job's graph
        // it must give the tensor leaf the party's record commits to (docs/commitments.md).
        const std::vector<int64_t>& shape = spec_->nodes[node_].output_shapes[*part_slot_];
        node = tensor_leaf_from_chunk_root(DType::F32, shape, elements_of(shape) * 4, node);
      }
      if (node != ps.node) {
        why = "children of [" + std::to_string(lo_) + ", " + std::to_string(hi_) +
              ") do not hash to the committed node";
        return false;
      }
      return true;
    }
    case Phase::IntervalCommit: {
      const auto& c = std::get<IntervalCommit>(body);
      const uint64_t n = checkpoints_[interval_] - checkpoints_[interval_ - 1] + 1;
      if (!proof_is(c.start_in_level1, interval_ - 1, checkpoints_.size()) ||
          !verify_inclusion(c.start_value, c.start_in_level1, ps.root)) {
        why =
            "the interval's start state is not leaf " + std::to_string(interval_ - 1) + " of the trajectory";
        return false;
      }
      if (!proof_is(c.first, 0, n) || !verify_inclusion(c.start_value, c.first, c.root) ||
          !proof_is(c.last, n - 1, n) || !verify_inclusion(ps.level1_value, c.last, c.root)) {
        why = "the interval commitment does not open to the agreed start and the party's own end state";
        return false;
      }
      return true;
    }
    case Phase::StepCommit: {
      const auto& c = std::get<StepCommit>(body);
      const uint64_t n2 = checkpoints_[interval_] - checkpoints_[interval_ - 1] + 1;
      const uint64_t j = step_ - checkpoints_[interval_ - 1] + 1;  // leaf of state t+1 in level 2
      const uint64_t g = spec_->nodes.size();
      if (!proof_is(c.pre_in_level2, j - 1, n2) || !verify_inclusion(c.pre_root, c.pre_in_level2, ps.root)) {
        why = "the step's input state is not the agreed state_hash(t)";
        return false;
      }
      if (!proof_is(c.last, g, g + 1) || !verify_inclusion(ps.level2_value, c.last, c.root)) {
        why = "the step commitment does not end in the party's own state_hash(t+1)";
        return false;
      }
      return true;
    }
    case Phase::OpenRecords: {
      const auto& r = std::get<Records>(body);
      if (r.indices != record_indices_ || r.records.size() != r.indices.size() ||
          r.proofs.size() != r.indices.size()) {
        why = "the opened records are not the ones asked for";
        return false;
      }
      const uint64_t n3 = spec_->nodes.size() + 1;
      for (size_t i = 0; i < r.indices.size(); ++i)
        if (!proof_is(r.proofs[i], r.indices[i], n3) ||
            !verify_inclusion(node_record_hash(r.records[i]), r.proofs[i], ps.root)) {
          why =
              "record " + std::to_string(r.indices[i]) + " does not open against the party's step commitment";
          return false;
        }
      if (r.state_leaves.size() != state_indices_.size() || r.state_proofs.size() != state_indices_.size()) {
        why = "the opened state t tensor leaves are not the ones asked for";
        return false;
      }
      for (size_t i = 0; i < state_indices_.size(); ++i)
        if (!proof_is(r.state_proofs[i], state_indices_[i], spec_->state_inputs) ||
            !verify_inclusion(r.state_leaves[i], r.state_proofs[i], ps.pre_root)) {
          why = "tensor leaf " + std::to_string(state_indices_[i]) +
                " of state t does not open against the party's state_hash(t)";
          return false;
        }
      if (post_state_opened_ ? r.post_state.size() != spec_->state_outputs.size() ||
                                   merkle_root(r.post_state) != ps.level2_value
                             : !r.post_state.empty()) {
        why = post_state_opened_ ? "the tensor leaves of state t+1 are not the party's state_hash(t+1)"
                                 : "state t+1's tensor leaves were not asked for";
        return false;
      }
      return true;
    }
    case Phase::OpenInputs:
      return false;  // openings go to the InputOpening, in on_message
    default:
      return false;
  }
}

// Both parties answered the open round validly: move on.
std::vector<Action> Game::advance(GameTime now) {
  switch (phase_) {
    case Phase::Checkpoints:
    case Phase::Steps:
    case Phase::Nodes:
    case Phase::Chunks: {
      const uint64_t mid = lo_ + split_of(hi_ - lo_);
      std::array<Digest, 2> l, r;
      for (int p = 0; p < 2; ++p) {
        const auto& a = std::get<Children>(*party_[p].answer);
        l[p] = mid - lo_ == 1 ? merkle_leaf_hash(a.left) : a.left;
        r[p] = hi_ - mid == 1 ? merkle_leaf_hash(a.right) : a.right;
      }
      const bool left = l[0] != l[1];
      std::array<Digest, 2> leaf_value{};
      for (int p = 0; p < 2; ++p) {
        const auto& a = std::get<Children>(*party_[p].answer);
        party_[p].node = left ? l[p] : r[p];
        leaf_value[p] = left ? a.left : a.right;
      }
      if (left)
        hi_ = mid;
      else
        lo_ = mid;
      if (hi_ - lo_ > 1) {
        Query q = query(QueryKind::Children, current_.level);
        q.indices = current_.indices;  // level 4: the node and output whose chunk tree this is
        return ask_both(q, now, allowance(params_.terms, 0, 0));
      }
      for (int p = 0; p < 2; ++p) {
        if (phase_ == Phase::Checkpoints) party_[p].level1_value = leaf_value[p];
        if (phase_ == Phase::Steps) party_[p].level2_value = leaf_value[p];
        if (phase_ == Phase::Chunks) party_[p].chunk_value = leaf_value[p];
      }
      return after_descent(now);
    }
    case Phase::IntervalCommit: {
      phase_ = Phase::Steps;
      for (int p = 0; p < 2; ++p)
        party_[p].root = party_[p].node = std::get<IntervalCommit>(*party_[p].answer).root;
      lo_ = 0;
      hi_ = leaves_at_level();
      return ask_both(query(QueryKind::Children, Level::Steps), now, allowance(params_.terms, 0, 0));
    }
    case Phase::StepCommit: {
      phase_ = Phase::Nodes;
      for (int p = 0; p < 2; ++p) {
        const auto& c = std::get<StepCommit>(*party_[p].answer);
        party_[p].root = party_[p].node = c.root;
        party_[p].pre_root = c.pre_root;
      }
      lo_ = 0;
      hi_ = leaves_at_level();
      return ask_both(query(QueryKind::Children, Level::Nodes), now, allowance(params_.terms, 0, 0));
    }
    case Phase::OpenRecords:
      for (int p = 0; p < 2; ++p) {
        const Records& r = std::get<Records>(*party_[p].answer);
        party_[p].records = r.records;
        party_[p].state_leaves = r.state_leaves;
        party_[p].post_state = r.post_state;
      }
      return check_records(now);
    default:
      return {};
  }
}

// A descent reached its leaf lo_: hand off to the next level or decide.
std::vector<Action> Game::after_descent(GameTime now) {
  if (phase_ == Phase::Chunks) {
    // Level 4: chunk lo_ of the disputed output is the first that differs; only the inputs it reads
    // are opened, and only its elements are re-executed.
    chunk_ = lo_;
    events_.push_back({GameEvent::Kind::Located, Level::Chunks, chunk_, {}});
    auto inputs = oracle_.part_inputs(step_, node_, *part_slot_,
                                      chunk_elements(spec_->nodes[node_].output_shapes[*part_slot_], chunk_));
    if (!inputs || inputs->size() != spec_->nodes[node_].inputs.size())
      throw ProtocolError("dispute: the node's part of chunk " + std::to_string(chunk_) + " is unknown");
    part_inputs_ = std::move(*inputs);
    return open_inputs(now);
  }
  if (phase_ == Phase::Checkpoints) {
    if (lo_ == 0) {  // the trajectories differ in their very first state
      const Digest initial = oracle_.initial_state_hash();
      for (int p = 0; p < 2; ++p)
        if (party_[p].level1_value != initial)
          lose(p, VerdictReason::WrongInitialState, "state_hash(0) is not the job's initial state");
      return finish_if_lost();
    }
    interval_ = lo_;
    events_.push_back({GameEvent::Kind::Located, Level::Checkpoints, interval_, {}});
    phase_ = Phase::IntervalCommit;
    // The party recomputes the interval from its checkpoint at the start.
    const uint64_t steps = checkpoints_[interval_] - checkpoints_[interval_ - 1];
    return ask_both(query(QueryKind::CommitInterval, Level::Steps), now, allowance(params_.terms, steps, 0));
  }
  if (phase_ == Phase::Steps) {
    // Leaf 0 is the agreed start, so lo_ ≥ 1: state lo_−1 agreed, state lo_ disputed.
    step_ = checkpoints_[interval_ - 1] + lo_ - 1;
    spec_ = oracle_.step_spec(step_);
    events_.push_back({GameEvent::Kind::Located, Level::Steps, step_, {}});
    phase_ = Phase::StepCommit;
    // At worst from the interval's checkpoint to state t, then step t recording its nodes.
    const uint64_t steps = step_ - checkpoints_[interval_ - 1] + 1;
    return ask_both(query(QueryKind::CommitStep, Level::Nodes), now, allowance(params_.terms, steps, 0));
  }
  // Level 3: the first differing leaf is node lo_ (or the post state when lo_ == G).
  node_ = lo_;
  events_.push_back({GameEvent::Kind::Located, Level::Nodes, node_, {}});
  // Opened with the records: the leaves of state t those inputs read, and at G every leaf of state t+1.
  std::set<uint64_t> open, state;
  const auto add_producers = [&](const std::vector<InputSpec>& inputs) {
    for (const InputSpec& in : inputs) {
      if (in.source == InputSpec::Source::Node) open.insert(in.index);
      if (in.source == InputSpec::Source::State) state.insert(in.index);
    }
  };
  post_state_opened_ = node_ == spec_->nodes.size();
  if (!post_state_opened_) {
    open.insert(node_);
    add_producers(spec_->nodes[node_].inputs);
  } else {
    add_producers(spec_->state_outputs);
  }
  record_indices_.assign(open.begin(), open.end());
  state_indices_.assign(state.begin(), state.end());
  phase_ = Phase::OpenRecords;
  Query q = query(QueryKind::OpenRecords, Level::Nodes);
  q.indices = record_indices_;
  for (uint64_t i : state_indices_) q.values.push_back({ValueOrigin::StateInput, i, 0});
  if (post_state_opened_) q.values.push_back({ValueOrigin::NextState, 0, 0});
  return ask_both(q, now, allowance(params_.terms, 0, 0));
}

// The opened records are proven; check them against the job's graph and the agreed producers.
std::vector<Action> Game::check_records(GameTime now) {
  const auto record_of = [&](int p, uint64_t index) -> const NodeRecord& {
    const auto it = std::find(record_indices_.begin(), record_indices_.end(), index);
    return party_[p].records[static_cast<size_t>(it - record_indices_.begin())];
  };
  // The hash an input must have, as this party's agreed records and states say; nullopt if unknowable.
  const auto expected = [&](int p, const InputSpec& in) -> std::optional<Digest> {
    switch (in.source) {
      case InputSpec::Source::State: {
        const auto it = std::find(state_indices_.begin(), state_indices_.end(), in.index);
        return it != state_indices_.end()
                   ? std::optional(party_[p].state_leaves[static_cast<size_t>(it - state_indices_.begin())])
                   : std::nullopt;
      }
      case InputSpec::Source::Data:
        return params_.dataset_root;
      case InputSpec::Source::Constant:
        return in.constant_hash;
      case InputSpec::Source::Node: {
        const NodeRecord& r = record_of(p, in.index);
        return in.slot < r.outputs.size() ? std::optional(r.outputs[in.slot]) : std::nullopt;
      }
    }
    return std::nullopt;
  };

  if (node_ == spec_->nodes.size()) {  // every record agrees, the next states differ
    for (int p = 0; p < 2; ++p)
      for (size_t o = 0; o < spec_->state_outputs.size(); ++o)
        if (expected(p, spec_->state_outputs[o]) != party_[p].post_state[o]) {
          lose(p, VerdictReason::WrongPostState,
               "state tensor " + std::to_string(o) +
                   " of state_hash(t+1) is not the output of its producing node");
          break;
        }
    return finish_if_lost();
  }

  const NodeSpec& node = spec_->nodes[node_];
  for (int p = 0; p < 2; ++p) {
    const NodeRecord& r = record_of(p, node_);
    if (r.op != node.op || r.attrs != node.attrs || r.inputs.size() != node.inputs.size() ||
        r.outputs.size() != node.outputs) {
      lose(p, VerdictReason::InconsistentInput,
           "node " + std::to_string(node_) + " is not the job's node (op, attributes or arity differ)");
      continue;
    }
    for (size_t i = 0; i < node.inputs.size(); ++i)
      if (expected(p, node.inputs[i]) != r.inputs[i]) {
        lose(p, VerdictReason::InconsistentInput,
             "input " + std::to_string(i) + " of node " + std::to_string(node_) +
                 " is not its agreed producer's output");
        break;
      }
  }
  if (party_[0].lost || party_[1].lost) return finish_if_lost();

  // Both records take the right inputs, so they agree on them and differ in outputs. Level 4 (docs/
  // protocol.md, "The game"): when the node's op computes a range of the first differing output from
  // ranges of its inputs and that output has several chunks, both parties' chunk trees of it are
  // descended to the first differing chunk (the first question's answer is checked against the
  // output's tensor leaf in each party's record), and only what that chunk reads is opened.
  const NodeRecord& r0 = record_of(0, node_);
  const NodeRecord& r1 = record_of(1, node_);
  for (uint32_t o = 0; o < node.output_shapes.size() && !node.rounding_log; ++o) {
    if (r0.outputs[o] == r1.outputs[o]) continue;
    const uint64_t n = elements_of(node.output_shapes[o]);
    const uint64_t chunks = (n + kChunkElements - 1) / kChunkElements;
    if (chunks < 2 || !oracle_.part_inputs(step_, node_, o, {0, kChunkElements})) break;
    part_slot_ = o;
    chunk_count_ = chunks;
    phase_ = Phase::Chunks;
    lo_ = 0;
    hi_ = chunks;
    for (int p = 0; p < 2; ++p) party_[p].node = record_of(p, node_).outputs[o];
    Query q = query(QueryKind::Children, Level::Chunks);
    q.indices = {node_, o};
    return ask_both(q, now, allowance(params_.terms, 0, 0));
  }
  return open_inputs(now);
}

// Re-execution: both parties are asked to open the tensor inputs (each must hash to the agreed input
// hash; at level 4 only the chunks the located chunk reads) and the data rows, into one opening: the
// inputs are agreed, so each chunk is taken from whichever party sends it first (InputOpening), no
// party can make the other stream a large opening alone against its clock, and the referee checks and
// keeps each opened byte once.
std::vector<Action> Game::open_inputs(GameTime now) {
  const NodeSpec& node = spec_->nodes[node_];
  Query q = query(QueryKind::OpenInputs, Level::Nodes);
  std::vector<ExpectedTensor> tensors;
  const NodeRecord& r = located_record(0);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const InputSpec& in = node.inputs[i];
    if (in.source == InputSpec::Source::State)
      q.values.push_back({ValueOrigin::StateInput, in.index, 0});
    else if (in.source == InputSpec::Source::Node)
      q.values.push_back({ValueOrigin::NodeOutput, in.index, in.slot});
    else
      continue;
    tensors.push_back({in.shape, r.inputs[i]});
    if (part_slot_) {
      ExpectedTensor& t = tensors.back();
      std::tie(t.first_chunk, t.end_chunk) = chunks_of(part_inputs_[i]);
      q.chunks.push_back({static_cast<uint32_t>(tensors.size() - 1), static_cast<uint32_t>(t.first_chunk),
                          static_cast<uint32_t>(t.end_chunk)});
    }
  }
  const bool needs_samples = std::any_of(node.inputs.begin(), node.inputs.end(), [](const InputSpec& in) {
    return in.source == InputSpec::Source::Data;
  });
  if (needs_samples) q.indices = node.data_rows;
  const ExpectedSamples samples{needs_samples, node.data_rows, params_.dataset_root, params_.dataset_samples,
                                params_.label_width};
  opening_ = InputOpening(tensors, samples);
  phase_ = Phase::OpenInputs;
  if (q.values.empty() && !needs_samples) return collect_inputs(now);
  return ask_both(q, now, allowance(params_.terms, 0, opening_bytes()));
}

const NodeRecord& Game::located_record(int party) const {
  const auto it = std::find(record_indices_.begin(), record_indices_.end(), node_);
  return party_[party].records[static_cast<size_t>(it - record_indices_.begin())];
}

// Emits the re-execution once every requested tensor and sample has arrived (from either party) and
// been checked; the round then ends for both parties.
std::vector<Action> Game::collect_inputs(GameTime now) {
  if (!opening_.complete()) return {};
  return inputs_collected(opening_.take(), now);
}

std::vector<Action> Game::on_opening_recorded(GameTime now) {
  if (phase_ != Phase::OpenInputs || spec_->nodes[node_].rounding_log) return {};
  now_ = std::max(now_, now);
  opening_ = InputOpening();  // what arrived before is not needed: the outcome is recorded
  return inputs_collected(OpenedInputs{}, now);
}

// The OpenInputs round ended with `opened` (empty when replayed from a record that keeps the
// re-execution's outcome instead: the shapes come from the node).
std::vector<Action> Game::inputs_collected(OpenedInputs opened, GameTime now) {
  for (int p = 0; p < 2; ++p) {
    stop_clock(p, now);
    asked_[p] = false;
  }
  const NodeSpec& node = spec_->nodes[node_];
  // The received tensors move into the action; the game keeps no tensor data.
  Reexecute rx;
  rx.step = step_;
  rx.node = node_;
  rx.spec = node;
  if (part_slot_) {
    rx.part = Reexecute::Part{
        *part_slot_, chunk_, chunk_elements(spec_->nodes[node_].output_shapes[*part_slot_], chunk_), {}};
    for (const ElementSpan& e : part_inputs_)
      rx.part->input_first.push_back(chunks_of(e).first * kChunkElements);
  }
  size_t v = 0;
  for (const InputSpec& in : node.inputs) {
    if (in.source == InputSpec::Source::State || in.source == InputSpec::Source::Node) {
      if (v < opened.tensors.size()) {
        rx.shapes.push_back(std::move(opened.tensors[v].shape));
        rx.inputs.push_back(std::move(opened.tensors[v].values));
      } else {
        rx.shapes.push_back(in.shape);
        rx.inputs.emplace_back();
      }
      ++v;
    } else {
      rx.shapes.emplace_back();
      rx.inputs.emplace_back();
    }
  }
  if (opened.samples) {
    rx.sample_inputs = std::move(opened.samples->inputs);
    rx.sample_labels = std::move(opened.samples->labels);
  }
  if (!node.rounding_log) {
    phase_ = Phase::Reexecute;
    return one_action(std::move(rx));
  }
  // A rounding-log node: each party opens its own log of it, proven against the log leaf of its own
  // record (the two may differ), streamed in chunks like a tensor.
  // In a job with roles only the trainer opens its log: it decides for both parties, and the
  // auditor's record must commit to it (its last output hash). A trainer that withholds it runs out
  // its own clock (docs/protocol.md, "Rounding-log jobs").
  // The auditor is asked too, for the trainer's signed leaf of the node (QueryKind::LogEvidence), only
  // where its record commits to another log than the trainer's record: either it did not replay the
  // trainer's log, or the trainer signed two logs of the node.
  pending_ = std::move(rx);
  evidence_.reset();
  const std::vector<int64_t> shape{static_cast<int64_t>(node.log_values)};
  std::array<bool, 2> who{true, true};
  if (params_.trainer >= 0) {
    const int a = 1 - params_.trainer;
    who[a] = located_record(a).outputs.back() != located_record(params_.trainer).outputs.back();
  }
  for (int p = 0; p < 2; ++p)
    logs_[p] = who[p] && (params_.trainer < 0 || p == params_.trainer)
                   ? InputOpening({ExpectedTensor{shape, located_record(p).outputs.back(), DType::Trits}}, {})
                   : InputOpening();
  phase_ = Phase::OpenLog;
  Query q = query(QueryKind::OpenLog, Level::Nodes);
  q.indices = {node_};
  constexpr uint64_t kPerChunk = 2048;  // as in opening_bytes
  const uint64_t log_bytes = tensor_byte_length(DType::Trits, node.log_values);
  return ask(q, now, allowance(params_.terms, 0, log_bytes + (log_bytes / kTensorChunkBytes + 1) * kPerChunk),
             who);
}

// A chunk of `party`'s log was taken: once its log is complete its clock stops; once both are, the
// node is re-executed with them.
std::vector<Action> Game::collect_log(int party, GameTime now) {
  if (!logs_[party].complete()) return {};
  stop_clock(party, now);
  party_[party].answer = Body{TensorChunk{}};  // the party's answer is in logs_[party]
  return logs_answered(now);
}

// An auditor's LogEvidence: the trainer's LogHeader of the located step as the auditor received it. Only
// a valid one of this job and step signed by the trainer's claim key counts; anything else proves
// nothing and costs the auditor nothing (its record is judged by the trainer's log either way).
std::vector<Action> Game::take_evidence(int party, const LogEvidence& e, GameTime now) {
  if (!e.header.empty()) {
    try {
      const Envelope h = open_envelope(e.header);
      const auto* header = std::get_if<LogHeader>(&h.body);
      if (header && h.sender == params_.trainer_key && h.context == params_.job_id &&
          header->job_id == params_.job_id && header->step == step_ &&
          header->leaves.size() == spec_->nodes.size())
        evidence_ = header->leaves[node_];
    } catch (const std::exception&) {  // not an envelope, or not signed: no evidence
    }
  }
  stop_clock(party, now);
  party_[party].answer = Body{e};
  return logs_answered(now);
}

// Once every party asked in the OpenLog round has answered: a trainer shown to have signed another log
// leaf of the node than its record commits to loses (equivocation); otherwise the node is re-executed.
std::vector<Action> Game::logs_answered(GameTime now) {
  (void)now;
  for (int p = 0; p < 2; ++p)
    if (asked_[p] && !party_[p].answer) return {};
  if (evidence_ && *evidence_ != located_record(params_.trainer).outputs.back()) {
    lose(params_.trainer, VerdictReason::Equivocation,
         "it signed another log leaf of node " + std::to_string(node_) + " of step " + std::to_string(step_) +
             " for its auditor (LogHeader) than its record commits to");
    return finish_if_lost();
  }
  for (int p = 0; p < 2; ++p) asked_[p] = false;
  Reexecute rx = std::move(*pending_);
  pending_.reset();
  for (int p = 0; p < 2; ++p)
    if (params_.trainer < 0 || p == params_.trainer)
      rx.logs[p] = std::move(logs_[p].take().tensors.at(0).bytes);
  phase_ = Phase::Reexecute;
  return one_action(std::move(rx));
}

std::vector<Action> Game::on_reexecuted(const std::vector<Digest>& outputs, GameTime now) {
  return on_reexecuted(
      std::array<PartyReexecution, 2>{PartyReexecution{outputs, {}}, PartyReexecution{outputs, {}}}, now);
}

std::vector<Action> Game::on_reexecuted(const std::array<PartyReexecution, 2>& parties, GameTime now) {
  if (phase_ != Phase::Reexecute) return {};
  now_ = std::max(now_, now);
  const bool logged = spec_->nodes[node_].rounding_log;
  const std::string where = "node " + std::to_string(node_) + " of step " + std::to_string(step_);
  if (logged && params_.trainer >= 0) return decide_with_trainer_log(parties, where);
  for (int p = 0; p < 2; ++p) {
    if (!parties[p].bad_log.empty()) {
      lose(p, VerdictReason::BadRoundingLog,
           "the rounding log of " + where + " is refused: " + parties[p].bad_log);
      continue;
    }
    std::vector<Digest> committed = located_record(p).outputs;
    if (logged && !committed.empty()) committed.pop_back();  // the log's leaf, proven when opened
    if (part_slot_) committed = {party_[p].chunk_value};     // level 4: the located chunk's hash
    if (committed != parties[p].outputs)
      lose(p, VerdictReason::WrongOutput,
           "re-executing " + where +
               (part_slot_ ? " (chunk " + std::to_string(chunk_) + " of output " +
                                 std::to_string(*part_slot_) + ", level 4)"
                           : "") +
               (logged ? " with the party's rounding log" : "") +
               " gives other outputs than the party committed");
  }
  if (!party_[0].lost && !party_[1].lost) {
    if (logged)
      return undecided(
          VerdictReason::BothValid,
          "undecided: both parties' rounding logs of " + where +
              " are allowed for the referee's float64 values and each replays to the party's own "
              "outputs (they differ only in decisions on values near a rounding boundary)");
    return finish(VerdictReason::WrongOutput, "re-execution matches both parties (records differ elsewhere)");
  }
  return finish_if_lost();
}

// A job with roles: the trainer's committed log decides the located node for both parties. Its
// decision outside the band the referee's float64 value allows convicts the trainer; otherwise the
// rounded outputs are determined, and with the log's leaf they are the record both owed: the auditor
// replays the trainer's log and commits to it, so neither may differ. The records differ, so at least
// one party loses: no undecided end.
std::vector<Action> Game::decide_with_trainer_log(const std::array<PartyReexecution, 2>& parties,
                                                  const std::string& where) {
  const int trainer = params_.trainer;
  if (!parties[trainer].bad_log.empty()) {
    lose(trainer, VerdictReason::BadRoundingLog,
         "the trainer's rounding log of " + where + " is refused: " + parties[trainer].bad_log);
    return finish_if_lost();
  }
  std::vector<Digest> owed = parties[trainer].outputs;
  owed.push_back(located_record(trainer).outputs.back());  // the log's leaf, proven when opened
  for (int p = 0; p < 2; ++p)
    if (located_record(p).outputs != owed)
      lose(p, VerdictReason::WrongOutput,
           p == trainer ? "re-executing " + where +
                              " with the trainer's own rounding log gives other outputs than it committed"
                        : "the auditor's record of " + where +
                              " is not the outputs of the trainer's rounding log, or does not commit to "
                              "that log (its last output hash)");
  if (!party_[0].lost && !party_[1].lost)
    return finish(VerdictReason::WrongOutput, "re-execution matches both parties (records differ elsewhere)");
  return finish_if_lost();
}

Query Game::question_for(int party) const {
  Query q = current_;
  if (phase_ == Phase::OpenLog && params_.trainer >= 0 && party != params_.trainer)
    q.kind = QueryKind::LogEvidence;
  return q;
}

// Ends the game with neither winners nor losers.
std::vector<Action> Game::undecided(VerdictReason reason, std::string detail) {
  std::vector<Action> out = finish(reason, std::move(detail));
  Verdict& v = std::get<Finished>(out.front()).verdict;
  v.winners.clear();  // no one is convicted, and no one is declared right either
  v.losers.clear();
  return out;
}

std::vector<Action> Game::on_reexecution_failed(const std::string& why, GameTime now) {
  if (phase_ != Phase::Reexecute) return {};
  now_ = std::max(now_, now);
  return undecided(VerdictReason::RefereeFault, "undecided: the referee could not re-execute node " +
                                                    std::to_string(node_) + " of step " +
                                                    std::to_string(step_) + ": " + why);
}

}  // namespace tribunal
