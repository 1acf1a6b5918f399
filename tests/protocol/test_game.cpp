// The dispute game on the toy counter program: every divergence point at small sizes, with the
// invariant that the honest party never loses, and the verdict locating the exact step and node.
#include <doctest/doctest.h>

#include <bit>
#include <cstring>
#include <optional>

#include "protocol/game.h"
#include "protocol/testing/counter.h"
#include "tests/game_time.h"

using namespace tribunal;
using namespace tribunal::toy;

using tribunal::testing::at;

namespace {

struct Outcome {
  Verdict verdict;
  uint32_t rounds = 0;
};

uint64_t ceil_log2(uint64_t n) {
  return n <= 1 ? 0 : std::bit_width(n - 1);
}

// Plays `game` to its end, delivering every query to the addressed provider at once; `silent(q)`
// true: that party never answers q (its clock then runs out, unless a question asked again is
// answered). A re-execution is answered by `reexecute`; nothing to deliver lets time pass to the next
// re-ask or deadline, as the referee's timer does (RefereeDispute::on_tick). Returns the verdict.
template <class Silent, class Reexecute_>
Verdict drive(Game& game, const CounterProvider* const (&providers)[2], GameTime& now, Silent silent,
              Reexecute_ reexecute) {
  Verdict verdict;
  std::vector<Action> pending = game.start(now);
  for (int guard = 0; guard < 10000 && !game.done(); ++guard) {
    std::vector<Action> next;
    if (pending.empty()) {
      std::optional<GameTime> next = game.next_reask();
      for (int p = 0; p < 2; ++p)
        if (game.awaiting(p))
          next = std::min(next.value_or(GameTime::max()), game.deadline(p) + std::chrono::milliseconds(1));
      REQUIRE(next);
      now = std::max(now, *next);
      pending = game.on_tick(now);
      if (pending.empty())
        for (SendQuery& q : game.reask(now)) pending.push_back(std::move(q));
      continue;
    }
    for (const Action& a : pending) {
      if (const auto* q = std::get_if<SendQuery>(&a)) {
        if (silent(*q)) continue;
        for (const Body& b : providers[q->party]->answer(q->query)) {
          if (!game.awaiting(q->party)) break;
          auto more = game.on_message(q->party, b, now);
          if (is_refusal(more) && std::get<Rejected>(more.front()).redundant)
            break;  // the other's opening came first
          next.insert(next.end(), more.begin(), more.end());
        }
      } else if (const auto* rx = std::get_if<Reexecute>(&a)) {
        auto more = reexecute(*rx);
        next.insert(next.end(), more.begin(), more.end());
      } else if (const auto* f = std::get_if<Finished>(&a)) {
        verdict = f->verdict;
      } else if (const auto* r = std::get_if<Rejected>(&a)) {
        FAIL("an honest-protocol message was rejected: " << r->reason);
      }
    }
    pending = std::move(next);
  }
  for (const Action& a : pending)
    if (const auto* f = std::get_if<Finished>(&a)) verdict = f->verdict;
  REQUIRE(game.done());
  return verdict;
}

// Plays one dispute to the end. `silent` makes a party never answer (the clock then runs out).
Outcome play(uint64_t steps, uint64_t stride, uint32_t nodes, const CounterProvider& p0,
             const CounterProvider& p1, int silent = -1) {
  CounterOracle oracle(nodes);
  GameParams params;
  params.job_id[0] = 7;
  params.steps = steps;
  params.stride = stride;
  params.claims = {p0.claim(params.job_id), p1.claim(params.job_id)};
  Game game(params, oracle);
  const CounterProvider* providers[2] = {&p0, &p1};
  GameTime now{};
  Outcome out;
  out.verdict = drive(
      game, providers, now, [&](const SendQuery& q) { return q.party == silent; },
      [&](const Reexecute& rx) {
        // The counter's only op: add the two inputs (the constant 1 is the referee's own).
        return game.on_reexecuted(std::vector<Digest>{scalar_leaf(rx.inputs[0][0] + 1.0f)}, now);
      });
  out.rounds = game.rounds();
  return out;
}

/// Six steps of the counter (stride 2, 3 nodes) between an honest party 0 and a liar that corrupts
/// node `bad_node` (2 unless said; node 0 reads the state) of step 3: a dispute that goes down to an
/// opening of the node's inputs.
struct OpeningDispute {
  explicit OpeningDispute(int64_t bad_node = 2) : liar{6, 2, 3, Fault{{}, 3, bad_node}} {}
  CounterOracle oracle{3};
  CounterProvider honest{6, 2, 3};
  CounterProvider liar;
  const CounterProvider* providers[2] = {&honest, &liar};
  GameParams params = [this] {
    GameParams p;
    p.steps = 6;
    p.stride = 2;
    p.claims = {honest.claim(p.job_id), liar.claim(p.job_id)};
    return p;
  }();
};

}  // namespace

