// Trainer::traced_step keeps a step's values by moving them out of the executor instead of copying
// them (so a GPT-2-small step's activations are held once): every kept value must still be the value
// the step computed, the pre-state the state it started from, the post-state the state it ended in,
// and a traced step must leave the trainer where an untraced one does.
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "engine/trainer.h"
#include "protocol/tensor_hash.h"
#include "tests/dispute/dispute_fixture.h"

using namespace tribunal;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.bytes().size() == b.bytes().size() &&
         std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0;
}

}  // namespace

TEST_CASE("a traced step keeps every value it computed, the state before and after it") {
  for (const JobSpec& job : {testing::short_job(), testing::short_rlog_job()}) {
    ThreadPool pool(2);
    Trainer traced(job, testing::train_set(), pool);
    Trainer plain(job, testing::train_set(), pool);
    for (int t = 0; t < 3; ++t) {  // later steps run on an executor whose slots were moved out
      const std::vector<Tensor> before = traced.state().tensors;
      const StepTrace tr = traced.traced_step();
      plain.step();
      const StepGraph& g = tr.graph;
      size_t kept = 0;
      for (size_t v = 0; v < g.values.size(); ++v) {
        const ValueSource source = g.values[v].source;
        if (source == ValueSource::Data || source == ValueSource::Constant) continue;
        const Tensor& x = tr.values[v];
        REQUIRE(x.shape() == g.values[v].shape);
        CHECK(tensor_leaf(DType::F32, x.shape().dims(), x.bytes()) == tr.value_hashes[v]);
        ++kept;
      }
      CHECK(kept > g.state_inputs.size() + g.nodes.size());
      for (size_t i = 0; i < g.state_inputs.size(); ++i) {
        CHECK(same_bytes(tr.values[g.state_inputs[i]], before[i]));
        if (g.values[g.state_outputs[i]].source != ValueSource::Constant)  // the step counter: a constant
          CHECK(same_bytes(tr.values[g.state_outputs[i]], traced.state().tensors[i]));
      }
      CHECK(traced.hash_state() == plain.hash_state());
    }
  }
}
