// The light referee (issue: rounds, CPU and bytes per dispute), on the Fashion-MNIST MLP at
// T = 1000 and T = 10000 steps with stride s = 100. For each T an honest provider and cheaters that
// corrupt a forward, a backward and an optimizer node (every element) at step ⌊0.63·T⌋ play the full
// protocol over signed envelopes in one process (no sockets). Prints one JSON object.
//
//   bench_dispute [--steps 1000,10000] [--stride 100] [--check]
//
// The referee's CPU and bytes in cover the whole dispute as the referee node handles it
// (apps/referee_node.cpp): the DisputeOpen (its bytes; checking its signature, every check of the
// opening in RefereeDispute's constructor, and the dispute's cost against the default limits), then
// every answer (play_local). Baselines measured in the same run: one training step of the job (the
// honest provider's training time / T), and the disputed op's input bytes. With --check it exits 1
// unless every cheater was caught at the injected step and node, within the round bound and the byte
// allowance, and the bytes in are exactly the opening's plus the answers the parties sent.
#include <time.h>

#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "engine/provider_session.h"
#include "referee/local_dispute.h"

using namespace tribunal;

namespace {

const std::filesystem::path kJobFile = std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/fashion_mlp.toml";

uint64_t ceil_log2(uint64_t n) { return n <= 1 ? 0 : std::bit_width(n - 1); }

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string with_steps(uint64_t steps, uint64_t stride) {
  std::ifstream in(kJobFile);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  auto set = [&](const std::string& key, uint64_t value) {
    const size_t at = text.find("\n" + key + " = ");
    const size_t end = text.find('\n', at + 1);
    text.replace(at + 1, end - at - 1, key + " = " + std::to_string(value));
  };
  set("steps", steps);
  set("stride", stride);
  return text;
}

struct Provider {
  KeyPair key = generate_keypair();
  std::filesystem::path store;
  Fault fault;
  TrainResult result;
  std::vector<uint8_t> claim;
};

Provider train(const JobSpec& job, const Fault& fault, const std::string& name) {
  Provider p;
  p.fault = fault;
  p.store = std::filesystem::temp_directory_path() / ("tribunal-bench-dispute-" + name);
  std::filesystem::remove_all(p.store);
  TrainOptions o;
  o.out_dir = p.store;
  o.evaluate = false;
  o.fault = fault;
  p.result = run_training(job, o);
  p.claim = seal(p.key, p.result.job_id, 1,
                 Claim{p.result.job_id, static_cast<uint64_t>(p.result.steps), p.result.trajectory_root,
                       p.result.final_state_hash, "ws://" + name + ".invalid/"});
  return p;
}

// Bytes of the re-executed node's inputs that must travel: tensors, or the gathered samples.
uint64_t op_input_bytes(const StepGraph& g, uint64_t node, const DataShape& data) {
  uint64_t bytes = 0;
  for (ValueId v : g.nodes[node].inputs) {
    const Value& val = g.values[v];
    if (val.source == ValueSource::Constant) continue;
    if (val.source == ValueSource::Data)
      bytes += g.nodes[node].attrs.ints.size() * static_cast<uint64_t>(data.features + 1) * 4;
    else
      bytes += static_cast<uint64_t>(val.shape.numel()) * 4;
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> steps_list = {1000, 10000};
  uint64_t stride = 100;
  bool check = false;
  CLI::App app(
      "The light referee: rounds, CPU and bytes per dispute on the Fashion-MNIST MLP; prints one JSON "
      "object.",
      "bench_dispute");
  app.add_option("--steps", steps_list,
                 "the job lengths T to dispute, in steps, comma-separated (each at least 1)")
      ->type_name("T,T...")
      ->delimiter(',')
      ->default_str("1000,10000")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24).description(""));
  app.add_option("--stride", stride, "checkpoint stride s, in steps (at least 1)")
      ->type_name("S")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24).description(""));
  app.add_flag("--check", check,
               "exit 1 unless every cheater is caught at the injected step and node, within the round "
               "bound and the byte allowance");
  bench::parse_command_line(app, argc, argv);
  std::vector<std::string> problems;
  nlohmann::json results = nlohmann::json::array();
  ThreadPool pool(1);
  for (uint64_t steps : steps_list) {
    const std::string text = with_steps(steps, stride);
    JobSpec job = parse_job(text, "bench job");
    locate_data(job, DataRegistry::debian());
    const Dataset data = load_dataset(job, Split::Train, pool);
    const DataShape shape = data_shape_of(data);
    const Provider honest = train(job, Fault{}, "honest");
    const double step_seconds = honest.result.seconds / static_cast<double>(steps);
    const int64_t bad_step = static_cast<int64_t>(steps * 63 / 100);
    for (const int64_t node : {2, 11, 13}) {
      Fault f;
      f.step = bad_step;
      f.node = node;
      f.element = -1;
      f.delta = 0.5f;
      const Provider cheater = train(job, f, "cheater");
      DisputeOpen d;
      d.job_toml = text;
      d.dataset_root = data.root;
      d.dataset_samples = static_cast<uint64_t>(shape.samples);
      d.features = static_cast<uint64_t>(shape.features);
      d.classes = static_cast<uint64_t>(shape.classes);
      d.claims = {honest.claim, cheater.claim};
      const KeyPair client = generate_keypair(), referee_key = generate_keypair();
      const std::vector<uint8_t> open = seal(client, dispute_id(d), 1, d);
      const auto w0 = std::chrono::steady_clock::now();
      // The referee receives the opening: it checks the client's signature, every check of the
      // opening (RefereeDispute's constructor: the claims' signatures, the job, its id) and the
      // dispute's cost against its limits, as the referee node does before it starts a dispute.
      const double open_cpu0 = thread_cpu_seconds();
      RefereeDispute referee(referee_key, open_envelope(open));
      check_dispute_cost(referee.cost(), DisputeLimits{});
      const double opening_cpu = thread_cpu_seconds() - open_cpu0;
      const Provider* providers[2] = {&honest, &cheater};
      std::unique_ptr<ProviderDisputeSession> sessions[2];
      std::array<LocalParty, 2> parties;
      uint64_t answer_bytes = 0;  // everything the parties sent, counted on their side
      for (int p = 0; p < 2; ++p)
        parties[static_cast<size_t>(p)] = [&, p](const Envelope& env) -> std::vector<std::vector<uint8_t>> {
          std::vector<std::vector<uint8_t>> answers;
          if (env.kind != MessageKind::DisputeOpen) {
            answers = sessions[p]->on_envelope(env);
          } else {
            sessions[p] = std::make_unique<ProviderDisputeSession>(providers[p]->key, env, job, data,
                                                                   providers[p]->store, pool,
                                                                   std::vector<PublicKey>{referee_key.public_key},
                                                                   providers[p]->fault);
          }
          for (const auto& a : answers) answer_bytes += a.size();
          return answers;
        };
      const LocalRun run = play_local(referee, parties);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      const double referee_cpu = opening_cpu + run.referee_cpu_seconds;
      const uint64_t bytes_in = open.size() + run.bytes_in;
      const Verdict v = verify_verdict(run.verdict, referee_key.public_key);
      const StepGraph& g = referee.oracle().graph(v.step);
      const uint64_t g_nodes = g.nodes.size();
      const uint64_t bound = ceil_log2((steps + stride - 1) / stride) + ceil_log2(stride) + ceil_log2(g_nodes) + 4;
      const uint64_t input_bytes = op_input_bytes(g, v.node, shape);
      const bool caught = v.losers == std::vector<uint8_t>{1} && v.step == static_cast<uint64_t>(bad_step) &&
                          v.node == static_cast<uint64_t>(node);
      const bool bytes_accounted = bytes_in == open.size() + answer_bytes;
      const std::string where = "T = " + std::to_string(steps) + ", node " + std::to_string(node) + ": ";
      if (!caught) problems.push_back(where + "the cheater was not caught at the injected step and node");
      if (v.rounds > bound) problems.push_back(where + "more rounds than the bound");
      if (bytes_in > input_bytes + 65536) problems.push_back(where + "bytes in beyond the op's inputs + 64 KiB");
      if (!bytes_accounted) problems.push_back(where + "the bytes in are not the opening's plus every answer's");
      if (!run.refused.empty()) problems.push_back(where + "the referee refused an envelope: " + run.refused.front());
      results.push_back({{"steps", steps},
                         {"stride", stride},
                         {"graph_nodes", g_nodes},
                         {"injected", {{"step", bad_step}, {"node", node}, {"op", op_name(g.nodes[static_cast<size_t>(node)].op)}}},
                         {"caught", caught},
                         {"rounds", v.rounds},
                         {"round_bound", bound},
                         {"rounds_ok", v.rounds <= bound},
                         {"referee_cpu_seconds", referee_cpu},
                         {"opening_cpu_seconds", opening_cpu},
                         {"train_step_seconds", step_seconds},
                         {"cpu_ratio", referee_cpu / step_seconds},
                         {"cpu_ok", referee_cpu <= 0.05 * step_seconds},
                         {"referee_bytes_in", bytes_in},
                         {"opening_bytes", open.size()},
                         {"op_input_bytes", input_bytes},
                         {"bytes_overhead", static_cast<int64_t>(bytes_in) - static_cast<int64_t>(input_bytes)},
                         {"bytes_ok", bytes_in <= input_bytes + 65536},
                         {"bytes_accounted", bytes_accounted},
                         {"referee_bytes_out", run.bytes_out},
                         {"dispute_wall_seconds", wall}});
      std::filesystem::remove_all(cheater.store);
    }
    std::filesystem::remove_all(honest.store);
  }
  std::printf("%s\n", nlohmann::json({{"bench", "dispute"}, {"results", results}}).dump().c_str());
  for (const std::string& p : problems) std::fprintf(stderr, "bench_dispute: %s\n", p.c_str());
  return check && !problems.empty() ? 1 : 0;
}
