// The executor's buffer reuse (engine/executor.h set_keep_values, engine/liveness.h): a step that
// releases each node output after its last reader computes the same bits as one that keeps every
// value, holds less at once, and allocates nothing after its first step.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "engine/dataset.h"
#include "engine/executor.h"
#include "engine/liveness.h"
#include "engine/sampler.h"
#include "engine/state.h"
#include "engine/step.h"
#include "tests/source_dir.h"

using namespace tribunal;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.values().size() * sizeof(float)) == 0;
}

// A short job's training set, batches and step graphs.
struct ShortJob {
  JobSpec job;
  ThreadPool pool;
  Dataset train;
  DataShape shape;
  BatchSampler sampler;
  const Tensor* data[2];

  ShortJob(JobSpec spec, int threads)
      : job(std::move(spec)),
        pool(threads),
        train(load_dataset(job, Split::Train, pool)),
        shape(data_shape_of(train)),
        sampler(job.seed, shape.samples, job.batch_size),
        data{&train.inputs, &train.labels} {}
  StepGraph graph(int64_t t) { return build_step_graph(job, shape, t, sampler.indices(t)); }
};

JobSpec short_job(const char* name) {
  return load_job(tribunal::testing::source_dir() / "scenarios/jobs" / name);
}

}  // namespace

TEST_CASE("last_uses: a value's last reader, or its writer when nothing reads it") {
  StepGraph g;
  GraphBuilder b(g);
  const ValueId x = b.add_state("x", Shape{4});
  const ValueId unread = b.add_state("unread", Shape{4});
  const ValueId y = b.add_node(OpKind::Relu, {}, {x}, "y")[0];
  const ValueId z = b.add_node(OpKind::Relu, {}, {y}, "z")[0];
  const ValueId w = b.add_node(OpKind::Relu, {}, {y}, "w")[0];
  const std::vector<size_t> last = last_uses(g);
  CHECK(last[x] == 0);
  CHECK(last[unread] == kNoUse);
  CHECK(last[y] == 2);
  CHECK(last[z] == 1);  // read by nothing: dies where it is written
  CHECK(last[w] == 2);
  CHECK(bytes_live_after(g, last, 0) == 16);  // y
  CHECK(bytes_live_after(g, last, 1) == 16);  // y still, z is dead
  CHECK(bytes_live_after(g, last, 2) == 0);
}

TEST_CASE("executor: released buffers are reused and the steps' bits are those of keeping every value") {
  ShortJob j(short_job("short_gpt.toml"), 2);
  const auto& data = j.data;
  Executor keep(j.pool), reuse(j.pool);
  reuse.set_keep_values(false);
  State kept_state = initial_state(j.job), reused_state = initial_state(j.job);
  uint64_t held_after_first = 0;
  for (int64_t t = 0; t < 4; ++t) {
    const StepGraph g = j.graph(t);
    const std::vector<Tensor*> ks = kept_state.pointers(), rs = reused_state.pointers();
    keep.run(g, ks, data);
    reuse.run(g, rs, data);  // from step 1 on, its buffers hold the last step's other values
    REQUIRE(same_bits(keep.value(g.loss), reuse.value(g.loss)));
    // An intermediate value is gone once its last reader has run; the kept executor still has it.
    const ValueId first_output = g.nodes.front().outputs.front();
    CHECK_NOTHROW(keep.value(first_output));
    CHECK_THROWS_AS(reuse.value(first_output), std::logic_error);
    CHECK_THROWS_AS(reuse.take_value(first_output), std::out_of_range);
    // The reusing executor held at most the activations, gradients and next state at once.
    CHECK(reuse.peak_live_bytes() * 10 < keep.peak_live_bytes() * 7);
    keep.take_next_state(g, ks);
    reuse.take_next_state(g, rs);
    for (size_t i = 0; i < kept_state.tensors.size(); ++i)
      REQUIRE_MESSAGE(same_bits(kept_state.tensors[i], reused_state.tensors[i]), "state tensor " << i);
    // After the first step the pool holds the step's working set: nothing is allocated again.
    if (t == 0) held_after_first = reuse.held_bytes();
    CHECK(reuse.held_bytes() == held_after_first);
    CHECK(reuse.held_bytes() < keep.held_bytes());
  }
}

