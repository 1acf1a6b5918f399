// End to end over real WebSocket connections on loopback: a referee node, provider nodes (honest or
// cheating) and the delegating client. The honest provider wins every time and the verdict names the
// exact step and node of the cheat; two honest providers need no dispute; two cheaters at the same
// node, differently, leave no valid claim.
#include <doctest/doctest.h>

#include "engine/step.h"
#include "protocol/chunk_check.h"
#include "protocol/codec.h"
#include "protocol/tensor_hash.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using tribunal::testing::corrupt;
using tribunal::testing::Network;

namespace {

const std::filesystem::path& kJob = testing::kShortJob;

size_t graph_nodes() {
  return build_step_graph(load_job(kJob), {60000, 784, 10}, 0, std::vector<int64_t>(32, 0)).nodes.size();
}

}  // namespace

TEST_CASE("websocket: the honest provider wins against every kind of corrupted node") {
  Network net;
  const int64_t last = static_cast<int64_t>(graph_nodes()) - 1;
  // First, middle and last step; first (gather), middle (backward) and last (optimizer) node; a
  // forward linear node.
  const std::vector<std::pair<int64_t, int64_t>> cases = {{0, 2},  {14, 2},        {29, 2},
                                                          {14, 0}, {14, last / 2}, {14, last}};
  for (const auto& c : cases) {  // no structured binding: clang 14 cannot capture one in CAPTURE
    const int64_t step = c.first, node = c.second;
    CAPTURE(step);
    CAPTURE(node);
    const std::string honest = net.provider(Fault{});
    const std::string cheater = net.provider(corrupt(step, node));
    const DelegateOutcome o = net.delegate({cheater, honest});
    REQUIRE(o.verdicts.size() == 1);
    const Verdict v = net.verify(o.verdicts[0]);
    CHECK(v.losers == std::vector<uint8_t>{0});
    CHECK(v.winners == std::vector<uint8_t>{1});
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.step == static_cast<uint64_t>(step));
    CHECK(v.node == static_cast<uint64_t>(node));
    CHECK(o.accepted);
    CHECK(o.winner == 1);
    CHECK(std::filesystem::exists(o.verdict_files[0]));
  }
}

TEST_CASE("websocket: a swapped sample is caught at the gather node, wrong weights at checkpoint 0") {
  Network net;
  Fault swap;
  swap.swap_step = 9;
  swap.swap_position = 3;
  swap.swap_row = 4242;
  const std::string honest = net.provider(Fault{});
  DelegateOutcome o = net.delegate({honest, net.provider(swap)});
  REQUIRE(o.verdicts.size() == 1);
  Verdict v = net.verify(o.verdicts[0]);
  CHECK(v.losers == std::vector<uint8_t>{1});
  CHECK(v.step == 9);
  CHECK(v.op == static_cast<uint8_t>(OpKind::Gather));
  CHECK(v.reason == VerdictReason::InconsistentInput);

  Fault init;
  init.init_delta = 0.05f;
  o = net.delegate({net.provider(init), honest});
  REQUIRE(o.verdicts.size() == 1);
  v = net.verify(o.verdicts[0]);
  CHECK(v.losers == std::vector<uint8_t>{0});
  CHECK(v.reason == VerdictReason::WrongInitialState);
}

TEST_CASE("websocket: two honest providers agree; two different cheaters leave no valid claim") {
  Network net;
  DelegateOutcome o = net.delegate({net.provider(Fault{}), net.provider(Fault{})});
  CHECK(o.verdicts.empty());
  CHECK(o.accepted);
  CHECK(o.claims[0].trajectory_root == o.claims[1].trajectory_root);

  Fault a = corrupt(17, 13), b = corrupt(17, 13);  // an optimizer node: its output persists
  b.delta = -7.0f;
  o = net.delegate({net.provider(a), net.provider(b)});
  REQUIRE(o.verdicts.size() == 1);
  const Verdict v = net.verify(o.verdicts[0]);
  CHECK(v.winners.empty());
  CHECK(v.losers == std::vector<uint8_t>{0, 1});
  CHECK_FALSE(o.accepted);
}

TEST_CASE("websocket: with three providers and one cheater, the honest claim stands") {
  Network net;
  const DelegateOutcome o =
      net.delegate({net.provider(corrupt(20, 14)), net.provider(Fault{}), net.provider(Fault{})});
  CHECK(o.accepted);
  CHECK(o.winner == 1);
  CHECK(o.verdicts.size() == 1);
}

// Issue 14's loss on time: an honest provider opening more envelopes than its session's write queue
// holds overflowed the queue, which closes the connection; the referee reconnected, the provider
// started over, and its clock ran out. The provider now waits for room before each envelope. Here
// both providers' queues hold 2 envelopes, and the cheater corrupts the node with the largest inputs
// (an optimizer update: the parameter, its gradient and both moments — a frame each at least).
TEST_CASE("websocket: an opening of more chunks than the write queue holds streams to the end (regression)") {
  const StepGraph g = build_step_graph(load_job(kJob), {60000, 784, 10}, 0, std::vector<int64_t>(32, 0));
  int64_t widest = 0;
  uint64_t widest_bytes = 0, widest_frames = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    uint64_t bytes = 0, frames = 0;
    for (ValueId v : g.nodes[n].inputs) {
      if (g.values[v].source == ValueSource::Data) continue;
      const uint64_t b = 4 * static_cast<uint64_t>(g.values[v].shape.numel());
      bytes += b;
      frames += (tensor_chunk_count(b) + kMaxFrameChunks - 1) / kMaxFrameChunks;
    }
    if (bytes > widest_bytes) widest_bytes = bytes, widest_frames = frames, widest = static_cast<int64_t>(n);
  }
  REQUIRE(widest_frames >= 4);  // twice the frames the queue holds
  Network net;
  const auto small_queue = [&](const Fault& fault) {
    ProviderConfig c = net.config(fault);
    c.server.session.max_queued_messages = 2;
    return net.provider(std::move(c));
  };
  const std::string honest = small_queue(Fault{});
  const std::string cheater = small_queue(corrupt(5, widest));
  const DelegateOutcome o = net.delegate({honest, cheater});
  REQUIRE(o.verdicts.size() == 1);
  const Verdict v = net.verify(o.verdicts[0]);
  CHECK(v.reason == VerdictReason::WrongOutput);
  CHECK(v.node == static_cast<uint64_t>(widest));
  CHECK(v.losers == std::vector<uint8_t>{1});
  CHECK(o.winner == 0);
}