TEST_CASE("counter: a corrupted node at every step and node loses, located exactly") {
  int games = 0;
  for (uint64_t steps = 1; steps <= 7; ++steps)
    for (uint64_t stride = 1; stride <= 4; ++stride)
      for (uint32_t nodes = 1; nodes <= 4; ++nodes)
        for (int64_t t = 0; t < static_cast<int64_t>(steps); ++t)
          for (int64_t n = 0; n < nodes; ++n)
            for (int cheater = 0; cheater < 2; ++cheater) {
              CAPTURE(steps);
              CAPTURE(stride);
              CAPTURE(nodes);
              CAPTURE(t);
              CAPTURE(n);
              CAPTURE(cheater);
              const CounterProvider honest(steps, stride, nodes);
              const CounterProvider liar(steps, stride, nodes, Fault{{}, t, n});
              const Outcome o = cheater == 0 ? play(steps, stride, nodes, liar, honest)
                                             : play(steps, stride, nodes, honest, liar);
              REQUIRE(o.verdict.losers == std::vector<uint8_t>{static_cast<uint8_t>(cheater)});
              REQUIRE(o.verdict.winners == std::vector<uint8_t>{static_cast<uint8_t>(1 - cheater)});
              CHECK(o.verdict.reason == VerdictReason::WrongOutput);
              CHECK(o.verdict.level == Level::Nodes);
              CHECK(o.verdict.step == static_cast<uint64_t>(t));
              CHECK(o.verdict.node == static_cast<uint64_t>(n));
              CHECK(o.verdict.op == kAddOp);
              // Rounds: one descent per level plus two commitments, one record opening, one input opening.
              const auto cps = checkpoint_steps(steps, stride);
              const uint64_t bound = ceil_log2(cps.size()) + ceil_log2(stride + 1) + ceil_log2(nodes + 1) + 4;
              CHECK(o.rounds <= bound);
              ++games;
            }
  MESSAGE(games << " games");
}

TEST_CASE("counter: a wrong initial state loses at level 1") {
  for (uint64_t steps = 1; steps <= 6; ++steps)
    for (int cheater = 0; cheater < 2; ++cheater) {
      const CounterProvider honest(steps, 2, 3);
      const CounterProvider liar(steps, 2, 3, Fault{0.25f});
      const Outcome o = cheater == 0 ? play(steps, 2, 3, liar, honest) : play(steps, 2, 3, honest, liar);
      CHECK(o.verdict.losers == std::vector<uint8_t>{static_cast<uint8_t>(cheater)});
      CHECK(o.verdict.reason == VerdictReason::WrongInitialState);
      CHECK(o.verdict.level == Level::Checkpoints);
    }
}

// Wire version 5: a StepCommit carries state_hash(t), not state t's tensor leaves; the leaves a decision
// reads come with the records, each proven under that root. A forged leaf (here the one node 0 of the
// located step reads) must lose the party that sent it, as a forged record does.
TEST_CASE(
    "a state leaf opened with the records that does not prove under state_hash(t) loses with bad_proof") {
  OpeningDispute d(0);  // the liar corrupts node 0, which reads the state
  Game game(d.params, d.oracle);
  std::vector<Action> pending = game.start(at(0));
  std::optional<Verdict> verdict;
  bool forged = false;
  for (int guard = 0; guard < 1000 && !verdict; ++guard) {
    std::vector<Action> next;
    for (const Action& a : pending) {
      if (const auto* f = std::get_if<Finished>(&a)) verdict = f->verdict;
      const auto* q = std::get_if<SendQuery>(&a);
      if (!q) continue;
      for (Body b : d.providers[q->party]->answer(q->query)) {
        if (auto* r = std::get_if<Records>(&b)) {
          REQUIRE(r->state_leaves.size() == 1);  // node 0's state input, and nothing of state t+1
          CHECK(r->post_state.empty());
          if (q->party == 1) r->state_leaves[0][3] ^= 0x01, forged = true;
        }
        auto more = game.on_message(q->party, b, at(1));
        next.insert(next.end(), more.begin(), more.end());
      }
    }
    pending = std::move(next);
  }
  REQUIRE(verdict);
  CHECK(forged);
  CHECK(verdict->reason == VerdictReason::BadProof);
  CHECK(verdict->losers == std::vector<uint8_t>{1});
}

TEST_CASE("counter: a next state that is not the step's own node output loses") {
  for (uint64_t steps = 1; steps <= 6; ++steps)
    for (int64_t t = 0; t < static_cast<int64_t>(steps); ++t) {
      const CounterProvider honest(steps, 3, 2);
      Fault f;
      f.step = t;
      f.lie_post_state = true;
      const CounterProvider liar(steps, 3, 2, f);
      const Outcome o = play(steps, 3, 2, honest, liar);
      CHECK(o.verdict.losers == std::vector<uint8_t>{1});
      CHECK(o.verdict.reason == VerdictReason::WrongPostState);
      CHECK(o.verdict.step == static_cast<uint64_t>(t));
      CHECK(o.verdict.node == 2);  // G: the post-state leaf
    }
}

TEST_CASE("counter: both corrupting the same node differently means no valid claim") {
  const CounterProvider a(5, 2, 3, Fault{{}, 2, 1, 0.5f});
  const CounterProvider b(5, 2, 3, Fault{{}, 2, 1, 0.25f});
  const Outcome o = play(5, 2, 3, a, b);
  CHECK(o.verdict.winners.empty());
  CHECK(o.verdict.losers == std::vector<uint8_t>{0, 1});
  CHECK(o.verdict.reason == VerdictReason::WrongOutput);
  CHECK(o.verdict.step == 2);
  CHECK(o.verdict.node == 1);
}

