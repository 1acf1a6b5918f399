#include "referee/referee_dispute.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"
#include "ops/registry.h"
#include "protocol/trajectory.h"

namespace tribunal {
namespace {

// Opens one claim of an opening: decoded and its signature checked, once (the caller keeps both the
// claim and its signer).
Envelope open_claim(const std::vector<uint8_t>& bytes, const char* which) {
  Envelope env = open_envelope(bytes);
  if (env.kind != MessageKind::Claim)
    throw ProtocolError(fmt::format("dispute: {} is not a Claim envelope", which));
  const Claim& c = std::get<Claim>(env.body);
  if (env.context != c.job_id)
    throw ProtocolError(fmt::format("dispute: {} is signed for another job", which));
  return env;
}

std::string op_label(uint8_t op) {
  return op < kOpKindCount ? op_name(static_cast<OpKind>(op)) : "op " + std::to_string(op);
}

// One line per question round, for the structured log.
std::string describe(const Query& q) {
  switch (q.kind) {
    case QueryKind::Children:
      if (q.level == Level::Chunks && q.indices.size() == 2)
        return fmt::format("level 4: open the children of chunks [{}, {}) of node {} output {}", q.lo, q.hi,
                           q.indices[0], q.indices[1]);
      return fmt::format("level {}: open the children of leaves [{}, {})", static_cast<int>(q.level), q.lo,
                         q.hi);
    case QueryKind::CommitInterval:
      return fmt::format("level 2: commit to every step of interval {}", q.interval);
    case QueryKind::CommitStep:
      return fmt::format("level 3: commit to the node records of step {}", q.step);
    case QueryKind::OpenRecords:
      return fmt::format("open {} node record(s) of step {}", q.indices.size(), q.step);
    case QueryKind::OpenInputs:
      return fmt::format("open the located node's inputs: {} tensor(s), {} sample(s)", q.values.size(),
                         q.indices.size());
    case QueryKind::OpenLog:
      return fmt::format("open each party's rounding log of node {} of step {}",
                         q.indices.empty() ? 0 : q.indices[0], q.step);
    case QueryKind::LogEvidence:
      return fmt::format("show the trainer's signed log leaves of step {}", q.step);
  }
  return "?";
}

}  // namespace

RefereeDispute::RefereeDispute(const KeyPair& referee_key, const Envelope& open, DisputeOptions options)
    : key_(referee_key),
      reexecute_hook_(options.reexecute_hook),
      open_bytes_(open.bytes),
      opener_(open.sender) {
  if (open.kind != MessageKind::DisputeOpen) throw ProtocolError("dispute: expected a DisputeOpen message");
  const auto& d = std::get<DisputeOpen>(open.body);
  // The opening comes from a client over the network: bound what it can make the referee allocate
  // (the batch sampler holds a permutation of the data set; level 1 a list of checkpoints).
  if (d.dataset_samples == 0 || d.dataset_samples > kMaxDisputeSamples || d.features == 0 ||
      d.features > kMaxDisputeFeatures || d.classes == 0 || d.classes > kMaxDisputeFeatures ||
      d.label_width > kMaxDisputeFeatures)
    throw ProtocolError("dispute: the data set's size or shape is out of range");
  job_ = parse_job(d.job_toml, "dispute job");
  require_disputable(job_.numerics, "dispute job");
  if (static_cast<uint64_t>(job_.steps / job_.stride) > kMaxDisputeCheckpoints)
    throw ProtocolError("dispute: the job has more than " + std::to_string(kMaxDisputeCheckpoints) +
                        " checkpoints");
  const DataShape shape{static_cast<int64_t>(d.dataset_samples), static_cast<int64_t>(d.features),
                        static_cast<int64_t>(d.classes), static_cast<int64_t>(d.label_width)};
  check_job_against_data(job_, shape.samples, shape.features, shape.classes);
  // Text samples carry a next-token label per position; every other data set one class id.
  const auto want = static_cast<uint64_t>(tribunal::label_width(job_));
  if (d.label_width != want)
    throw ProtocolError("dispute: the data set's label width " + std::to_string(d.label_width) +
                        " does not fit the job (" + std::to_string(want) + ")");
  // A job that starts from pretrained weights or trains an imported model: state 0, the graph and
  // the id derive from the bytes this referee registered under the job's names for them; a referee
  // without them refuses, naming them. An imported model's graph is in its file, so this comes first.
  locate_model_files(job_, options.weights);
  // Cost before work: derived from the job's numbers (an imported model's from its file, bounded by
  // OnnxLimits), in time linear in the opening, and checked before the claims' signatures, the job
  // id, the oracle or any step graph (engine/cost.h).
  cost_ = dispute_cost(job_, shape);
  if (options.limits) check_dispute_cost(cost_, *options.limits);
  // The data set's root and shape are part of the job_id that both providers signed: an opener who
  // changes them opens a dispute about a job neither claim is for, and is refused below.
  job_id_ = tribunal::job_id(job_, d.dataset_root, shape);
  GameParams params;
  params.job_id = job_id_;
  params.steps = static_cast<uint64_t>(job_.steps);
  params.stride = static_cast<uint64_t>(job_.stride);
  params.dataset_root = d.dataset_root;
  params.dataset_samples = d.dataset_samples;
  params.label_width = d.label_width;
  params.features = d.features;
  params.terms = job_.dispute;
  for (int p = 0; p < 2; ++p) {
    const auto i = static_cast<size_t>(p);
    const Envelope claim = open_claim(d.claims[i], p == 0 ? "claim 0" : "claim 1");
    params.claims[i] = std::get<Claim>(claim.body);
    party_keys_[i] = claim.sender;
    if (params.claims[i].job_id != job_id_)
      throw ProtocolError(
          fmt::format("dispute: claim {} is not for the job and data set the opening describes", p));
    // Each provider is reached only at the endpoint it signed in its own claim.
    if (params.claims[i].endpoint.empty())
      throw ProtocolError(fmt::format("dispute: claim {} names no endpoint", p));
    providers_.push_back(params.claims[i].endpoint);
  }
  if (party_keys_[0] == party_keys_[1])
    throw ProtocolError("dispute: both claims are signed by the same key");
  // A rounding-log job with roles is disputed between its trainer, the provider at the endpoint the
  // job names (signed by both parties in the job id), and an auditor (docs/protocol.md, "Rounding-log
  // jobs"): the trainer's log decides.
  if (!job_.numerics.trainer.empty()) {
    const bool t0 = params.claims[0].endpoint == job_.numerics.trainer,
               t1 = params.claims[1].endpoint == job_.numerics.trainer;
    if (t0 == t1)
      throw ProtocolError(fmt::format(
          "dispute: the job names the trainer {}, and {} of the claims is its: a dispute of a job with "
          "roles is between the trainer and an auditor",
          job_.numerics.trainer, t0 ? "each" : "neither"));
    params.trainer = t0 ? 0 : 1;
    params.trainer_key = party_keys_[static_cast<size_t>(params.trainer)];
  }
  dispute_id_ = tribunal::dispute_id(d);
  if (open.context != dispute_id_)
    throw ProtocolError("dispute: the opening is not addressed to its dispute id");
  params.dispute_id = dispute_id_;
  oracle_ = std::make_unique<JobOracle>(job_, shape);
  game_ = std::make_unique<Game>(params, *oracle_);
  opening_msg_ = d;  // kept for the verdict, which carries it: never decoded again
}

void check_dispute_cost(const DisputeCost& cost, const DisputeLimits& limits) {
  const auto refuse = [](const std::string& what, uint64_t value, uint64_t limit) {
    throw ProtocolError(
        fmt::format("dispute: the job's {} is {}, beyond this referee's limit of {}", what, value, limit));
  };
  if (cost.parameters > limits.max_parameters)
    refuse("parameter count", static_cast<uint64_t>(cost.parameters),
           static_cast<uint64_t>(limits.max_parameters));
  if (cost.max_node_work > limits.max_reexecution_work)
    refuse("re-execution work (" + cost.heaviest_node + ", multiply-adds or elements)", cost.max_node_work,
           limits.max_reexecution_work);
  if (cost.max_opened_bytes > limits.max_opened_bytes)
    refuse("largest opening (input bytes of one node)", cost.max_opened_bytes, limits.max_opened_bytes);
  if (cost.max_node_memory > limits.max_node_memory)
    refuse("re-execution memory (bytes held for one node)", cost.max_node_memory, limits.max_node_memory);
  if (cost.nodes > limits.max_graph_nodes)
    refuse("step graph node count", cost.nodes, limits.max_graph_nodes);
}

uint64_t RefereeDispute::next_sequence() {
  sequence_ = ((sequence_ >> kReaskSequenceBits) + 1) << kReaskSequenceBits;
  reask_sub_ = 0;
  return sequence_;
}

void RefereeDispute::emit(Turn& turn, std::string text) const {
  turn.events.push_back({game_->phase(), game_->rounds(), std::move(text)});
}

// The game's own events (Game::poll_event) in the log's words: each narrowing once, when the game
// hands off to the next level, and each question round.
void RefereeDispute::take_game_events(Turn& turn) {
  while (const std::optional<GameEvent> e = game_->poll_event()) {
    if (e->kind == GameEvent::Kind::Round) {
      emit(turn, describe(e->query));
      continue;
    }
    switch (e->level) {
      case Level::Checkpoints: {
        const auto cps =
            checkpoint_steps(static_cast<uint64_t>(job_.steps), static_cast<uint64_t>(job_.stride));
        const uint64_t k = e->index;
        emit(turn, fmt::format("level 1: trajectories first differ at checkpoint {} → interval [{}, {}]", k,
                               cps[k - 1], cps[k]));
        break;
      }
      case Level::Steps:
        emit(turn, fmt::format("level 2: step {} is the first whose next state differs", e->index));
        break;
      case Level::Nodes: {
        const uint64_t n = e->index;
        const StepGraph& g = oracle_->graph(game_->located_step());
        if (n < g.nodes.size())
          emit(turn, fmt::format("level 3: node records first differ at node {} ({}, output '{}')", n,
                                 op_name(g.nodes[n].op), g.values[g.nodes[n].outputs[0]].name));
        else
          emit(turn, "level 3: every node record agrees; the next states differ");
        break;
      }
      case Level::Chunks: {
        const auto part = game_->located_part();
        emit(turn,
             fmt::format("level 4: output {} of node {} first differs at chunk {} of {}",
                         part ? part->first : 0, game_->located_node(), e->index, part ? part->second : 0));
        break;
      }
    }
  }
}

// Signs what a turn sends: its questions, numbered as the turn drafted them.
RefereeDispute::Step RefereeDispute::sealed(Turn turn) {
  Step step;
  step.commit = std::move(turn.commit);
  step.events = std::move(turn.events);
  step.refused = std::move(turn.refused);
  step.rejected = turn.rejected;
  for (Draft& d : turn.send) {
    if (!d.query) {
      step.send.push_back({d.party, std::move(d.envelope)});
      continue;
    }
    Outgoing o{d.party, seal(key_, dispute_id_, d.sequence, *d.query), d.question ? d.sequence : 0};
    if (d.query->kind == QueryKind::OpenInputs) o.opening_bytes = game_->opening_bytes();
    if (d.question) last_query_[static_cast<size_t>(d.party)] = o.envelope;
    step.send.push_back(std::move(o));
  }
  if (turn.decided) step.verdict = *verdict_envelope_;
  return step;
}

RefereeDispute::Step RefereeDispute::start(GameTime now) {
  return sealed(start_turn(now));
}
RefereeDispute::Step RefereeDispute::on_envelope(int party, Envelope env, GameTime now) {
  return sealed(envelope_turn(party, std::move(env), now));
}
RefereeDispute::Step RefereeDispute::on_tick(GameTime now) {
  return sealed(tick_turn(now));
}
RefereeDispute::Step RefereeDispute::on_written(int party, uint64_t question, GameTime at) {
  return sealed(written_turn(party, question, at));
}
RefereeDispute::Step RefereeDispute::resume(GameTime now) {
  return sealed(resume_turn(now));
}

RefereeDispute::Turn RefereeDispute::start_turn(GameTime now) {
  if (started_) throw ProtocolError("dispute: start() called twice");
  started_ = true;
  Turn turn;
  turn.send = {{0, 0, false, std::nullopt, open_bytes_}, {1, 0, false, std::nullopt, open_bytes_}};
  emit(turn,
       fmt::format(
           "dispute {} opened: job {}, {} steps, stride {}, {} checkpoints",
           to_hex(dispute_id_).substr(0, 16), to_hex(job_id_).substr(0, 16), job_.steps, job_.stride,
           checkpoint_steps(static_cast<uint64_t>(job_.steps), static_cast<uint64_t>(job_.stride)).size()));
  handle(turn, game_->start(now), now);
  turn.commit.push_back({DisputeInput::Kind::Open, 0, open_bytes_, now});
  return turn;
}

RefereeDispute::Turn RefereeDispute::resume_turn(GameTime now) {
  if (!started_) throw ProtocolError("dispute: resume() before start()");
  Turn turn;
  if (done()) return turn;
  emit(turn, "resumed: re-issuing the open questions with restarted clocks");
  opening_.clear();  // a partial opening is asked for again, whole
  opened_.first.clear();
  handle(turn, game_->on_resume(now), now);
  turn.commit.push_back({DisputeInput::Kind::Resume, 0, {}, now});
  return turn;
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::reconnect(int party) const {
  if (done() || party < 0 || party > 1) return {};
  std::vector<Outgoing> out = {{party, open_bytes_}};
  // A question not written yet (the party was not connected when it was asked) starts its clock now.
  if (game_->awaiting(party) && !last_query_[static_cast<size_t>(party)].empty()) {
    out.push_back({party, last_query_[static_cast<size_t>(party)],
                   question_sequence_[static_cast<size_t>(party)],
                   game_->phase() == Phase::OpenInputs ? game_->opening_bytes() : 0});
  }
  return out;
}

std::unique_ptr<RefereeDispute> RefereeDispute::replay(const KeyPair& referee_key,
                                                       std::span<const DisputeInput> inputs,
                                                       DisputeOptions options,
                                                       std::vector<DisputeEvent>* events,
                                                       ReplayTrace* trace) {
  if (inputs.empty() || inputs[0].kind != DisputeInput::Kind::Open)
    throw ProtocolError("dispute replay: the record does not start with the dispute's opening");
  options.limits.reset();  // a recorded dispute was admitted when it was opened, whatever the limits are now
  auto d = std::make_unique<RefereeDispute>(referee_key, open_envelope(inputs[0].envelope), options);
  // What a turn would send was sent by the lost process (resume() re-issues what is still open) and
  // its inputs are the record itself: only its events are kept, when asked for.
  const auto keep = [&](Turn turn) {
    if (events)
      events->insert(events->end(), std::make_move_iterator(turn.events.begin()),
                     std::make_move_iterator(turn.events.end()));
  };
  d->trace_ = trace;
  const auto traced = [&](GameTime at) {
    if (trace) trace->phases.emplace_back(at, d->game().phase());
  };
  keep(d->start_turn(inputs[0].at));
  traced(inputs[0].at);
  for (size_t i = 1; i < inputs.size(); ++i) {
    const DisputeInput& in = inputs[i];
    const auto diverged = [&](const std::string& why) {
      return ProtocolError(fmt::format("dispute replay {}: input {} does not replay: {}",
                                       to_hex(d->dispute_id_).substr(0, 16), i, why));
    };
    if (d->done()) throw diverged("the dispute was already decided");
    switch (in.kind) {
      case DisputeInput::Kind::Open:
        throw diverged("a second opening");
      case DisputeInput::Kind::Envelope: {
        if (in.party < 0 || in.party > 1) throw diverged("party out of range");
        Envelope env;
        try {
          env = open_envelope(in.envelope, SignatureCheck::DeferTensorChunks);  // as the node opened it
        } catch (const ProtocolError& e) {
          throw diverged(std::string("its envelope does not open: ") + e.what());
        }
        Turn turn = d->envelope_turn(in.party, std::move(env), in.at);
        if (!turn.refused.empty()) throw diverged(turn.refused);
        if (turn.rejected) throw diverged("the game refuses the envelope");
        keep(std::move(turn));
        break;
      }
      case DisputeInput::Kind::Tick:
        keep(d->tick_turn(in.at));
        if (!d->done()) throw diverged("the tick decides nothing");
        break;
      case DisputeInput::Kind::Resume:
        keep(d->resume_turn(in.at));
        break;
      case DisputeInput::Kind::Opened: {
        OpenedRecord record;
        try {
          record = decode_opened_record(in.envelope);
        } catch (const ProtocolError& e) {
          throw diverged(std::string("its re-execution record does not decode: ") + e.what());
        }
        auto actions = d->game_->on_opening_recorded(in.at);
        if (actions.empty()) throw diverged("no input opening of a node without a rounding log ends here");
        d->opening_.clear();
        d->opened_ = std::move(record.summary);
        d->recorded_ = std::move(record.outcome);
        Turn turn;
        try {
          d->handle(turn, std::move(actions), in.at);
        } catch (const ProtocolError& e) {
          throw diverged(e.what());
        }
        if (!d->done()) throw diverged("the recorded re-execution decides nothing");
        keep(std::move(turn));
        break;
      }
      case DisputeInput::Kind::Asked: {
        if (in.party < 0 || in.party > 1) throw diverged("party out of range");
        const uint64_t question = d->question_sequence_[static_cast<size_t>(in.party)];
        if (!d->game_->awaiting(in.party) || question == 0) throw diverged("the question was not open");
        keep(d->written_turn(in.party, question, in.at));
        break;
      }
      default:
        throw diverged("unknown input kind");
    }
    traced(in.at);
  }
  d->trace_ = nullptr;  // the caller's trace may not outlive the dispute
  return d;
}

RefereeDispute::Turn RefereeDispute::envelope_turn(int party, Envelope&& env, GameTime now) {
  Turn turn;
  const auto refuse = [&](std::string why) {
    turn.refused = std::move(why);
    return std::move(turn);
  };
  if (done()) return refuse("the dispute is over");
  if (party < 0 || party > 1) return refuse("not a party of this dispute");
  if (env.sender != party_keys_[static_cast<size_t>(party)])
    return refuse("not signed by the party's claim key");
  if (env.context != dispute_id_) return refuse("for another dispute");
  // Opened pieces are taken by their index, once: a replayed one is redundant, and one that comes
  // after a later envelope of the party (reordered, or the answer to a re-ask) is still wanted
  // (docs/protocol.md, "Lost frames"). Every other answer must be newer than the last one accepted.
  const bool piece =
      std::holds_alternative<TensorChunk>(env.body) || std::holds_alternative<Samples>(env.body);
  if (!piece && env.sequence <= last_sequence_[static_cast<size_t>(party)])
    return refuse("stale sequence number (replay)");
  bool authenticated = env.signature_checked;
  const Phase before = game_->phase();
  auto actions = game_->on_message(party, env.body, now, authenticated);
  if (is_refusal(actions) && std::get<Rejected>(actions.front()).needs_signature) {
    // An opened chunk decoded without its signature would count against the party: it must first be
    // shown to be the party's (SignatureCheck::DeferTensorChunks). One that is not changes nothing.
    try {
      check_envelope_signature(env);
    } catch (const WireError& e) {
      return refuse(e.what());
    }
    authenticated = true;
    actions = game_->on_message(party, env.body, now);
  }
  // Only the party's own signature moves its sequence on: an unsigned copy of its chunk (from
  // anyone on the path) must not make the party's next envelopes look stale.
  if (authenticated)
    last_sequence_[static_cast<size_t>(party)] =
        std::max(last_sequence_[static_cast<size_t>(party)], env.sequence);
  const bool redundant = is_refusal(actions) && std::get<Rejected>(actions.front()).redundant;
  if (redundant) return turn;  // the other party's opening came first: nothing to record or report
  if (is_refusal(actions)) {
    turn.rejected = true;
    handle(turn, std::move(actions), now);
    return turn;
  }
  if (const auto* c = std::get_if<TensorChunk>(&env.body); c && c->chunk == 0 && before == Phase::OpenInputs)
    opened_.first.push_back({party, c->value, c->shape, first_elements(c->bytes)});
  // The record keeps the envelope's bytes as received, moved, not copied (an opening's chunks are
  // most of the bytes a dispute receives: docs/performance.md, "The light referee").
  DisputeInput input{DisputeInput::Kind::Envelope, party, std::move(env.bytes), now};
  if (actions.empty() && (game_->phase() == Phase::OpenInputs || game_->phase() == Phase::OpenLog)) {
    // An opening in progress changes nothing durable (a resumed game asks for it whole again): its
    // envelopes, from both parties in the order they were taken, are recorded once it completes or
    // decides something. The logs of a rounding-log node likewise: a log one party completed before a
    // restart is not in the record, so the replayed game asks both parties again.
    opening_.push_back(std::move(input));
    return turn;
  }
  turn.commit = std::move(opening_);  // before what this one causes
  opening_.clear();
  turn.commit.push_back(std::move(input));
  handle(turn, std::move(actions), now);
  if (before == Phase::OpenInputs && turn.opened) {
    // This envelope completed the opening and the node was re-executed: the pieces decide nothing more
    // (the verdict is in this Step), so the record keeps the outcome, which replays to the same verdict,
    // instead of the opened bytes (referee/opened_record.h).
    turn.commit.assign(1, {DisputeInput::Kind::Opened, 0, encode_opened_record(*turn.opened), now});
  }
  return turn;
}

RefereeDispute::Turn RefereeDispute::tick_turn(GameTime now) {
  Turn turn;
  if (done()) return turn;
  auto actions = game_->on_tick(now);
  if (actions.empty()) {
    for (SendQuery& q : game_->reask(now)) {
      if (reask_sub_ + 1 >= (uint64_t{1} << kReaskSequenceBits)) break;  // asked enough: the clock decides
      const uint64_t sequence = (sequence_ & ~((uint64_t{1} << kReaskSequenceBits) - 1)) | ++reask_sub_;
      turn.send.push_back({q.party, sequence, false, std::move(q.query), {}});
    }
    return turn;
  }
  handle(turn, std::move(actions), now);
  turn.commit.push_back({DisputeInput::Kind::Tick, 0, {}, now});
  return turn;
}

RefereeDispute::Turn RefereeDispute::written_turn(int party, uint64_t question, GameTime at) {
  Turn turn;
  if (done() || party < 0 || party > 1 || question == 0 ||
      question != question_sequence_[static_cast<size_t>(party)])
    return turn;
  // Recorded whenever it reaches an open question, changed or not (the same millisecond): so the
  // record of a dispute played without losses has the same inputs however fast its writes were.
  // Only the first write of a question starts its clock: a party that drops its connection gets the
  // question again on the next one (reconnect()) with its clock running on.
  question_sequence_[static_cast<size_t>(party)] = 0;
  if (!game_->awaiting(party)) return turn;
  game_->on_question_written(party, at);
  turn.commit.push_back({DisputeInput::Kind::Asked, party, {}, at});
  return turn;
}

std::optional<GameTime> RefereeDispute::next_wakeup() const {
  if (done()) return std::nullopt;
  return game_->next_deadline();
}

namespace {

// The event naming the referee's recomputed output leaves, which the dispute report shows beside both
// parties' committed ones (referee/report.h parses it): one list when both parties' re-executions give
// the same outputs (a RepOps job), else one per party (a rounding-log job's, each rounded by its own log).
std::string reexecuted_text(uint64_t node, const std::array<PartyReexecution, 2>& outputs) {
  const auto leaves = [](const PartyReexecution& p) {
    std::vector<std::string> hex;
    for (const Digest& d : p.outputs) hex.push_back(to_hex(d));
    return hex.empty() ? std::string("none") : fmt::format("{}", fmt::join(hex, " "));
  };
  if (outputs[0].outputs == outputs[1].outputs)
    return fmt::format("re-executed node {}: output leaves {}", node, leaves(outputs[0]));
  return fmt::format("re-executed node {}: party 0 output leaves {}; party 1 output leaves {}", node,
                     leaves(outputs[0]), leaves(outputs[1]));
}

}  // namespace

ReexecutionOutcome RefereeDispute::run_reexecution(const Reexecute& rx) const {
  ReexecutionOutcome out;
  for (int attempt = 1; attempt <= kReexecuteAttempts; ++attempt) {
    try {
      if (reexecute_hook_) reexecute_hook_(attempt);
      out.outputs = oracle_->reexecute(rx);
      out.kind = ReexecutionOutcome::Kind::Outputs;
      out.events.push_back(
          rx.part ? fmt::format("re-executed chunk {} of output {} of node {}: chunk hash {}", rx.part->chunk,
                                rx.part->slot, rx.node,
                                out.outputs[0].outputs.empty() ? std::string("none")
                                                               : to_hex(out.outputs[0].outputs[0]))
                  : reexecuted_text(rx.node, out.outputs));
      return out;
    } catch (const OpError& e) {
      // The op refuses the inputs both parties committed to (e.g. a label out of range): a fault of
      // every party that committed to running them, so no outputs match.
      out.kind = ReexecutionOutcome::Kind::Refused;
      out.events.push_back(std::string("re-execution refuses the committed inputs: ") + e.what());
      return out;
    } catch (const std::exception& e) {
      // Anything else (bad_alloc, an internal error) is the referee's failure, never a party's.
      out.failure = e.what();
      out.events.push_back(
          fmt::format("re-execution attempt {} of {} failed: {}", attempt, kReexecuteAttempts, out.failure));
    }
  }
  out.kind = ReexecutionOutcome::Kind::Failed;
  return out;
}

std::vector<Action> RefereeDispute::reexecute(Turn& turn, const Reexecute& rx, GameTime now) {
  ReexecutionOutcome outcome;
  if (recorded_) {  // replaying an Opened input: its outcome stands for the re-execution
    if (opened_.node != rx.node)
      throw ProtocolError(fmt::format("the recorded re-execution is of node {}, the game located node {}",
                                      opened_.node, rx.node));
    outcome = std::move(*recorded_);
    recorded_.reset();
  } else {
    // The summary is what the record keeps of the opened inputs (a node without a rounding log) or
    // what a report's replay shows; a rounding-log node's record keeps its opened pieces.
    if (trace_ || !rx.spec.rounding_log) {
      opened_.node = rx.node;
      opened_.whole = whole_inputs(rx);
    }
    outcome = run_reexecution(rx);
  }
  for (const std::string& text : outcome.events) emit(turn, text);
  if (trace_) trace_->opened = opened_;
  if (!rx.spec.rounding_log) turn.opened = OpenedRecord{opened_, outcome};
  switch (outcome.kind) {
    case ReexecutionOutcome::Kind::Outputs:
      return game_->on_reexecuted(outcome.outputs, now);
    case ReexecutionOutcome::Kind::Refused:
      return game_->on_reexecuted(std::vector<Digest>{}, now);
    case ReexecutionOutcome::Kind::Failed:
      break;
  }
  return game_->on_reexecution_failed(outcome.failure, now);
}

void RefereeDispute::handle(Turn& turn, std::vector<Action> actions, GameTime now) {
  for (;;) {
    take_game_events(turn);  // what the game did to make these actions comes first
    if (actions.empty()) return;
    std::vector<Action> next;
    for (Action& a : actions) {
      if (auto* q = std::get_if<SendQuery>(&a)) {
        const uint64_t sequence = next_sequence();
        question_sequence_[static_cast<size_t>(q->party)] = sequence;
        turn.send.push_back({q->party, sequence, true, std::move(q->query), {}});
      } else if (auto* rx = std::get_if<Reexecute>(&a)) {
        emit(turn, fmt::format(
                       "re-executing node {} ({}) of step {} {}", rx->node, op_label(rx->spec.op), rx->step,
                       rx->spec.rounding_log ? "in float64 with each party's rounding log" : "with RepOps"));
        auto more = reexecute(turn, *rx, now);
        next.insert(next.end(), more.begin(), more.end());
      } else if (auto* f = std::get_if<Finished>(&a)) {
        verdict_ = f->verdict;
        verdict_.opening = opening_msg_;
        verdict_envelope_ = seal(key_, dispute_id_, next_sequence(), verdict_);
        turn.decided = true;
        std::string who = is_undecided(verdict_.reason) ? "undecided"
                          : verdict_.winners.empty()    ? "no valid claim"
                                                     : fmt::format("provider {} wins", verdict_.winners[0]);
        emit(turn, fmt::format("verdict: {} ({}) at level {}, step {}, node {}{}; {} rounds", who,
                               reason_name(verdict_.reason), static_cast<int>(verdict_.level), verdict_.step,
                               verdict_.node,
                               verdict_.level == Level::Nodes ? " (" + op_label(verdict_.op) + ")" : "",
                               verdict_.rounds));
        turn.send.push_back({0, 0, false, std::nullopt, *verdict_envelope_});
        turn.send.push_back({1, 0, false, std::nullopt, *verdict_envelope_});
      } else if (auto* r = std::get_if<Rejected>(&a)) {
        emit(turn, fmt::format("refused a message from provider {}: {}", r->party, r->reason));
      }
    }
    actions = std::move(next);
  }
}

Verdict verify_verdict(std::span<const uint8_t> bytes, const PublicKey& referee,
                       const DataRegistry* weights) {
  const Envelope env = open_envelope(bytes);
  if (env.kind != MessageKind::Verdict) throw ProtocolError("not a verdict envelope");
  if (env.sender != referee) throw ProtocolError("the verdict is signed by another key than the referee's");
  const Verdict& v = std::get<Verdict>(env.body);
  if (env.context != v.dispute_id) throw ProtocolError("the verdict is signed for another dispute");
  if (dispute_id(v.opening) != v.dispute_id)
    throw ProtocolError("the verdict's dispute id is not the hash of its opening");
  // The job and data set the opening describes are the ones both providers signed.
  const DisputeOpen& d = v.opening;
  JobSpec job = parse_job(d.job_toml, "the verdict's job");
  if (!job.model.init.empty() || job.model.kind == ModelKind::Onnx) {
    if (weights == nullptr)
      throw ProtocolError(
          job.model.init.empty()
              ? fmt::format("the verdict's job trains the model file '{}' (model.file): it is "
                            "needed to check its job id (--model NAME=PATH)",
                            job.model.file)
              : fmt::format("the verdict's job starts from the weights '{}' (model.init): their "
                            "file is needed to check its job id (--weights NAME=PATH)",
                            job.model.init));
    locate_model_files(job, *weights);
  }
  const DataShape shape{static_cast<int64_t>(d.dataset_samples), static_cast<int64_t>(d.features),
                        static_cast<int64_t>(d.classes), static_cast<int64_t>(d.label_width)};
  if (job_id(job, d.dataset_root, shape) != v.job_id)
    throw ProtocolError("the verdict's job id is not the id of the job and data set in its opening");
  for (size_t i = 0; i < d.claims.size(); ++i) {
    const Claim c = std::get<Claim>(open_claim(d.claims[i], i == 0 ? "claim 0" : "claim 1").body);
    if (c.job_id != v.job_id) throw ProtocolError("a claim in the verdict is for another job");
  }
  const bool undecided = is_undecided(v.reason);
  if (undecided != (v.winners.empty() && v.losers.empty()))
    throw ProtocolError("the verdict's outcome does not fit its reason");
  // A party loses on time only with its clock at zero, and a winner's clock never ran out.
  if (v.reason == VerdictReason::Timeout) {
    const auto ran_out = [&](uint8_t p) { return v.clocks[p] == std::chrono::milliseconds{0}; };
    if (!std::any_of(v.losers.begin(), v.losers.end(), ran_out))
      throw ProtocolError("the verdict says timeout, but no loser's clock ran out");
    if (std::any_of(v.winners.begin(), v.winners.end(), ran_out))
      throw ProtocolError("the verdict says timeout, but a winner's clock ran out");
  }
  return v;
}

}  // namespace tribunal