TEST_CASE(
    "executor: run_updating writes the optimizer's next state into the state's own storage, same bits") {
  for (const char* name : {"short_gpt.toml", "short_cnn.toml", "short_mlp.toml"})
    for (const OptimizerKind kind : {OptimizerKind::AdamW, OptimizerKind::Sgd}) {
      CAPTURE(name);
      CAPTURE(static_cast<int>(kind));
      JobSpec spec = short_job(name);
      spec.optimizer.kind = kind;
      ShortJob j(std::move(spec), 2);
      const auto& data = j.data;
      Executor reuse(j.pool), updating(j.pool);
      reuse.set_keep_values(false);
      updating.set_keep_values(false);
      State reused_state = initial_state(j.job), updated_state = initial_state(j.job);
      for (int64_t t = 0; t < 3; ++t) {
        const StepGraph g = j.graph(t);
        const std::vector<Tensor*> rs = reused_state.pointers(), us = updated_state.pointers();
        std::vector<const float*> storage;  // where each state tensor lived before the step
        for (const Tensor* s : us) storage.push_back(s->data());
        reuse.run(g, rs, data);
        updating.run_updating(g, us, data);
        reuse.take_next_state(g, rs);
        updating.take_next_state(g, us);
        // Every parameter and optimizer slot (AdamW: 3 per parameter, SGD: 2) kept its storage.
        size_t updated = 0, params = 0;
        for (const Node& node : g.nodes) {
          if (node.op != OpKind::AdamW && node.op != OpKind::SgdMomentum) continue;
          ++params;
          for (ValueId out : node.outputs)
            for (size_t i = 0; i < g.state_outputs.size(); ++i)
              if (g.state_outputs[i] == out) {
                CHECK_MESSAGE(updated_state.tensors[i].data() == storage[i], "state tensor " << i);
                ++updated;
              }
        }
        CHECK(params > 0);
        CHECK(updated == params * (kind == OptimizerKind::AdamW ? 3 : 2));
        for (size_t i = 0; i < updated_state.tensors.size(); ++i)
          REQUIRE_MESSAGE(same_bits(reused_state.tensors[i], updated_state.tensors[i]), "state tensor " << i);
        // The pool does not hold a second copy of the parameters and optimizer state.
        CHECK(updating.held_bytes() < reuse.held_bytes());
      }
    }
}

TEST_CASE("executor: run_updating keeps the state unchanged where it cannot update in place") {
  ShortJob j(short_job("short_mlp.toml"), 1);
  Executor keep(j.pool);  // keeps every value: a traced step reads the state after the run
  State state = initial_state(j.job);
  const State before = state;
  const StepGraph g = j.graph(0);
  const std::vector<Tensor*> s = state.pointers();
  keep.run_updating(g, s, j.data);
  for (size_t i = 0; i < state.tensors.size(); ++i)
    REQUIRE_MESSAGE(same_bits(state.tensors[i], before.tensors[i]), "state tensor " << i);
}

TEST_CASE("executor: reserve takes a step's buffers without computing, and the step then takes none") {
  for (const char* name : {"short_gpt.toml", "short_cnn.toml", "short_mlp.toml"}) {
    CAPTURE(name);
    ShortJob j(short_job(name), 2);
    Executor plain(j.pool), reserved(j.pool);
    plain.set_keep_values(false);
    reserved.set_keep_values(false);
    State plain_state = initial_state(j.job), reserved_state = initial_state(j.job);
    const State before = reserved_state;
    const StepGraph g = j.graph(0);
    const std::vector<Tensor*> ps = plain_state.pointers(), rs = reserved_state.pointers();

    reserved.reserve(g, rs, j.data);
    for (size_t i = 0; i < before.tensors.size(); ++i)  // nothing computed, nothing updated
      CHECK(same_bits(reserved_state.tensors[i], before.tensors[i]));
    const uint64_t made = reserved.made_bytes();

    plain.run_updating(g, ps, j.data);
    plain.take_next_state(g, ps);
    CHECK(made == plain.made_bytes());  // what the step would have allocated
    CHECK(made > 0);
    reserved.run_updating(g, rs, j.data);
    CHECK(reserved.made_bytes() == made);  // every buffer of the step was there already
    CHECK(reserved.peak_live_bytes() == plain.peak_live_bytes());
    reserved.take_next_state(g, rs);
    CHECK(reserved.held_bytes() == plain.held_bytes());
    for (size_t i = 0; i < plain_state.tensors.size(); ++i)
      CHECK(same_bits(reserved_state.tensors[i], plain_state.tensors[i]));
  }
}

TEST_CASE("executor: reserve does nothing where every value is kept") {
  ShortJob j(short_job("short_gpt.toml"), 1);
  Executor keep(j.pool);  // keeps every value (the default)
  State state = initial_state(j.job);
  const std::vector<Tensor*> st = state.pointers();
  keep.reserve(j.graph(0), st, j.data);
  CHECK(keep.made_bytes() == 0);
}