TEST_CASE("counter: a party that never answers forfeits") {
  const CounterProvider honest(6, 2, 3);
  const CounterProvider liar(6, 2, 3, Fault{{}, 4, 0});
  for (int silent = 0; silent < 2; ++silent) {
    const Outcome o = play(6, 2, 3, silent == 0 ? liar : honest, silent == 0 ? honest : liar, silent);
    CHECK(o.verdict.losers == std::vector<uint8_t>{static_cast<uint8_t>(silent)});
    CHECK(o.verdict.reason == VerdictReason::Timeout);
  }
}

TEST_CASE("the game refuses agreeing claims and answers out of turn without a state change") {
  CounterOracle oracle(2);
  const CounterProvider honest(4, 2, 2);
  GameParams params;
  params.steps = 4;
  params.stride = 2;
  params.claims = {honest.claim(params.job_id), honest.claim(params.job_id)};
  CHECK_THROWS_AS(Game(params, oracle), ProtocolError);

  const CounterProvider liar(4, 2, 2, Fault{{}, 3, 1});
  params.claims = {honest.claim(params.job_id), liar.claim(params.job_id)};
  Game game(params, oracle);
  auto first = game.start(at(0));
  REQUIRE(first.size() == 2);
  const Query q = std::get<SendQuery>(first[0]).query;
  // Wrong round, wrong message type: refused, nothing changes.
  Children stale = std::get<Children>(honest.answer(q)[0]);
  stale.round = q.round + 1;
  auto r = game.on_message(0, stale, at(1));
  REQUIRE(r.size() == 1);
  CHECK(std::holds_alternative<Rejected>(r[0]));
  r = game.on_message(0, Records{q.round, {}, {}, {}}, at(1));
  CHECK(std::holds_alternative<Rejected>(r[0]));
  CHECK(game.rounds() == 1);
  CHECK(game.phase() == Phase::Checkpoints);
  // A valid answer is taken; the same bytes again are a replay; different bytes are equivocation.
  const Children good = std::get<Children>(honest.answer(q)[0]);
  CHECK(game.on_message(0, good, at(2)).empty());
  r = game.on_message(0, good, at(3));
  CHECK(std::holds_alternative<Rejected>(r[0]));
  Children other = good;
  other.left[0] ^= 1;
  r = game.on_message(0, other, at(4));
  REQUIRE(std::holds_alternative<Finished>(r[0]));
  CHECK(std::get<Finished>(r[0]).verdict.reason == VerdictReason::Equivocation);
  CHECK(std::get<Finished>(r[0]).verdict.losers == std::vector<uint8_t>{0});
}

TEST_CASE("an answer that does not hash to the party's commitment loses with bad_proof") {
  CounterOracle oracle(2);
  const CounterProvider honest(4, 2, 2);
  const CounterProvider liar(4, 2, 2, Fault{{}, 3, 1});
  GameParams params;
  params.steps = 4;
  params.stride = 2;
  params.claims = {honest.claim(params.job_id), liar.claim(params.job_id)};
  Game game(params, oracle);
  const Query q = std::get<SendQuery>(game.start(at(0))[1]).query;
  Children forged = std::get<Children>(liar.answer(q)[0]);
  forged.right[5] ^= 0x10;
  auto r = game.on_message(1, forged, at(1));
  REQUIRE(std::holds_alternative<Finished>(r[0]));
  CHECK(std::get<Finished>(r[0]).verdict.reason == VerdictReason::BadProof);
  CHECK(std::get<Finished>(r[0]).verdict.losers == std::vector<uint8_t>{1});
}

TEST_CASE("an opened tensor whose shape is not the graph's loses at its first chunk") {
  // Both parties may be the attacker's: the committed hashes then prove nothing about the size, so
  // the referee holds the shape to the job's graph before it keeps any byte.
  const OpeningDispute d;
  Game game(d.params, d.oracle);
  const CounterProvider* const* providers = d.providers;
  GameTime now{};
  std::vector<Action> pending = game.start(now);
  std::vector<std::string> refused;
  std::optional<Verdict> verdict;
  for (int guard = 0; guard < 1000 && !game.done(); ++guard) {
    if (pending.empty()) {
      for (int p = 0; p < 2; ++p)
        if (game.awaiting(p)) now = std::max(now, game.deadline(p) + std::chrono::milliseconds(1));
      pending = game.on_tick(now);
    }
    std::vector<Action> next;
    for (const Action& a : pending) {
      if (const auto* q = std::get_if<SendQuery>(&a)) {
        for (Body b : providers[q->party]->answer(q->query)) {
          if (auto* c = std::get_if<TensorChunk>(&b)) c->shape = {int64_t{1} << 20, int64_t{1} << 20};
          auto more = game.on_message(q->party, b, now);
          next.insert(next.end(), more.begin(), more.end());
        }
      } else if (const auto* r = std::get_if<Rejected>(&a)) {
        refused.push_back(r->reason);
      } else if (const auto* f = std::get_if<Finished>(&a)) {
        verdict = f->verdict;
      } else {
        FAIL("re-executed inputs that were never opened");
      }
    }
    pending = std::move(next);
  }
  for (const Action& a : pending)
    if (const auto* f = std::get_if<Finished>(&a)) verdict = f->verdict;
  // A signed tensor of another shape is evidence against its sender, like any other bad opening.
  REQUIRE(verdict);
  CHECK(refused.empty());
  CHECK(verdict->reason == VerdictReason::BadProof);
  CHECK(verdict->losers == std::vector<uint8_t>{0});
  CHECK(verdict->detail == "party 0: tensor shape is not the shape of the value in the job's graph");
}

