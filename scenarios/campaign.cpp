#include "scenarios/campaign.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <random>

#include "protocol/game.h"
#include "protocol/testing/counter.h"
#include "protocol/wire.h"

namespace tribunal {
namespace {

using namespace toy;

// How the cheater lies in the bisection, on top of its wrong trace.
enum class Lie { None, FlipBit, Equivocate, Silent, Late, Garbage, CopyHonest, Replay, Count };

const char* lie_name(Lie l) {
  switch (l) {
    case Lie::None:
      return "wrong_trace_only";
    case Lie::FlipBit:
      return "answer_fails_its_proof";
    case Lie::Equivocate:
      return "two_answers_one_question";
    case Lie::Silent:
      return "falls_silent";
    case Lie::Late:
      return "answers_after_deadline";
    case Lie::Garbage:
      return "wrong_kind_and_stale_messages";
    case Lie::CopyHonest:
      return "copies_the_honest_answer";
    case Lie::Replay:
      return "replays_an_old_answer";
    case Lie::Count:
      break;
  }
  return "?";
}

// Flips one bit of a digest inside the body, whatever its kind.
void flip_bit(Body& body, uint32_t which) {
  const uint8_t mask = static_cast<uint8_t>(1u << (which % 8));
  std::visit(
      [&](auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, Children>)
          (which & 8 ? m.left : m.right)[which % 32] ^= mask;
        else if constexpr (std::is_same_v<M, IntervalCommit>)
          m.start_value[which % 32] ^= mask;
        else if constexpr (std::is_same_v<M, StepCommit>)
          m.pre_root[which % 32] ^= mask;
        else if constexpr (std::is_same_v<M, Records>)
          m.records.at(0).outputs.at(0)[which % 32] ^= mask;
        else if constexpr (std::is_same_v<M, TensorChunk>)
          m.bytes.at(which % m.bytes.size()) ^= mask;
      },
      body);
}

struct Game1 {
  bool honest_lost = false;
  bool cheater_lost = false;
  bool lie_fired = false;  // the drawn lie was told (its round came and it changed an answer)
  bool loserless = false;  // the verdict convicted no one
  std::string reason;
  std::string misplaced;  // why the verdict names another place than the fault, if it does
};

}  // namespace

std::string misplacement(const Verdict& v, const toy::Fault& fault) {
  switch (v.reason) {
    case VerdictReason::WrongInitialState:
      return fault.initial ? "" : "wrong_initial_state for a fault at a step";
    case VerdictReason::WrongPostState:
      if (!fault.lie_post_state) return "wrong_post_state for a fault that is not a lying next state";
      return v.step == static_cast<uint64_t>(fault.step)
                 ? ""
                 : "wrong_post_state at step " + std::to_string(v.step) + ", the fault is at step " +
                       std::to_string(fault.step);
    case VerdictReason::WrongOutput:
      if (fault.node < 0 || fault.lie_post_state)
        return "wrong_output for a fault that is not a wrong node output";
      if (v.step != static_cast<uint64_t>(fault.step) || v.node != static_cast<uint64_t>(fault.node))
        return "wrong_output at step " + std::to_string(v.step) + " node " + std::to_string(v.node) +
               ", the fault is at step " + std::to_string(fault.step) + " node " + std::to_string(fault.node);
      return "";
    default:
      return "";  // timeout, bad_proof, equivocation: about the answers, not the work
  }
}

