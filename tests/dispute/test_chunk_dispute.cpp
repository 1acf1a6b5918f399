// Level 4 of the game (docs/protocol.md, "The game"): a node whose op has parts (ops/op_part.h) and
// whose disputed output spans several 64 KiB chunks is narrowed to the first differing chunk, and only
// what that chunk reads is opened and re-executed. A GPT wide enough for multi-chunk outputs, a cheater
// that corrupts one element of a product, a softmax or an AdamW moment: caught at that node, in the
// chunk that holds the element, from either seat.
#include <doctest/doctest.h>

#include <map>
#include <string>

#include "dispute/job_oracle.h"
#include "engine/dataset.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

constexpr int64_t kChunkElements = 16384;  // float32 elements of a 64 KiB chunk (docs/commitments.md)

// scenarios/jobs/wide_gpt.toml: its MLP activations (256 × 512), attention probabilities
// (4 · 4 · 64 · 64) and MLP weights (128 × 512) span 4 to 8 chunks.
JobSpec wide_gpt() {
  return load_job(testing::source_dir() / "scenarios/jobs/wide_gpt.toml");
}

const Dataset& gpt_data() {
  static ThreadPool pool(2);
  static const Dataset data = load_dataset(wide_gpt(), Split::Train, pool);
  return data;
}

const testing::Provider& honest() {
  static const testing::Provider p(Fault{}, wide_gpt(), {}, &gpt_data());
  return p;
}

// The first node of `op` whose output `slot` has more than `chunks` chunks, in step 1's graph.
uint64_t node_of(OpKind op, uint32_t slot, int64_t chunks) {
  static const JobOracle oracle(wide_gpt(), data_shape_of(gpt_data()));
  const StepGraph& g = oracle.graph(1);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (g.nodes[n].op == op && g.nodes[n].outputs.size() > slot &&
        g.values[g.nodes[n].outputs[slot]].shape.numel() > chunks * kChunkElements)
      return n;
  FAIL("no " << std::string(op_name(op)) << " node with output " << slot << " over " << chunks << " chunks");
  return 0;
}

}  // namespace

TEST_CASE("level 4: a corrupted element of a multi-chunk output is caught in its chunk, from either seat") {
  struct Case {
    OpKind op;
    uint32_t slot;
    int64_t chunk;   // the corrupted element's chunk
    int64_t offset;  // and its place in it
  };
  for (const Case c : {Case{OpKind::Linear, 0, 5, 77}, Case{OpKind::Softmax, 0, 2, 77},
                       Case{OpKind::AdamW, 1, 2, 77}, Case{OpKind::Linear, 0, 0, 5000}}) {
    Fault f;
    f.step = 1;
    f.node = static_cast<int64_t>(node_of(c.op, c.slot, c.chunk + 1));
    f.slot = c.slot;
    f.element = c.chunk * kChunkElements + c.offset;
    f.delta = 0.25f;
    CAPTURE(describe(f));
    const testing::Provider cheater(f, wide_gpt(), {}, &gpt_data());
    REQUIRE(cheater.result.trajectory_root != honest().result.trajectory_root);
    for (int seat = 0; seat < 2; ++seat) {
      CAPTURE(seat);
      const testing::Outcome o =
          seat == 0 ? testing::play_direct(cheater, honest()) : testing::play_direct(honest(), cheater);
      const Verdict& v = o.verdict;
      MESSAGE(std::string(op_name(c.op)) << ": " << std::string(reason_name(v.reason)) << " node " << v.node
                                         << " in " << o.rounds << " rounds — " << v.detail);
      CHECK(v.losers == std::vector<uint8_t>{static_cast<uint8_t>(seat)});
      CHECK(v.winners == std::vector<uint8_t>{static_cast<uint8_t>(1 - seat)});
      CHECK(v.reason == VerdictReason::WrongOutput);
      CHECK(v.step == 1);
      CHECK(v.node == static_cast<uint64_t>(f.node));
      CHECK(v.op == static_cast<uint8_t>(c.op));
      CHECK(v.detail.find("chunk " + std::to_string(c.chunk) + " of output " + std::to_string(c.slot) +
                          ", level 4") != std::string::npos);
    }
  }
}

TEST_CASE(
    "level 4: every op kind with parts, corrupted in the last (short) chunk of an output, is caught there") {
  static const JobOracle oracle(wide_gpt(), data_shape_of(gpt_data()));
  const StepGraph& g = oracle.graph(1);
  // The first node of each op kind whose output (any slot) spans two or more chunks and has a part.
  std::map<OpKind, std::pair<uint64_t, uint32_t>> first;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (uint32_t slot = 0; slot < g.nodes[n].outputs.size(); ++slot) {
      const int64_t numel = g.values[g.nodes[n].outputs[slot]].shape.numel();
      if (numel > kChunkElements && !first.contains(g.nodes[n].op) &&
          oracle.part_inputs(1, n, slot, {0, static_cast<uint64_t>(kChunkElements)}))
        first[g.nodes[n].op] = {n, slot};
    }
  // The wide GPT's forward, backward and optimizer ops with parts, at least these.
  for (OpKind op :
       {OpKind::Linear, OpKind::Matmul, OpKind::Add, OpKind::Gelu, OpKind::GeluBackward, OpKind::LayerNorm,
        OpKind::LayerNormBackward, OpKind::Softmax, OpKind::SoftmaxBackward, OpKind::AdamW})
    CHECK_MESSAGE(first.contains(op), op_name(op));
  for (const auto& [op, at] : first) {
    const auto [node, slot] = at;
    const int64_t numel = g.values[g.nodes[node].outputs[slot]].shape.numel();
    const int64_t last = (numel - 1) / kChunkElements;
    Fault f;
    f.step = 1;
    f.node = static_cast<int64_t>(node);
    f.slot = slot;
    f.element = numel - 1;  // the last element: in the last chunk, however short it is
    f.delta = 0.25f;
    CAPTURE(describe(f));
    const testing::Provider cheater(f, wide_gpt(), {}, &gpt_data());
    if (cheater.result.trajectory_root == honest().result.trajectory_root) {
      MESSAGE("no other claim (the element does not reach the state): " << describe(f));
      continue;
    }
    const Verdict v = testing::play_direct(honest(), cheater).verdict;
    CHECK(v.losers == std::vector<uint8_t>{1});
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.node == node);
    CHECK(v.detail.find("chunk " + std::to_string(last) + " of output " + std::to_string(slot) +
                        ", level 4") != std::string::npos);
  }
}