TEST_CASE("clock: time saved on one question carries to the next; a party loses on time only at zero") {
  const CounterProvider honest(8, 2, 3), liar(8, 2, 3, Fault{{}, 5, 1});
  CounterOracle oracle(3);
  GameParams params;
  params.job_id[0] = 9;
  params.steps = 8;
  params.stride = 2;
  params.claims = {honest.claim(params.job_id), liar.claim(params.job_id)};
  params.terms = {std::chrono::milliseconds(1000), std::chrono::milliseconds(100), 1'000'000};
  Game game(params, oracle);
  const auto clock_of = [](const std::vector<Action>& actions, int party) {
    for (const Action& a : actions)
      if (const auto* q = std::get_if<SendQuery>(&a); q && q->party == party) return q->query.clock;
    return std::chrono::milliseconds{-1};
  };
  const auto answer = [](const CounterProvider& p, const std::vector<Action>& actions, int party) {
    for (const Action& a : actions)
      if (const auto* q = std::get_if<SendQuery>(&a); q && q->party == party) return p.answer(q->query).at(0);
    FAIL("no question for party " << party);
    return Body{};
  };
  // Round 1 (a tree question): one base each.
  const std::vector<Action> round1 = game.start(at(0));
  CHECK(clock_of(round1, 0) == std::chrono::milliseconds(1000));
  CHECK(clock_of(round1, 1) == std::chrono::milliseconds(1000));
  CHECK(game.on_message(0, answer(honest, round1, 0), at(100)).empty());                    // 900 ms saved
  const std::vector<Action> round2 = game.on_message(1, answer(liar, round1, 1), at(900));  // 100 ms saved
  // Round 2: each clock is what it saved plus the new allowance.
  CHECK(clock_of(round2, 0) == std::chrono::milliseconds(1900));
  CHECK(clock_of(round2, 1) == std::chrono::milliseconds(1100));
  CHECK(game.deadline(0) == at(900 + 1900));
  CHECK(game.deadline(1) == at(900 + 1100));
  // Party 0 answers after more than one allowance but within its clock: accepted.
  CHECK(game.on_message(0, answer(honest, round2, 0), at(900 + 1500)).empty());
  // Party 1 stays silent: at its clock's end, not before, it loses on time.
  CHECK(game.on_tick(at(900 + 1100)).empty());
  const std::vector<Action> end = game.on_tick(at(900 + 1101));
  REQUIRE(end.size() == 1);
  const Verdict& v = std::get<Finished>(end[0]).verdict;
  CHECK(v.reason == VerdictReason::Timeout);
  CHECK(v.losers == std::vector<uint8_t>{1});
  CHECK(v.clocks ==
        std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(400), std::chrono::milliseconds(0)});
}

TEST_CASE("clock: a recomputation's allowance counts its steps, an opening's its bytes") {
  const DisputeTerms terms{std::chrono::milliseconds(1000), std::chrono::milliseconds(250), 1000};
  CHECK(allowance(terms, 0, 0) == std::chrono::milliseconds(1000));
  CHECK(allowance(terms, 4, 0) == std::chrono::milliseconds(2000));
  CHECK(allowance(terms, 0, 1500) == std::chrono::milliseconds(2500));  // 1.5 s at 1000 B/s
  CHECK(allowance(terms, 0, 1) == std::chrono::milliseconds(1001));     // rounded up
}

