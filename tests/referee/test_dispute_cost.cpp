// What a dispute can cost the referee (engine/cost.h) and the referee's policy on it
// (referee_dispute.h check_dispute_cost): derived from the job, checked at the opening.
#include <doctest/doctest.h>

#include <filesystem>

#include "engine/error.h"
#include "referee/referee_dispute.h"

using namespace tribunal;

namespace {

DisputeCost cost_of(const std::string& file) {
  const JobSpec job = load_job(std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs" / file);
  const JobOracle oracle(job, expected_data_shape(job));
  return dispute_cost(job, oracle.graph(0));
}

}  // namespace

TEST_CASE("node work counts a contraction's multiply-adds and other ops' elements") {
  StepGraph g;
  GraphBuilder b(g);
  const ValueId x = b.add_state("x", Shape({6, 5}));
  const ValueId w = b.add_state("w", Shape({5, 7}));
  const ValueId bias = b.add_state("b", Shape({7}));
  const ValueId y = b.add_node(OpKind::Linear, {}, {x, w, bias}, "y")[0];
  b.add_node(OpKind::Relu, {}, {y}, "r");
  CHECK(node_work(g, g.nodes[0]) == 6 * 7 * 5);          // [6,7] outputs, chains of 5
  CHECK(node_work(g, g.nodes[1]) == 6 * 7 * 2);          // reads and writes 42 elements
  CHECK(node_input_bytes(g, g.nodes[0]) == 4 * (30 + 35 + 7));
  // A data-set table is read (and opened, as proven samples) only at the gathered rows.
  const ValueId table = b.add_data("table", Shape({100, 5}));
  b.add_node(OpKind::Gather, Attrs{{1, 2, 3}, {}}, {table}, "batch");
  CHECK(node_input_bytes(g, g.nodes[2]) == 4 * 15);
  CHECK(node_work(g, g.nodes[2]) == 30);
}

TEST_CASE("the shipped jobs' disputes fit the referee's default limits") {
  const DisputeLimits defaults;
  for (const char* file : {"short_mlp.toml", "short_gpt.toml", "short_cnn.toml", "gpt_chars.toml", "fashion_cnn.toml",
                           "fashion_mlp.toml"}) {
    const DisputeCost c = cost_of(file);
    MESSAGE(std::string(file) << ": " << c.parameters << " parameters, heaviest node " << c.heaviest_node << " " << c.max_node_work
                 << ", largest opening " << c.max_opened_bytes << " bytes, " << c.nodes << " nodes");
    CHECK(c.parameters > 0);
    CHECK(c.max_node_work > 0);
    CHECK_NOTHROW(check_dispute_cost(c, defaults));
  }
  // The GPT's heaviest node is a matmul of the attention or MLP: [B·T, D]·[D, 4D] at least.
  const DisputeCost gpt = cost_of("gpt_chars.toml");
  CHECK(gpt.max_node_work >= uint64_t{16} * 128 * 128 * 512);
}

TEST_CASE("a job beyond the policy is refused, naming the term and the limit") {
  const DisputeCost c = cost_of("short_cnn.toml");
  DisputeLimits tight;
  tight.max_reexecution_work = c.max_node_work - 1;
  CHECK_THROWS_WITH_AS(check_dispute_cost(c, tight), doctest::Contains(("re-execution work (" + c.heaviest_node).c_str()),
                       ProtocolError);
  tight = DisputeLimits{};
  tight.max_opened_bytes = c.max_opened_bytes - 1;
  CHECK_THROWS_WITH_AS(check_dispute_cost(c, tight), doctest::Contains("largest opening"), ProtocolError);
  tight = DisputeLimits{};
  tight.max_parameters = c.parameters - 1;
  CHECK_THROWS_WITH_AS(check_dispute_cost(c, tight), doctest::Contains("parameter count"), ProtocolError);
  DisputeLimits exact;
  exact.max_parameters = c.parameters;
  exact.max_reexecution_work = c.max_node_work;
  exact.max_opened_bytes = c.max_opened_bytes;
  CHECK_NOTHROW(check_dispute_cost(c, exact));
}
