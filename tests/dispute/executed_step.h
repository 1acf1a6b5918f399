// Step 0 of a job run by the executor with every value kept, beside the referee's oracle of the job:
// what the re-execution tests compare the referee's kernels with.
#pragma once

#include "dispute/job_oracle.h"
#include "engine/dataset.h"
#include "engine/executor.h"
#include "engine/state.h"

namespace tribunal::testing {

struct ExecutedStep {
  ThreadPool threads;
  Dataset train;
  JobOracle oracle;
  State state;
  Executor executor;  // keeps every value

  ExecutedStep(const JobSpec& job, int thread_count)
      : threads(thread_count),
        train(load_dataset(job, Split::Train, threads)),
        oracle(job, data_shape_of(train)),
        state(initial_state(job)),
        executor(threads) {
    const Tensor* data[] = {&train.inputs, &train.labels};
    executor.run(graph(), state.pointers(), data);
  }
  const StepGraph& graph() const { return oracle.graph(0); }
};

}  // namespace tribunal::testing