TEST_CASE("an opened chunk is taken without its signature only when it proves itself") {
  // The referee defers the signature of tensor chunks (SignatureCheck::DeferTensorChunks): a chunk
  // that does not prove itself must not count against a party before it is shown to be the party's.
  const OpeningDispute d;
  Game game(d.params, d.oracle);
  const CounterProvider* const* providers = d.providers;
  GameTime now{};
  std::vector<Action> pending = game.start(now);
  int unsigned_refusals = 0, unsigned_accepted = 0;
  std::optional<Verdict> verdict;
  for (int guard = 0; guard < 1000 && !game.done(); ++guard) {
    REQUIRE(!pending.empty());
    std::vector<Action> next;
    for (const Action& a : pending) {
      if (const auto* q = std::get_if<SendQuery>(&a)) {
        for (const Body& b : providers[q->party]->answer(q->query)) {
          if (!game.awaiting(q->party)) break;
          if (!std::holds_alternative<TensorChunk>(b)) {
            // Anything else must be signed: unsigned, it is refused and changes nothing.
            const auto r = game.on_message(q->party, b, now, false);
            REQUIRE(is_refusal(r));
            CHECK(std::get<Rejected>(r[0]).needs_signature);
            CHECK(game.awaiting(q->party));
          } else {
            // A corrupted chunk, unsigned: refused, asking for the signature; the game is unchanged.
            TensorChunk bad = std::get<TensorChunk>(b);
            bad.bytes[0] ^= 1;
            const auto r = game.on_message(q->party, bad, now, false);
            REQUIRE(is_refusal(r));
            CHECK(std::get<Rejected>(r[0]).needs_signature);
            CHECK(!game.done());
            ++unsigned_refusals;
            // The genuine chunk, unsigned: accepted.
            auto more = game.on_message(q->party, b, now, false);
            CHECK(!is_refusal(more));
            ++unsigned_accepted;
            next.insert(next.end(), more.begin(), more.end());
            continue;
          }
          auto more = game.on_message(q->party, b, now);
          next.insert(next.end(), more.begin(), more.end());
        }
      } else if (const auto* rx = std::get_if<Reexecute>(&a)) {
        auto more = game.on_reexecuted(std::vector<Digest>{scalar_leaf(rx->inputs[0][0] + 1.0f)}, now);
        next.insert(next.end(), more.begin(), more.end());
      } else if (const auto* f = std::get_if<Finished>(&a)) {
        verdict = f->verdict;
      } else if (const auto* r = std::get_if<Rejected>(&a)) {
        FAIL("an honest-protocol message was rejected: " << r->reason);
      }
    }
    pending = std::move(next);
  }
  for (const Action& a : pending)
    if (const auto* f = std::get_if<Finished>(&a)) verdict = f->verdict;
  REQUIRE(verdict);
  CHECK(unsigned_refusals >= 1);
  CHECK(unsigned_accepted >= 1);
  CHECK(verdict->reason == VerdictReason::WrongOutput);
  CHECK(verdict->losers == std::vector<uint8_t>{1});

  // The same corrupted chunk, signed, is evidence: bad_proof.
  Game signed_game(d.params, d.oracle);
  pending = signed_game.start(now);
  for (int guard = 0; guard < 1000 && !signed_game.done() && signed_game.phase() != Phase::OpenInputs;
       ++guard) {
    std::vector<Action> next;
    for (const Action& a : pending)
      if (const auto* q = std::get_if<SendQuery>(&a))
        for (const Body& b : providers[q->party]->answer(q->query)) {
          auto more = signed_game.on_message(q->party, b, now);
          next.insert(next.end(), more.begin(), more.end());
        }
    pending = std::move(next);
  }
  REQUIRE(signed_game.phase() == Phase::OpenInputs);
  Body chunk = providers[0]->answer(signed_game.current_query()).at(0);
  REQUIRE(std::holds_alternative<TensorChunk>(chunk));
  std::get<TensorChunk>(chunk).bytes[0] ^= 1;
  const auto r = signed_game.on_message(0, chunk, now);
  REQUIRE(r.size() == 1);
  REQUIRE(std::holds_alternative<Finished>(r[0]));
  CHECK(std::get<Finished>(r[0]).verdict.reason == VerdictReason::BadProof);
  CHECK(std::get<Finished>(r[0]).verdict.losers == std::vector<uint8_t>{0});
}

// ---- Rounding-log jobs (docs/protocol.md, "Rounding-log jobs") ----

namespace {

struct LoggedOutcome {
  Verdict verdict;
  uint32_t rounds = 0;
  std::array<int, 2> log_queries{};          // OpenLog questions put to each party
  std::array<std::vector<uint8_t>, 2> logs;  // the logs the re-execution received
};

// Plays the counter's rounding-log variant. The referee replays each party's log on its value x + 1:
// Nearest and Down (the log's byte 0 or 1) round to x + 1, Up (2) to the float32 above; with
// `refuse_up` its value is far from a boundary and Up is refused. A party that is `silent_on_log`
// never answers OpenLog.
LoggedOutcome play_logged(const CounterProvider& p0, const CounterProvider& p1, bool refuse_up = true,
                          int silent_on_log = -1) {
  CounterOracle oracle(3, true);
  GameParams params;
  params.steps = 6;
  params.stride = 2;
  params.claims = {p0.claim(params.job_id), p1.claim(params.job_id)};
  Game game(params, oracle);
  const CounterProvider* providers[2] = {&p0, &p1};
  GameTime now{};
  LoggedOutcome out;
  out.verdict = drive(
      game, providers, now,
      [&](const SendQuery& q) {
        if (q.query.kind != QueryKind::OpenLog) return false;
        ++out.log_queries[q.party];
        CHECK(q.query.indices.size() == 1);
        return q.party == silent_on_log;
      },
      [&](const Reexecute& rx) {
        REQUIRE(rx.spec.rounding_log);
        out.logs = rx.logs;
        std::array<PartyReexecution, 2> result;
        for (int p = 0; p < 2; ++p) {
          REQUIRE(rx.logs[p].size() == 1);
          const float z = rx.inputs[0][0] + 1.0f;
          if (rx.logs[p][0] == 2 && refuse_up)
            result[p].bad_log = "up is not allowed here";
          else
            result[p].outputs = {scalar_leaf(rx.logs[p][0] == 2 ? std::nextafter(z, INFINITY) : z)};
        }
        return game.on_reexecuted(result, now);
      });
  out.rounds = game.rounds();
  return out;
}

}  // namespace

