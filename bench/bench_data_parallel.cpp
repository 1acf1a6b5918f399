// Data-parallel training over MPI against one process, in the same run (docs/performance.md "Data
// parallel"). Prints one JSON object on rank 0.
// Usage: mpirun -np K bench_data_parallel [--job FILE] [--shards S] [--warmup N] [--repeats N]
//
// The job (default scenarios/jobs/gpt_chars.toml) trains with train.shards = S (default 8). First rank
// 0 alone (the other ranks wait) times Trainer::step — graph build, execution, next state — of the
// unsharded job (S = 1, today's step) and of the sharded job, each at 1 and at K threads: the
// sharding cost is sharded / unsharded at the same thread count. Then all K ranks train the sharded
// job data parallel with 1 thread each (each rank its S/K shards, one allgather of the partials per
// step): the step time, rank 0's bytes sent per step, and the exchange's share of rank 0's step (the
// allgather's wall time, which includes waiting for the slowest rank). Each figure is the median of
// --repeats steps after --warmup steps. The sharded state after warm-up + repeats steps must be the
// same bits alone and on K ranks (same_state). The load average is recorded: on a shared machine the
// timings are noisy.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "bench/bench_stats.h"
#include "engine/dataset.h"
#include "engine/trainer.h"
#include "mpi/mpi_world.h"

namespace {

using namespace tribunal;
using Clock = std::chrono::steady_clock;

/// Median step time of a trainer, and the state hash after its steps.
struct Timing {
  double step_s = 0;
  double exchange_s = 0;  ///< median wall time per step in the partials' exchange (data parallel)
  double bytes_per_step = 0;
  Digest state{};
};

Timing time_steps(Trainer& trainer, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) trainer.step();
  std::vector<double> step_s, exchange_s;
  const size_t bytes0 = trainer.exchanged_bytes();
  for (int i = 0; i < repeats; ++i) {
    const double x0 = trainer.exchange_seconds();
    const auto t0 = Clock::now();
    trainer.step();
    step_s.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    exchange_s.push_back(trainer.exchange_seconds() - x0);
  }
  Timing t;
  t.step_s = bench::median(step_s);
  t.exchange_s = bench::median(exchange_s);
  t.bytes_per_step = static_cast<double>(trainer.exchanged_bytes() - bytes0) / repeats;
  t.state = trainer.hash_state();
  return t;
}

// Waits until every rank gets here (rank 0's solo runs keep the others waiting).
void barrier(World& world) {
  std::byte token{};
  world.broadcast(std::span(&token, 1));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"data-parallel training over MPI against one process (run under mpirun -np K)",
               "bench_data_parallel"};
  std::filesystem::path job_path =
      std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/gpt_chars.toml";
  int64_t shards = 8;
  int warmup = 2, repeats = 8;
  app.add_option("--job", job_path, "the job file")->type_name("FILE");
  app.add_option("--shards", shards, "train.shards of the sharded runs (must divide the batch)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::Range(0, 1000));
  app.add_option("--repeats", repeats, "timed steps (the median counts)")->check(CLI::Range(1, 1000));
  bench::parse_command_line(app, argc, argv);

  const std::unique_ptr<World> world = launched_world();
  const int ranks = world->size();
  try {
    JobSpec sharded = load_job(job_path);
    sharded.shards = shards;
    JobSpec plain = sharded;
    plain.shards = 1;
    ThreadPool one(1), many(ranks);
    const Dataset data = load_dataset(sharded, Split::Train, one);

    nlohmann::json out = {{"bench", "data_parallel"},
                          {"job", job_path.filename().string()},
                          {"shards", shards},
                          {"ranks", ranks},
                          {"warmup", warmup},
                          {"repeats", repeats},
                          {"loadavg_before", bench::loadavg()}};
    Digest alone{};
    if (world->rank() == 0) {
      for (int threads : {1, ranks}) {
        ThreadPool& pool = threads == 1 ? one : many;
        Trainer unsharded(plain, data, pool), split(sharded, data, pool);
        const Timing u = time_steps(unsharded, warmup, repeats), s = time_steps(split, warmup, repeats);
        alone = s.state;
        out["one_rank"].push_back({{"threads", threads},
                                   {"unsharded_step_s", u.step_s},
                                   {"sharded_step_s", s.step_s},
                                   {"sharding_cost", s.step_s / u.step_s}});
      }
    }
    barrier(*world);
    Trainer parallel(sharded, data, one, {}, world.get());
    const Timing p = time_steps(parallel, warmup, repeats);
    if (world->rank() == 0) {
      out["ranks_x_1_thread"] = {{"step_s", p.step_s},
                                 {"exchange_s", p.exchange_s},
                                 {"exchange_share", p.exchange_s / p.step_s},
                                 {"bytes_sent_per_rank_per_step", p.bytes_per_step},
                                 {"bytes_gathered_per_rank_per_step", p.bytes_per_step * ranks}};
      out["one_rank_x_threads_vs_ranks"] = out["one_rank"].back()["sharded_step_s"].get<double>() / p.step_s;
      out["same_state"] = p.state == alone;
      out["loadavg_after"] = bench::loadavg();
      std::printf("%s\n", out.dump().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_data_parallel: rank %d: %s\n", world->rank(), e.what());
    throw;  // the world aborts every rank
  }
  return 0;
}
