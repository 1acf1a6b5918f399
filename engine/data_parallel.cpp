#include "engine/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {

ShardRun shards_of_rank(const JobSpec& job, int rank, int ranks) {
  if (ranks <= 1) return {};
  if (job.shards % ranks != 0)
    throw EngineError(
        fmt::format("{}: {} ranks cannot share train.shards = {} (the rank count must divide the "
                    "shard count)",
                    job.source, ranks, job.shards));
  const int64_t per_rank = job.shards / ranks;
  return ShardRun{rank * per_rank, per_rank, {}};
}

std::vector<ValueId> block_outputs(const StepGraph& g, const ShardRun& block) {
  std::vector<bool> sent(g.values.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (block.within_a_block(g.node_shards[n])) continue;
    for (ValueId v : g.nodes[n].inputs) {
      const Value& value = g.values[v];
      if (value.source == ValueSource::Node && block.within_mine(g.node_shards[value.index])) sent[v] = true;
    }
  }
  std::vector<ValueId> out;
  for (size_t v = 0; v < sent.size(); ++v)
    if (sent[v]) out.push_back(static_cast<ValueId>(v));
  return out;
}

size_t exchange_partials(const StepGraph& g, Executor& executor, World& world, const ShardRun& mine) {
  const auto bytes_of = [&](ValueId v) {
    return static_cast<size_t>(g.values[v].shape.numel()) * sizeof(float);
  };
  // Every rank's list, derived from the graph alone: the layout of the allgather needs no messages.
  std::vector<std::vector<ValueId>> blocks;
  size_t slot = 0;
  for (int r = 0; r < world.size(); ++r) {
    ShardRun block = mine;
    block.first = r * mine.count;
    blocks.push_back(block_outputs(g, block));
    size_t bytes = 0;
    for (ValueId v : blocks.back()) bytes += bytes_of(v);
    slot = std::max(slot, bytes);
  }
  std::vector<std::byte> out(slot), all(slot * static_cast<size_t>(world.size()));
  std::byte* at = out.data();
  for (ValueId v : blocks[static_cast<size_t>(world.rank())]) {
    std::memcpy(at, executor.value(v).bytes().data(), bytes_of(v));
    at += bytes_of(v);
  }
  world.allgather(out, all);
  for (int r = 0; r < world.size(); ++r) {
    if (r == world.rank()) continue;
    const std::byte* from = all.data() + static_cast<size_t>(r) * slot;
    for (ValueId v : blocks[static_cast<size_t>(r)]) {
      std::memcpy(executor.partial(v).values().data(), from, bytes_of(v));
      from += bytes_of(v);
    }
  }
  return out.size();
}

void check_same_job(World& world, const Digest& job_id) {
  std::vector<std::byte> all(job_id.size() * static_cast<size_t>(world.size()));
  world.allgather(std::as_bytes(std::span(job_id)), all);
  for (int r = 1; r < world.size(); ++r)
    if (std::memcmp(all.data() + static_cast<size_t>(r) * job_id.size(), all.data(), job_id.size()) != 0)
      throw EngineError(
          fmt::format("rank {} trains another job than rank 0 (job ids differ: the ranks must load "
                      "the same job file and data set)",
                      r));
}

void broadcast_state(World& world, State& state) {
  for (Tensor& t : state.tensors) world.broadcast(std::as_writable_bytes(t.values()));
}

}  // namespace tribunal
