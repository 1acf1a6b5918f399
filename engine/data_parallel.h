// Data-parallel training of a sharded job over the ranks of a World (docs/running.md "Data-parallel
// training over MPI"): which shards a rank computes, the exchange of the shards' partials, and the
// agreement of the ranks on the job and on a resumed state. The step's numerics do not depend on any of
// it: every rank combines the same S partials in the same tree (docs/numerics.md "Sharded batch
// reductions").
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/executor.h"
#include "engine/job.h"
#include "engine/state.h"
#include "engine/world.h"
#include "protocol/hash.h"

namespace tribunal {

/// The shards rank `rank` of `ranks` computes: the contiguous block [rank·S/K, (rank+1)·S/K) (count
/// −1: all of them, for one rank). Throws EngineError when K does not divide the job's S.
ShardRun shards_of_rank(const JobSpec& job, int rank, int ranks);

/// The values of a sharded step that the block of shards [first, first + count) hands to the other
/// ranks: the outputs of nodes within the block read by a node across blocks (a shard's partial, or
/// the tree combine of several of the block's partials: the block's subtree roots), by value id.
std::vector<ValueId> block_outputs(const StepGraph& g, const ShardRun& block);

/// ShardRun::exchange for `world`: packs this rank's block_outputs as raw float32 bytes, allgathers
/// every rank's (padded to the largest block's bytes), and writes the other blocks' into the
/// executor. Returns the bytes this rank sent (its slot of the allgather, padding included).
size_t exchange_partials(const StepGraph& g, Executor& executor, World& world, const ShardRun& mine);

/// Checks that every rank trains the same job (the same job_id, so the same job file, data set and
/// shard count); throws EngineError naming the first rank that differs from rank 0.
void check_same_job(World& world, const Digest& job_id);

/// Copies rank 0's state tensors (e.g. a checkpoint it resumed from) to every rank; every rank's
/// `state` must already have the job's layout.
void broadcast_state(World& world, State& state);

}  // namespace tribunal