namespace {

Game1 play_one(uint64_t seed, Lie& lie_out) {
  std::mt19937_64 rng(seed);
  auto pick = [&](uint64_t n) { return rng() % n; };
  const uint64_t steps = 1 + pick(12), stride = 1 + pick(5);
  const uint32_t nodes = static_cast<uint32_t>(1 + pick(5));
  const int cheater = static_cast<int>(pick(2));
  Fault fault;
  switch (pick(4)) {
    case 0:
      fault.initial = 0.25f;
      break;
    case 1:
      fault.step = static_cast<int64_t>(pick(steps));
      fault.lie_post_state = true;
      break;
    default:
      fault.step = static_cast<int64_t>(pick(steps));
      fault.node = static_cast<int64_t>(pick(nodes));
      break;
  }
  const Lie lie = static_cast<Lie>(pick(static_cast<uint64_t>(Lie::Count)));
  lie_out = lie;
  const uint32_t lie_round = static_cast<uint32_t>(1 + pick(12));
  const uint32_t which = static_cast<uint32_t>(rng());

  const CounterProvider honest(steps, stride, nodes), liar(steps, stride, nodes, fault);
  CounterOracle oracle(nodes);
  GameParams params;
  params.steps = steps;
  params.stride = stride;
  params.claims[static_cast<size_t>(cheater)] = liar.claim({});
  params.claims[static_cast<size_t>(1 - cheater)] = honest.claim({});
  Game1 result;
  if (params.claims[0].trajectory_root == params.claims[1].trajectory_root) return result;  // no dispute
  Game game(params, oracle);

  GameTime now{};
  std::optional<Body> previous;  // the cheater's last answer, for replays
  std::deque<Action> pending;
  for (auto& a : game.start(now)) pending.push_back(std::move(a));
  const auto check = [&](const std::vector<Action>& actions) {
    for (const Action& a : actions)
      if (const auto* f = std::get_if<Finished>(&a)) {
        for (uint8_t l : f->verdict.losers) (l == cheater ? result.cheater_lost : result.honest_lost) = true;
        result.reason = reason_name(f->verdict.reason);
        result.loserless = f->verdict.losers.empty();
        result.misplaced = misplacement(f->verdict, fault);
      }
  };
  for (int guard = 0; guard < 1000 && !game.done(); ++guard) {
    if (pending.empty()) {  // everyone is waiting: let the clock run out
      for (int p = 0; p < 2; ++p)
        if (game.awaiting(p)) now = std::max(now, game.deadline(p) + std::chrono::milliseconds(1));
      auto more = game.on_tick(now);
      check(more);
      for (auto& a : more) pending.push_back(std::move(a));
      continue;
    }
    const Action a = std::move(pending.front());
    pending.pop_front();
    std::vector<Action> more;
    if (const auto* q = std::get_if<SendQuery>(&a)) {
      // A late cheater answers after the honest party has (which answered in time): deliver the
      // honest answer of the same round first, since the clock only moves forward.
      if (q->party == cheater && lie == Lie::Late && q->query.round == lie_round &&
          std::any_of(pending.begin(), pending.end(), [&](const Action& p) {
            const auto* other = std::get_if<SendQuery>(&p);
            return other && other->party != cheater;
          })) {
        pending.push_back(a);
        continue;
      }
      std::vector<Body> answers = (q->party == cheater ? liar : honest).answer(q->query);
      if (q->party == cheater && q->query.round >= lie_round) {
        const bool now_round = q->query.round == lie_round;
        switch (lie) {
          case Lie::FlipBit:
            if (now_round) flip_bit(answers.front(), which), result.lie_fired = true;
            break;
          case Lie::Equivocate:
            if (now_round && answers.size() == 1) {
              Body other = answers.front();
              flip_bit(other, which);
              answers.push_back(other);
              result.lie_fired = true;
            }
            break;
          case Lie::Silent:
            answers.clear(), result.lie_fired = true;
            break;
          case Lie::Late:
            if (now_round)
              now = std::max(now, q->deadline + std::chrono::milliseconds(1)), result.lie_fired = true;
            break;
          case Lie::Garbage:
            if (now_round) {
              answers.insert(answers.begin(), Body{Records{q->query.round, {1}, {}, {}}});
              answers.insert(answers.begin(), Body{Children{q->query.round + 7, {}, {}}});
              result.lie_fired = true;
            }
            break;
          case Lie::CopyHonest:
            if (now_round) answers = honest.answer(q->query), result.lie_fired = true;
            break;
          case Lie::Replay:
            if (now_round && previous) answers.insert(answers.begin(), *previous), result.lie_fired = true;
            break;
          default:
            break;
        }
      }
      if (q->party == cheater && !answers.empty()) previous = answers.back();
      for (const Body& b : answers) {
        auto m = game.on_message(q->party, b, now);
        more.insert(more.end(), m.begin(), m.end());
      }
    } else if (const auto* rx = std::get_if<Reexecute>(&a)) {
      more = game.on_reexecuted(std::vector<Digest>{scalar_leaf(rx->inputs[0][0] + 1.0f)}, now);
    }
    check(more);
    if (result.honest_lost) break;  // checked after every round: stop at the first violation
    for (auto& m : more) pending.push_back(std::move(m));
  }
  if (!game.done() && !result.honest_lost) result.reason = "unfinished";
  if (lie == Lie::None) result.lie_fired = true;  // the wrong trace itself
  return result;
}

}  // namespace

CampaignResult run_campaign(uint64_t games, uint64_t seed) {
  CampaignResult r;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t g = 0; g < games; ++g) {
    Lie lie = Lie::None;
    const Game1 one = play_one(seed + g, lie);
    ++r.games;
    ++r.strategies[lie_name(lie)];
    if (one.lie_fired && !one.reason.empty()) ++r.strategies_fired[lie_name(lie)];
    ++r.reasons[one.reason.empty() ? "claims_agree" : one.reason];
    if (one.cheater_lost) ++r.cheater_caught;
    std::string failure;
    if (one.honest_lost || one.reason == "unfinished") {
      ++r.honest_losses;
      failure = one.reason;
    } else if (one.loserless) {
      ++r.loserless;
      failure = "a verdict with no loser (" + one.reason + ")";
    } else if (!one.misplaced.empty()) {
      ++r.misplaced;
      failure = one.misplaced;
    }
    if (!failure.empty() && r.first_failure.empty())
      r.first_failure = "seed " + std::to_string(seed + g) + " (" + lie_name(lie) + "): " + failure;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace tribunal