TEST_CASE("rounding log: each party opens its own log; a refused decision loses with bad_rounding_log") {
  Fault forged;
  forged.log_step = 3;
  forged.log_node = 1;
  forged.log_trit = 2;  // Up, which the referee's value refuses
  const CounterProvider honest(6, 2, 3, {}, true), liar(6, 2, 3, forged, true);
  for (int cheater = 0; cheater < 2; ++cheater) {
    CAPTURE(cheater);
    const LoggedOutcome o = cheater == 0 ? play_logged(liar, honest) : play_logged(honest, liar);
    CHECK(o.verdict.reason == VerdictReason::BadRoundingLog);
    CHECK(o.verdict.losers == std::vector<uint8_t>{static_cast<uint8_t>(cheater)});
    CHECK(o.verdict.winners == std::vector<uint8_t>{static_cast<uint8_t>(1 - cheater)});
    CHECK(o.verdict.step == 3);
    CHECK(o.verdict.node == 1);
    CHECK(o.verdict.op == kAddOp);
    CHECK(o.log_queries == std::array<int, 2>{1, 1});  // one OpenLog round, asked of both
    // Each party's own log reached the re-execution, not one shared opening.
    CHECK(o.logs[cheater] == std::vector<uint8_t>{2});
    CHECK(o.logs[1 - cheater] == std::vector<uint8_t>{0});
    CHECK(o.verdict.detail.find("up is not allowed here") != std::string::npos);
  }
}

TEST_CASE("rounding log: two allowed logs that replay to each party's outputs end both_valid, undecided") {
  Fault other;
  other.log_step = 3;
  other.log_node = 2;  // state 4 = 12 + ulp, a checkpoint
  other.log_trit = 2;  // Up: allowed here (the referee's value is near a boundary), one ulp above
  const CounterProvider a(6, 2, 3, {}, true), b(6, 2, 3, other, true);
  const LoggedOutcome o = play_logged(a, b, false);
  CHECK(o.verdict.reason == VerdictReason::BothValid);
  CHECK(o.verdict.winners.empty());
  CHECK(o.verdict.losers.empty());
  CHECK(o.verdict.step == 3);
  CHECK(o.verdict.node == 2);
  CHECK(o.logs[0] == std::vector<uint8_t>{0});
  CHECK(o.logs[1] == std::vector<uint8_t>{2});
  CHECK(is_undecided(o.verdict.reason));
}

TEST_CASE("rounding log: a corrupted output with an honest log loses with wrong_output") {
  const CounterProvider honest(6, 2, 3, {}, true), liar(6, 2, 3, Fault{{}, 2, 0}, true);
  const LoggedOutcome o = play_logged(honest, liar);
  CHECK(o.verdict.reason == VerdictReason::WrongOutput);
  CHECK(o.verdict.losers == std::vector<uint8_t>{1});
  CHECK(o.verdict.winners == std::vector<uint8_t>{0});
  CHECK(o.verdict.step == 2);
  CHECK(o.verdict.node == 0);
  CHECK(o.log_queries == std::array<int, 2>{1, 1});
}

TEST_CASE(
    "rounding log: a log that does not open against the party's record is bad_proof; silence is timeout") {
  Fault bad;
  bad.step = 1;
  bad.node = 1;
  bad.bad_log_proof = true;
  const CounterProvider honest(6, 2, 3, {}, true), liar(6, 2, 3, bad, true);
  const LoggedOutcome o = play_logged(liar, honest);
  CHECK(o.verdict.reason == VerdictReason::BadProof);
  CHECK(o.verdict.losers == std::vector<uint8_t>{0});
  CHECK(o.verdict.winners == std::vector<uint8_t>{1});
  CHECK(o.verdict.detail.find("rounding log") != std::string::npos);

  const CounterProvider corrupt(6, 2, 3, Fault{{}, 1, 1}, true);
  const LoggedOutcome t = play_logged(honest, corrupt, true, 1);
  CHECK(t.verdict.reason == VerdictReason::Timeout);
  CHECK(t.verdict.losers == std::vector<uint8_t>{1});
  CHECK(t.verdict.winners == std::vector<uint8_t>{0});
  CHECK(t.verdict.clocks[1] == std::chrono::milliseconds{0});
  CHECK(t.verdict.clocks[0] > std::chrono::milliseconds{0});
}

TEST_CASE("rounding log: a RepOps game asks no OpenLog") {
  const CounterProvider honest(6, 2, 3), liar(6, 2, 3, Fault{{}, 3, 2});
  const Outcome o = play(6, 2, 3, honest, liar);
  CHECK(o.verdict.reason == VerdictReason::WrongOutput);
  const auto cps = checkpoint_steps(6, 2);
  CHECK(o.rounds <= ceil_log2(cps.size()) + ceil_log2(3) + ceil_log2(4) + 4);
}

