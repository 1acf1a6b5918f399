#include "referee/referee_dispute.h"

#include <fmt/format.h>

#include "engine/error.h"
#include "ops/registry.h"
#include "protocol/trajectory.h"

namespace tribunal {
namespace {

Claim open_claim(const std::vector<uint8_t>& bytes, const char* which) {
  const Envelope env = open_envelope(bytes);
  if (env.kind != MessageKind::Claim)
    throw ProtocolError(fmt::format("dispute: {} is not a Claim envelope", which));
  const Claim& c = std::get<Claim>(env.body);
  if (env.context != c.job_id)
    throw ProtocolError(fmt::format("dispute: {} is signed for another job", which));
  return c;
}

std::string op_label(uint8_t op) {
  return op < kOpKindCount ? op_name(static_cast<OpKind>(op)) : "op " + std::to_string(op);
}

// One line per question round, for the structured log.
std::string describe(const Query& q) {
  switch (q.kind) {
    case QueryKind::Children:
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
  }
  return "?";
}

}  // namespace

RefereeDispute::RefereeDispute(const KeyPair& referee_key, const Envelope& open, DisputeOptions options)
    : key_(referee_key), reexecute_hook_(options.reexecute_hook), open_bytes_(open.bytes) {
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
  // A GPT's samples carry a next-token label per position; every other model one class id.
  const uint64_t label_width =
      job_.model.kind == ModelKind::Gpt ? static_cast<uint64_t>(job_.model.context) : 0;
  if (d.label_width != label_width)
    throw ProtocolError("dispute: the data set's label width " + std::to_string(d.label_width) +
                        " does not fit the job (" + std::to_string(label_width) + ")");
  // Cost before work: derived from the job's numbers alone, in time linear in the opening, and
  // checked before the claims' signatures, the job id, the oracle or any graph (engine/cost.h).
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
    params.claims[i] = open_claim(d.claims[i], p == 0 ? "claim 0" : "claim 1");
    party_keys_[i] = open_envelope(d.claims[i]).sender;
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
  dispute_id_ = tribunal::dispute_id(d);
  if (open.context != dispute_id_)
    throw ProtocolError("dispute: the opening is not addressed to its dispute id");
  params.dispute_id = dispute_id_;
  oracle_ = std::make_unique<JobOracle>(job_, shape);
  game_ = std::make_unique<Game>(params, *oracle_);
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
  if (cost.nodes > limits.max_graph_nodes)
    refuse("step graph node count", cost.nodes, limits.max_graph_nodes);
}

std::vector<uint8_t> RefereeDispute::seal_next(const Body& body) {
  sequence_ = ((sequence_ >> kReaskSequenceBits) + 1) << kReaskSequenceBits;
  reask_sub_ = 0;
  // A replayed query was sent by the lost process; resume() re-issues what is still open.
  if (replaying_ && std::holds_alternative<Query>(body)) return {};
  return seal(key_, dispute_id_, sequence_, body);
}

void RefereeDispute::emit(std::string text) {
  if (on_event && (!replaying_ || events_while_replaying_))
    on_event({game_->phase(), game_->rounds(), std::move(text)});
}

void RefereeDispute::record(DisputeInput input) {
  if (replaying_ || !on_input) return;
  on_input(input, done() ? &*verdict_envelope_ : nullptr);
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::start(GameTime now) {
  if (started_) throw ProtocolError("dispute: start() called twice");
  started_ = true;
  std::vector<Outgoing> out = {{0, open_bytes_}, {1, open_bytes_}};
  emit(fmt::format(
      "dispute {} opened: job {}, {} steps, stride {}, {} checkpoints", to_hex(dispute_id_).substr(0, 16),
      to_hex(job_id_).substr(0, 16), job_.steps, job_.stride,
      checkpoint_steps(static_cast<uint64_t>(job_.steps), static_cast<uint64_t>(job_.stride)).size()));
  auto more = handle(game_->start(now), now);
  out.insert(out.end(), more.begin(), more.end());
  record({DisputeInput::Kind::Open, 0, open_bytes_, now});
  return out;
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::resume(GameTime now) {
  if (!started_) throw ProtocolError("dispute: resume() before start()");
  if (done()) return {};
  emit("resumed: re-issuing the open questions with restarted clocks");
  opening_.clear();  // a partial opening is asked for again, whole
  auto out = handle(game_->on_resume(now), now);
  record({DisputeInput::Kind::Resume, 0, {}, now});
  return out;
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::reconnect(int party) const {
  if (done() || party < 0 || party > 1) return {};
  std::vector<Outgoing> out = {{party, open_bytes_}};
  // A question not written yet (the party was not connected when it was asked) starts its clock now.
  if (game_->awaiting(party) && !last_query_[static_cast<size_t>(party)].empty())
    out.push_back(
        {party, last_query_[static_cast<size_t>(party)], question_sequence_[static_cast<size_t>(party)]});
  return out;
}

std::unique_ptr<RefereeDispute> RefereeDispute::replay(const KeyPair& referee_key,
                                                       std::span<const DisputeInput> inputs,
                                                       DisputeOptions options,
                                                       std::function<void(const DisputeEvent&)> events) {
  if (inputs.empty() || inputs[0].kind != DisputeInput::Kind::Open)
    throw ProtocolError("dispute replay: the record does not start with the dispute's opening");
  options.limits.reset();  // a recorded dispute was admitted when it was opened, whatever the limits are now
  auto d = std::make_unique<RefereeDispute>(referee_key, open_envelope(inputs[0].envelope), options);
  d->replaying_ = true;
  d->events_while_replaying_ = static_cast<bool>(events);
  d->on_event = std::move(events);
  d->start(inputs[0].at);
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
        std::string refused;
        Envelope env;
        try {
          env = open_envelope(in.envelope, SignatureCheck::DeferTensorChunks);  // as the node opened it
        } catch (const ProtocolError& e) {
          throw diverged(std::string("its envelope does not open: ") + e.what());
        }
        d->on_envelope(in.party, env, in.at, &refused);
        if (!refused.empty()) throw diverged(refused);
        if (d->refused_by_game_) throw diverged("the game refuses the envelope");
        break;
      }
      case DisputeInput::Kind::Tick:
        d->on_tick(in.at);
        if (!d->done()) throw diverged("the tick decides nothing");
        break;
      case DisputeInput::Kind::Resume:
        d->resume(in.at);
        break;
      case DisputeInput::Kind::Asked:
        if (in.party < 0 || in.party > 1) throw diverged("party out of range");
        if (!d->game_->awaiting(in.party)) throw diverged("the question was not open");
        d->game_->on_question_written(in.party, in.at);
        break;
      default:
        throw diverged("unknown input kind");
    }
  }
  d->replaying_ = false;
  d->events_while_replaying_ = false;
  d->on_event = nullptr;
  return d;
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::on_envelope(int party, const Envelope& env,
                                                                  GameTime now, std::string* refused) {
  const auto refuse = [&](std::string why) {
    if (refused) *refused = std::move(why);
    return std::vector<Outgoing>{};
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
  refused_by_game_ = is_refusal(actions) && !redundant;
  if (redundant) return {};  // the other party's opening came first: nothing to record or report
  if (refused_by_game_) return handle(std::move(actions), now);
  DisputeInput input{DisputeInput::Kind::Envelope, party, env.bytes, now};
  if (actions.empty() && (game_->phase() == Phase::OpenInputs || game_->phase() == Phase::OpenLog)) {
    // An opening in progress changes nothing durable (a resumed game asks for it whole again): its
    // envelopes, from both parties in the order they were taken, are recorded once it completes or
    // decides something. The logs of a rounding-log node likewise: a log one party completed before a
    // restart is not in the record, so the replayed game asks both parties again.
    opening_.push_back(std::move(input));
    return {};
  }
  for (DisputeInput& earlier : opening_) record(std::move(earlier));  // before what this one causes
  opening_.clear();
  auto out = handle(std::move(actions), now);
  record(std::move(input));
  return out;
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::on_tick(GameTime now) {
  if (done()) return {};
  auto actions = game_->on_tick(now);
  if (actions.empty()) {
    std::vector<Outgoing> out;
    if (replaying_) return out;
    for (SendQuery& q : game_->reask(now)) {
      if (reask_sub_ + 1 >= (uint64_t{1} << kReaskSequenceBits)) break;  // asked enough: the clock decides
      const uint64_t sequence = (sequence_ & ~((uint64_t{1} << kReaskSequenceBits) - 1)) | ++reask_sub_;
      out.push_back({q.party, seal(key_, dispute_id_, sequence, q.query)});
    }
    return out;
  }
  auto out = handle(std::move(actions), now);
  record({DisputeInput::Kind::Tick, 0, {}, now});
  return out;
}

void RefereeDispute::on_written(int party, uint64_t question, GameTime at) {
  if (done() || party < 0 || party > 1 || question == 0 ||
      question != question_sequence_[static_cast<size_t>(party)])
    return;
  // Recorded whenever it reaches an open question, changed or not (the same millisecond): so the
  // record of a dispute played without losses has the same inputs however fast its writes were.
  // Only the first write of a question starts its clock: a party that drops its connection gets the
  // question again on the next one (reconnect()) with its clock running on.
  question_sequence_[static_cast<size_t>(party)] = 0;
  if (!game_->awaiting(party)) return;
  game_->on_question_written(party, at);
  record({DisputeInput::Kind::Asked, party, {}, at});
}

std::optional<GameTime> RefereeDispute::next_wakeup() const {
  if (done()) return std::nullopt;
  std::optional<GameTime> next = game_->next_reask();
  for (int p = 0; p < 2; ++p)
    if (game_->awaiting(p)) {
      const GameTime d = game_->deadline(p) + std::chrono::milliseconds(1);
      next = next ? std::min(*next, d) : d;
    }
  return next;
}

std::vector<Action> RefereeDispute::reexecute(const Reexecute& rx, GameTime now) {
  std::string failure;
  for (int attempt = 1; attempt <= kReexecuteAttempts; ++attempt) {
    try {
      if (reexecute_hook_) reexecute_hook_(attempt);
      return game_->on_reexecuted(oracle_->reexecute(rx), now);
    } catch (const OpError& e) {
      // The op refuses the inputs both parties committed to (e.g. a label out of range): a fault of
      // every party that committed to running them, so no outputs match.
      emit(std::string("re-execution refuses the committed inputs: ") + e.what());
      return game_->on_reexecuted(std::vector<Digest>{}, now);
    } catch (const std::exception& e) {
      // Anything else (bad_alloc, an internal error) is the referee's failure, never a party's.
      failure = e.what();
      emit(fmt::format("re-execution attempt {} of {} failed: {}", attempt, kReexecuteAttempts, failure));
    }
  }
  return game_->on_reexecution_failed(failure, now);
}

std::vector<RefereeDispute::Outgoing> RefereeDispute::handle(std::vector<Action> actions, GameTime now) {
  std::vector<Outgoing> out;
  while (!actions.empty()) {
    std::vector<Action> next;
    for (Action& a : actions) {
      if (auto* q = std::get_if<SendQuery>(&a)) {
        const Phase phase = game_->phase();
        if (phase != last_phase_) {
          // Report each narrowing once, when the game moves on to the next level.
          if (phase == Phase::IntervalCommit) {
            const auto cps =
                checkpoint_steps(static_cast<uint64_t>(job_.steps), static_cast<uint64_t>(job_.stride));
            const uint64_t k = game_->located_interval();
            emit(fmt::format("level 1: trajectories first differ at checkpoint {} → interval [{}, {}]", k,
                             cps[k - 1], cps[k]));
          } else if (phase == Phase::StepCommit) {
            emit(
                fmt::format("level 2: step {} is the first whose next state differs", game_->located_step()));
          } else if (phase == Phase::OpenRecords ||
                     (phase == Phase::OpenInputs && last_phase_ != Phase::OpenRecords)) {
            const uint64_t n = game_->located_node();
            const StepGraph& g = oracle_->graph(game_->located_step());
            if (n < g.nodes.size())
              emit(fmt::format("level 3: node records first differ at node {} ({}, output '{}')", n,
                               op_name(g.nodes[n].op), g.values[g.nodes[n].outputs[0]].name));
            else
              emit("level 3: every node record agrees; the next states differ");
          }
          last_phase_ = phase;
        }
        if (q->query.round != last_logged_round_) {
          last_logged_round_ = q->query.round;
          emit(describe(q->query));
        }
        out.push_back({q->party, seal_next(q->query), sequence_});
        last_query_[static_cast<size_t>(q->party)] = out.back().envelope;
        question_sequence_[static_cast<size_t>(q->party)] = sequence_;
        if (replaying_) out.pop_back();
      } else if (auto* rx = std::get_if<Reexecute>(&a)) {
        emit(
            fmt::format("re-executing node {} ({}) of step {} {}", rx->node, op_label(rx->spec.op), rx->step,
                        rx->spec.rounding_log ? "in float64 with each party's rounding log" : "with RepOps"));
        auto more = reexecute(*rx, now);
        next.insert(next.end(), more.begin(), more.end());
      } else if (auto* f = std::get_if<Finished>(&a)) {
        verdict_ = f->verdict;
        verdict_.opening = std::get<DisputeOpen>(open_envelope(open_bytes_).body);
        verdict_envelope_ = seal_next(verdict_);
        std::string who = is_undecided(verdict_.reason) ? "undecided"
                          : verdict_.winners.empty()    ? "no valid claim"
                                                     : fmt::format("provider {} wins", verdict_.winners[0]);
        emit(fmt::format(
            "verdict: {} ({}) at level {}, step {}, node {}{}; {} rounds", who, reason_name(verdict_.reason),
            static_cast<int>(verdict_.level), verdict_.step, verdict_.node,
            verdict_.level == Level::Nodes ? " (" + op_label(verdict_.op) + ")" : "", verdict_.rounds));
        out.push_back({0, *verdict_envelope_});
        out.push_back({1, *verdict_envelope_});
      } else if (auto* r = std::get_if<Rejected>(&a)) {
        emit(fmt::format("refused a message from provider {}: {}", r->party, r->reason));
      }
    }
    actions = std::move(next);
  }
  return out;
}

Verdict verify_verdict(std::span<const uint8_t> bytes, const PublicKey& referee) {
  const Envelope env = open_envelope(bytes);
  if (env.kind != MessageKind::Verdict) throw ProtocolError("not a verdict envelope");
  if (env.sender != referee) throw ProtocolError("the verdict is signed by another key than the referee's");
  const Verdict& v = std::get<Verdict>(env.body);
  if (env.context != v.dispute_id) throw ProtocolError("the verdict is signed for another dispute");
  if (dispute_id(v.opening) != v.dispute_id)
    throw ProtocolError("the verdict's dispute id is not the hash of its opening");
  // The job and data set the opening describes are the ones both providers signed.
  const DisputeOpen& d = v.opening;
  const JobSpec job = parse_job(d.job_toml, "the verdict's job");
  const DataShape shape{static_cast<int64_t>(d.dataset_samples), static_cast<int64_t>(d.features),
                        static_cast<int64_t>(d.classes), static_cast<int64_t>(d.label_width)};
  if (job_id(job, d.dataset_root, shape) != v.job_id)
    throw ProtocolError("the verdict's job id is not the id of the job and data set in its opening");
  for (size_t i = 0; i < d.claims.size(); ++i) {
    const Claim c = open_claim(d.claims[i], i == 0 ? "claim 0" : "claim 1");
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
