#include "engine/data_parallel.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {

ShardRun shards_of_rank(const JobSpec& job, int rank, int ranks) {
  if (ranks <= 1) return {};
  if (job.shards % ranks != 0)
    throw EngineError(fmt::format("{}: {} ranks cannot share train.shards = {} (the rank count must divide the "
                                  "shard count)",
                                  job.source, ranks, job.shards));
  const int64_t per_rank = job.shards / ranks;
  return ShardRun{rank * per_rank, per_rank, {}};
}

size_t exchange_partials(const StepGraph& g, Executor& executor, World& world, const ShardRun& mine) {
  size_t shard_bytes = 0;
  for (ValueId v : g.partials.at(0)) shard_bytes += static_cast<size_t>(g.values[v].shape.numel()) * sizeof(float);
  const auto count = static_cast<size_t>(mine.count);
  std::vector<std::byte> out(count * shard_bytes), all(out.size() * static_cast<size_t>(world.size()));
  std::byte* at = out.data();
  for (size_t s = 0; s < count; ++s)
    for (ValueId v : g.partials[static_cast<size_t>(mine.first) + s]) {
      const std::span<const std::byte> bytes = executor.value(v).bytes();
      std::memcpy(at, bytes.data(), bytes.size());
      at += bytes.size();
    }
  world.allgather(out, all);
  // Rank r's block holds shards [r·count, (r+1)·count): the shard order is the block order.
  const std::byte* from = all.data();
  for (size_t s = 0; s < g.partials.size(); ++s) {
    const bool here = s >= static_cast<size_t>(mine.first) && s < static_cast<size_t>(mine.first) + count;
    for (ValueId v : g.partials[s]) {
      const size_t n = static_cast<size_t>(g.values[v].shape.numel()) * sizeof(float);
      if (!here) std::memcpy(executor.partial(v).values().data(), from, n);
      from += n;
    }
  }
  return out.size();
}

void check_same_job(World& world, const Digest& job_id) {
  std::vector<std::byte> all(job_id.size() * static_cast<size_t>(world.size()));
  world.allgather(std::as_bytes(std::span(job_id)), all);
  for (int r = 1; r < world.size(); ++r)
    if (std::memcmp(all.data() + static_cast<size_t>(r) * job_id.size(), all.data(), job_id.size()) != 0)
      throw EngineError(fmt::format("rank {} trains another job than rank 0 (job ids differ: the ranks must load "
                                    "the same job file and data set)",
                                    r));
}

void broadcast_state(World& world, State& state) {
  for (Tensor& t : state.tensors) world.broadcast(std::as_writable_bytes(t.values()));
}

}  // namespace tribunal
