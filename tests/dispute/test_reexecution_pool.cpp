// The referee re-executes on tensors it kept from its earlier re-executions (engine/tensor_pool.h,
// JobOracle::reexecute): their old contents must never reach an output hash.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "dispute/job_oracle.h"
#include "engine/dataset.h"
#include "engine/executor.h"
#include "engine/state.h"
#include "engine/tensor_pool.h"
#include "ops/registry.h"
#include "protocol/tensor_hash.h"
#include "tests/dispute/executed_step.h"
#include "tests/source_dir.h"

using namespace tribunal;

TEST_CASE("tensor pool: best fit within 25 %, the same memory back, at most its bytes kept") {
  TensorPool pool(4096 * sizeof(float));
  Tensor a = pool.take(Shape{1000});  // nothing kept: a new tensor, zeros
  CHECK(a.values().size() == 1000);
  CHECK(std::all_of(a.values().begin(), a.values().end(), [](float f) { return f == 0.0f; }));
  std::fill(a.values().begin(), a.values().end(), 7.0f);
  const float* memory = a.data();
  pool.give(std::move(a));
  CHECK(pool.free_bytes() == 4000);
  Tensor b = pool.take(Shape{10, 90});  // 900 elements: within 25 % of the kept 1000
  CHECK(b.data() == memory);
  CHECK(b.shape() == Shape{10, 90});
  CHECK(b[0] == 7.0f);  // its contents as they were: the op overwrites them
  CHECK(pool.free_bytes() == 0);
  pool.give(std::move(b));
  CHECK(pool.free_bytes() == 4000);               // its capacity, not the 900 elements it last held
  CHECK(pool.take(Shape{700}).data() != memory);  // 1000 is more than 1.25 × 700: not this one
  CHECK(pool.free_bytes() == 4000);
  pool.give(Tensor(Shape{3500}));  // 4000 + 14000 bytes > 16384: the largest goes
  CHECK(pool.free_bytes() == 4000);
  pool.give(Tensor(Shape{5000}));  // alone over the budget: not kept
  CHECK(pool.free_bytes() == 4000);
  pool.give(Tensor(Shape{100}));
  CHECK(pool.free_bytes() == 4400);
  pool.give(Tensor(Shape{200}), 5);
  pool.drop_given_before(5);  // the two given at generation 0 go
  CHECK(pool.free_bytes() == 800);
  const Tensor fresh = pool.take(Shape{160});  // the kept 200 fits it (200 ≤ 1.25 × 160)
  CHECK(fresh.capacity() == 200);
  CHECK(pool.free_bytes() == 0);
}

TEST_CASE(
    "re-execution: every node of a step, run twice in both orders on kept tensors, gives the executor's "
    "outputs") {
  for (const char* name : {"short_gpt.toml", "short_cnn.toml", "short_mlp.toml"}) {
    CAPTURE(name);
    const JobSpec job = load_job(testing::source_dir() / "scenarios/jobs" / name);
    const testing::ExecutedStep run(job, 1);
    const StepGraph& g = run.graph();
    const JobOracle& oracle = run.oracle;
    const Executor& executor = run.executor;
    size_t checked = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (size_t k = 0; k < g.nodes.size(); ++k) {
        const size_t n = pass == 0 ? k : g.nodes.size() - 1 - k;  // later nodes' tensors, then earlier ones'
        const Node& node = g.nodes[n];
        const bool data_input = std::any_of(node.inputs.begin(), node.inputs.end(), [&](ValueId v) {
          return g.values[v].source == ValueSource::Data;
        });
        if (data_input) continue;  // its samples are opened rows, not a tensor of the step (test_dispute)
        Reexecute rx;
        rx.step = 0;
        rx.node = n;
        for (ValueId v : node.inputs) {
          const bool opened = g.values[v].source != ValueSource::Constant;
          const auto dims = g.values[v].shape.dims();
          rx.shapes.emplace_back(opened ? std::vector<int64_t>(dims.begin(), dims.end())
                                        : std::vector<int64_t>{});
          const auto values = executor.value(v).values();
          rx.inputs.emplace_back(opened ? std::vector<float>(values.begin(), values.end())
                                        : std::vector<float>{});
        }
        const std::array<PartyReexecution, 2> out = oracle.reexecute(rx);
        REQUIRE(out[0].outputs.size() == node.outputs.size());
        for (size_t o = 0; o < node.outputs.size(); ++o) {
          const Tensor& want = executor.value(node.outputs[o]);
          REQUIRE_MESSAGE(out[0].outputs[o] == tensor_leaf(DType::F32, want.shape().dims(), want.bytes()),
                          "node " << n << " (" << op_name(node.op) << ") output " << o);
        }
        ++checked;
      }
    CHECK(checked > g.nodes.size());  // most nodes, twice
  }
}