TEST_CASE("rounding log: on resume during OpenLog only a party whose log is incomplete is asked again") {
  Fault forged;
  forged.log_step = 3;
  forged.log_node = 1;
  forged.log_trit = 2;
  const CounterProvider honest(6, 2, 3, {}, true), liar(6, 2, 3, forged, true);
  CounterOracle oracle(3, true);
  GameParams params;
  params.steps = 6;
  params.stride = 2;
  params.claims = {honest.claim(params.job_id), liar.claim(params.job_id)};
  Game game(params, oracle);
  const CounterProvider* providers[2] = {&honest, &liar};
  std::vector<Action> pending = game.start(GameTime{});
  // Deliver everything until the logs are asked for; then only party 0's log.
  for (int guard = 0; guard < 100 && game.phase() != Phase::OpenLog; ++guard) {
    std::vector<Action> next;
    for (const Action& a : pending)
      if (const auto* q = std::get_if<SendQuery>(&a))
        for (const Body& b : providers[q->party]->answer(q->query)) {
          if (!game.awaiting(q->party) || game.current_query().round != q->query.round) break;
          auto more = game.on_message(q->party, b, GameTime{});
          next.insert(next.end(), more.begin(), more.end());
        }
    pending = std::move(next);
  }
  REQUIRE(game.phase() == Phase::OpenLog);
  const Query log_query = game.current_query();
  CHECK(log_query.kind == QueryKind::OpenLog);
  for (const Body& b : honest.answer(log_query)) CHECK(game.on_message(0, b, GameTime{}).empty());
  CHECK_FALSE(game.awaiting(0));
  CHECK(game.awaiting(1));
  const std::vector<Action> resumed = game.on_resume(at(1000));
  REQUIRE(resumed.size() == 1);
  CHECK(std::get<SendQuery>(resumed[0]).party == 1);
  CHECK(std::get<SendQuery>(resumed[0]).query.kind == QueryKind::OpenLog);
  std::vector<Action> out;
  for (const Body& b : liar.answer(log_query)) out = game.on_message(1, b, at(1000));
  REQUIRE(out.size() == 1);
  const Reexecute& rx = std::get<Reexecute>(out[0]);
  CHECK(rx.logs[0] == std::vector<uint8_t>{0});
  CHECK(rx.logs[1] == std::vector<uint8_t>{2});
}

// Lost frames (docs/protocol.md, "Lost frames"): the question of round `r` to the honest party, or
// its answer, never arrives once (to the game both are a question that goes unanswered); the referee
// asks again after the party's silence, and the honest party still wins, whichever round it was and
// whichever seat it has.
TEST_CASE("lost frames: a dropped question or answer of any round is asked again and the honest party wins") {
  for (int honest_seat = 0; honest_seat < 2; ++honest_seat)
    for (uint32_t lost_round = 1; lost_round <= 12; ++lost_round) {
      CAPTURE(honest_seat);
      CAPTURE(lost_round);
      CounterOracle oracle(3);
      const CounterProvider honest{6, 2, 3}, liar{6, 2, 3, Fault{{}, 3, 2}};
      const CounterProvider* providers[2] = {honest_seat == 0 ? &honest : &liar,
                                             honest_seat == 0 ? &liar : &honest};
      GameParams params;
      params.steps = 6;
      params.stride = 2;
      params.claims = {providers[0]->claim(params.job_id), providers[1]->claim(params.job_id)};
      Game game(params, oracle);
      GameTime now{};
      int asked = 0;  // how often the lost round was put to the honest party
      QueryKind lost_kind = QueryKind::Children;
      const Verdict verdict = drive(
          game, providers, now,
          [&](const SendQuery& q) {
            if (q.party != honest_seat || q.query.round != lost_round) return false;
            lost_kind = q.query.kind;
            return ++asked == 1;
          },
          [&](const Reexecute& rx) {
            return game.on_reexecuted(std::vector<Digest>{scalar_leaf(rx.inputs[0][0] + 1.0f)}, now);
          });
      if (lost_round > game.rounds()) continue;  // the dispute ended before that round
      // A lost piece of an opening may come from the other party instead: then nothing is asked again.
      CHECK((asked >= 2 || lost_kind == QueryKind::OpenInputs));
      CHECK(verdict.reason == VerdictReason::WrongOutput);
      CHECK(verdict.winners == std::vector<uint8_t>{static_cast<uint8_t>(honest_seat)});
      CHECK(verdict.clocks[static_cast<size_t>(honest_seat)] > std::chrono::milliseconds{0});
    }
}

TEST_CASE("clocks: a question's clock starts when it is written to the party, not when it was decided") {
  const OpeningDispute d;
  Game game(d.params, d.oracle);
  const GameTime t0 = at(1000);
  game.start(t0);
  const GameTime asked = game.deadline(0);
  CHECK(asked == t0 + d.params.terms.base);
  // The referee was slow to write party 0's question (its queues, a store commit): 4 s later.
  CHECK(game.on_question_written(0, t0 + std::chrono::milliseconds{4000}));
  CHECK(game.deadline(0) == asked + std::chrono::milliseconds{4000});
  CHECK(game.deadline(1) == asked);
  CHECK_FALSE(game.on_question_written(0, t0 + std::chrono::milliseconds{3000}));  // never earlier
  // The party answers 9 s after the question was written: within its 10 s, so it is not charged for the
  // referee's 4 s (judged from the decision, it would have been 13 s: a timeout).
  const auto answers = d.providers[0]->answer(game.current_query());
  const auto more = game.on_message(0, answers.at(0), t0 + std::chrono::milliseconds{13000});
  CHECK_FALSE(is_refusal(more));
  CHECK(game.on_tick(t0 + std::chrono::milliseconds{13000}).empty() ==
        false);  // party 1 never answered: it loses on time
}

