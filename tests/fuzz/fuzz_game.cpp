// libFuzzer target: the dispute game fed arbitrary decoded answers from either party, in any order,
// at any time, between honest ones. It must never crash, and the honest party must never lose.
#include <cstdint>
#include <cstdlib>

#include "protocol/game.h"
#include "protocol/wire.h"
#include "protocol/testing/counter.h"

using namespace tribunal;
using namespace tribunal::toy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint64_t steps = data[0] % 6 + 1, stride = data[1] % 3 + 1;
  const uint32_t nodes = data[2] % 3 + 1;
  const int liar = data[3] & 1;
  const CounterProvider honest(steps, stride, nodes);
  const CounterProvider cheater(steps, stride, nodes, Fault{{}, static_cast<int64_t>(data[3] >> 1) % static_cast<int64_t>(steps), 0});
  if (honest.claim({}).trajectory_root == cheater.claim({}).trajectory_root) return 0;
  CounterOracle oracle(nodes);
  GameParams params;
  params.steps = steps;
  params.stride = stride;
  params.claims = {liar == 0 ? cheater.claim({}) : honest.claim({}), liar == 0 ? honest.claim({}) : cheater.claim({})};
  Game game(params, oracle);
  std::vector<Action> pending = game.start(0);
  size_t pos = 4;
  uint64_t now = 0;
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
            const Body b = decode_body(static_cast<MessageKind>(data[pos] % 12 + 1),
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
        more = game.on_reexecuted({scalar_leaf(rx->inputs[0][0] + 1.0f)}, now);
      } else if (const auto* f = std::get_if<Finished>(&a)) {
        for (uint8_t l : f->verdict.losers)
          if (l != liar) std::abort();  // the honest party lost
      }
      next.insert(next.end(), more.begin(), more.end());
    }
    if (next.empty() && !game.done()) {
      now += params.recompute_timeout_ms + 1;
      next = game.on_tick(now);
    }
    pending = std::move(next);
  }
  for (const Action& a : pending)
    if (const auto* f = std::get_if<Finished>(&a))
      for (uint8_t l : f->verdict.losers)
        if (l != liar) std::abort();
  return 0;
}
