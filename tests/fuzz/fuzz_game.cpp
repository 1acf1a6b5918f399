// libFuzzer target: the dispute game fed arbitrary decoded answers from either party, in any order,
// at any time, between honest ones. It must never crash, the honest party must never lose, and every
// game must end with a verdict against the liar: whenever nothing is left to deliver, the game is
// either done or waiting on a party's deadline, and passing that deadline ends it. Any violation
// aborts (a crash libFuzzer reports).
//
// Input: byte 0 → T (1..6), byte 1 → stride (1..3), byte 2 → nodes per step G (1..4), the corrupted
// node (any of the G) and whether the cheater instead lies about the step's post state, byte 3 → the
// liar (party 0 or 1) and the corrupted step; then, each time the liar is asked, a selector byte (odd:
// answer with fuzzed bytes decoded as message kind selector % 12 + 1), a length byte and that many bytes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "protocol/game.h"
#include "protocol/testing/counter.h"
#include "protocol/wire.h"

using namespace tribunal;
using namespace tribunal::toy;

namespace {

/// Ends the run as a crash: the game broke one of the properties above, named by `why`.
[[noreturn]] void violated(const char* why) {
  std::fprintf(stderr, "fuzz_game: %s\n", why);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint64_t steps = data[0] % 6 + 1, stride = data[1] % 3 + 1;
  const uint32_t nodes = data[2] % 4 + 1;
  Fault fault;
  fault.step = static_cast<int64_t>(data[3] >> 1) % static_cast<int64_t>(steps);
  fault.node = static_cast<int64_t>(data[2] >> 2) % static_cast<int64_t>(nodes);
  fault.lie_post_state = (data[2] >> 6) & 1;
  const int liar = data[3] & 1;
  const CounterProvider honest(steps, stride, nodes);
  const CounterProvider cheater(steps, stride, nodes, fault);
  if (honest.claim({}).trajectory_root == cheater.claim({}).trajectory_root) return 0;
  CounterOracle oracle(nodes);
  GameParams params;
  params.steps = steps;
  params.stride = stride;
  params.claims = {liar == 0 ? cheater.claim({}) : honest.claim({}),
                   liar == 0 ? honest.claim({}) : cheater.claim({})};
  Game game(params, oracle);
  bool verdict = false;
  // A verdict must convict the liar alone (an honest party never loses; the claims differ, so
  // someone lied).
  auto check_verdict = [&](const Finished& f) {
    if (f.verdict.losers != std::vector<uint8_t>{static_cast<uint8_t>(liar)})
      violated("the verdict does not convict the liar alone");
    verdict = true;
  };
  std::vector<Action> pending = game.start(GameTime{});
  size_t pos = 4;
  GameTime now{};
  for (int guard = 0; guard < 200 && !game.done(); ++guard) {
    std::vector<Action> next;
    for (const Action& a : pending) {
      std::vector<Action> more;
      if (const auto* q = std::get_if<SendQuery>(&a)) {
        const CounterProvider& p = q->party == liar ? cheater : honest;
        // The liar may replace its answer with fuzzed bytes of any message kind.
        if (q->party == liar && pos + 2 < size && data[pos] & 1) {
          const size_t len = std::min<size_t>(data[pos + 1], size - pos - 2);
          try {
            const Body b = decode_body(static_cast<MessageKind>(data[pos] % 14 + 1),
                                       std::span<const uint8_t>(data + pos + 2, len));
            more = game.on_message(q->party, b, now);
          } catch (const WireError&) {
          }
          pos += 2 + len;
        } else {
          for (const Body& b : p.answer(q->query)) {
            auto m = game.on_message(q->party, b, now);
            more.insert(more.end(), m.begin(), m.end());
          }
        }
      } else if (const auto* rx = std::get_if<Reexecute>(&a)) {
        more = game.on_reexecuted(std::vector<Digest>{scalar_leaf(rx->inputs[0][0] + 1.0f)}, now);
      } else if (const auto* f = std::get_if<Finished>(&a)) {
        check_verdict(*f);
      }
      next.insert(next.end(), more.begin(), more.end());
    }
    if (next.empty() && !game.done()) {
      // Nothing left to deliver: the game must be waiting on a party that owes an answer, and
      // passing the latest such deadline must end it (that party forfeits).
      bool waiting = false;
      GameTime deadline = now;
      for (int party = 0; party < 2; ++party) {
        if (!game.awaiting(party)) continue;
        waiting = true;
        deadline = std::max(deadline, game.deadline(party));
      }
      if (!waiting) violated("the game is stuck: not done, nothing to deliver, no party owes an answer");
      now = deadline + std::chrono::milliseconds(1);
      next = game.on_tick(now);
      if (next.empty() && !game.done()) violated("a party's deadline passed and the game did not end");
    }
    pending = std::move(next);
  }
  for (const Action& a : pending)
    if (const auto* f = std::get_if<Finished>(&a)) check_verdict(*f);
  if (!game.done() || !verdict) violated("the game was left unfinished");
  return 0;
}
