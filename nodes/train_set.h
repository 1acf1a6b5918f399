// The training set of a job, loaded once per process and shared by every node and dispute that needs it.
#pragma once

#include <memory>

#include "engine/dataset.h"
#include "engine/job.h"
#include "ops/thread_pool.h"

namespace tribunal::nodes {

/// The job's training set (load_dataset; the job's data set must be located), loaded once per process
/// and shared by every dispute that needs it (a copy per connection would cost 188 MB each); freed
/// when no one holds it, except the most recently used one, kept for the disputes that follow a
/// training. Keyed by the data set's kind, local path and (text) window parameters. Throws EngineError.
std::shared_ptr<const Dataset> shared_train_set(const JobSpec& job, ThreadPool& pool);

}  // namespace tribunal::nodes