TEST_CASE("re-asks: a silent party is asked again a quarter of the base after it was last heard, doubling") {
  const OpeningDispute d;
  Game game(d.params, d.oracle);
  const GameTime t0 = at(0);
  game.start(t0);
  const auto base = d.params.terms.base;  // 10 s
  REQUIRE(game.next_reask() == t0 + base / 4);
  CHECK(game.reask(t0 + base / 4 - std::chrono::milliseconds{1}).empty());
  auto re = game.reask(t0 + base / 4);
  REQUIRE(re.size() == 2);  // both silent
  CHECK(re[0].query.round == 1);
  CHECK(re[0].query.clock == base - base / 4);           // what is left of the clock
  CHECK(game.next_reask() == t0 + base / 4 + base / 2);  // doubled
  // An answer from party 0: its re-asks stop; party 1's go on.
  game.on_message(0, d.providers[0]->answer(game.current_query()).at(0),
                  t0 + std::chrono::milliseconds{3000});
  re = game.reask(t0 + base / 4 + base / 2);
  REQUIRE(re.size() == 1);
  CHECK(re[0].party == 1);
}

TEST_CASE("next_deadline: the earliest re-ask or 1 ms past an awaited party's deadline; none once done") {
  const CounterProvider honest(8, 2, 3), liar(8, 2, 3, Fault{{}, 5, 1});
  CounterOracle oracle(3);
  GameParams params;
  params.job_id[0] = 9;
  params.steps = 8;
  params.stride = 2;
  params.claims = {honest.claim(params.job_id), liar.claim(params.job_id)};
  params.terms = {std::chrono::milliseconds(1000), std::chrono::milliseconds(100), 1'000'000};
  Game game(params, oracle);
  CHECK_FALSE(game.next_deadline());  // nothing asked yet
  game.start(at(0));
  // Both asked at 0 with 1000 ms: the first re-ask (a quarter of the base, at least 250 ms) comes first.
  CHECK(game.next_deadline() == at(250));
  REQUIRE(game.reask(at(250)).size() == 2);
  CHECK(game.next_deadline() == at(750));  // the re-ask wait doubles
  REQUIRE(game.reask(at(750)).size() == 2);
  CHECK(game.next_deadline() == at(1001));  // the next re-ask (1750) is past the deadline's tick
  // Party 0 answers: only party 1 is awaited.
  CHECK(game.on_message(0, honest.answer(game.current_query()).at(0), at(800)).empty());
  CHECK_FALSE(game.awaiting(0));
  CHECK(game.next_deadline() == at(1001));
  CHECK_FALSE(game.overdue(0, at(5000)));  // answered: never overdue
  CHECK_FALSE(game.overdue(1, at(1000)));
  CHECK(game.overdue(1, at(1001)));
  CHECK(game.on_tick(at(1000)).empty());
  REQUIRE(game.on_tick(at(1001)).size() == 1);  // what next_deadline said: party 1 forfeits
  CHECK(game.done());
  CHECK_FALSE(game.next_deadline());
  CHECK_FALSE(game.overdue(1, at(5000)));
}

TEST_CASE(
    "poll_event: one Round per question round and one Located per level, in the order the game made them") {
  const OpeningDispute d;
  Game game(d.params, d.oracle);
  CHECK_FALSE(game.poll_event());
  GameTime now{};
  const Verdict v = drive(
      game, d.providers, now, [](const SendQuery&) { return false; },
      [&](const Reexecute& rx) {
        return game.on_reexecuted(std::vector<Digest>{scalar_leaf(rx.inputs[0][0] + 1.0f)}, now);
      });
  CHECK(v.losers == std::vector<uint8_t>{1});
  std::vector<GameEvent> events;
  while (auto e = game.poll_event()) events.push_back(std::move(*e));
  CHECK_FALSE(game.poll_event());  // taken once
  REQUIRE_FALSE(events.empty());
  CHECK(events.front().kind == GameEvent::Kind::Round);
  CHECK(events.front().query.kind == QueryKind::Children);
  CHECK(events.front().query.level == Level::Checkpoints);
  uint32_t rounds = 0;
  std::vector<std::pair<Level, uint64_t>> located;
  for (size_t i = 0; i < events.size(); ++i) {
    const GameEvent& e = events[i];
    if (e.kind == GameEvent::Kind::Round) {
      CHECK(e.query.round == ++rounds);
      continue;
    }
    located.emplace_back(e.level, e.index);
    // A hand-off is followed by the next level's first question.
    REQUIRE(i + 1 < events.size());
    const Query& next = events[i + 1].query;
    CHECK(events[i + 1].kind == GameEvent::Kind::Round);
    const QueryKind expected = e.level == Level::Checkpoints ? QueryKind::CommitInterval
                               : e.level == Level::Steps     ? QueryKind::CommitStep
                                                             : QueryKind::OpenRecords;
    CHECK(next.kind == expected);
  }
  CHECK(rounds == game.rounds());
  const std::vector<std::pair<Level, uint64_t>> expected = {
      {Level::Checkpoints, game.located_interval()}, {Level::Steps, 3}, {Level::Nodes, 2}};
  CHECK(located == expected);
  CHECK(game.located_interval() == 2);  // step 3 lies in checkpoint interval [2, 4]
}
