// The light referee (issue: rounds, CPU and bytes per dispute), on the Fashion-MNIST MLP at
// T = 1000 and T = 10000 steps with stride s = 100. For each T an honest provider and cheaters that
// corrupt a forward, a backward and an optimizer node (every element) at step ⌊0.63·T⌋ play the full
// protocol over signed envelopes in one process (no sockets). Prints one JSON object.
//
//   bench_dispute [--steps 1000,10000] [--stride 100]
//
// Baselines measured in the same run: one training step of the job (the honest provider's training
// time / T), and the disputed op's input bytes.
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/provider_session.h"
#include "referee/local_dispute.h"

using namespace tribunal;

namespace {

const std::filesystem::path kJobFile = std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/fashion_mlp.toml";

uint64_t ceil_log2(uint64_t n) { return n <= 1 ? 0 : std::bit_width(n - 1); }

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
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps_list.clear();
      std::stringstream list(argv[++i]);
      for (std::string item; std::getline(list, item, ',');) steps_list.push_back(std::stoull(item));
    } else if (!std::strcmp(argv[i], "--stride") && i + 1 < argc) {
      stride = std::stoull(argv[++i]);
    }
  }
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
      RefereeDispute referee(referee_key, open_envelope(open));
      const Provider* providers[2] = {&honest, &cheater};
      std::unique_ptr<ProviderDisputeSession> sessions[2];
      std::array<LocalParty, 2> parties;
      for (int p = 0; p < 2; ++p)
        parties[static_cast<size_t>(p)] = [&, p](const Envelope& env) -> std::vector<std::vector<uint8_t>> {
          if (env.kind != MessageKind::DisputeOpen) return sessions[p]->on_envelope(env);
          sessions[p] = std::make_unique<ProviderDisputeSession>(providers[p]->key, env, job, data, providers[p]->store,
                                                                 pool, std::vector<PublicKey>{referee_key.public_key},
                                                                 providers[p]->fault);
          return {};
        };
      const auto w0 = std::chrono::steady_clock::now();
      const LocalRun run = play_local(referee, parties);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
      const Verdict v = verify_verdict(run.verdict, referee_key.public_key);
      const StepGraph& g = referee.oracle().graph(v.step);
      const uint64_t g_nodes = g.nodes.size();
      const uint64_t bound = ceil_log2((steps + stride - 1) / stride) + ceil_log2(stride) + ceil_log2(g_nodes) + 4;
      const uint64_t input_bytes = op_input_bytes(g, v.node, shape);
      results.push_back({{"steps", steps},
                         {"stride", stride},
                         {"graph_nodes", g_nodes},
                         {"injected", {{"step", bad_step}, {"node", node}, {"op", op_name(g.nodes[static_cast<size_t>(node)].op)}}},
                         {"caught", v.losers == std::vector<uint8_t>{1} && v.step == static_cast<uint64_t>(bad_step) &&
                                        v.node == static_cast<uint64_t>(node)},
                         {"rounds", v.rounds},
                         {"round_bound", bound},
                         {"rounds_ok", v.rounds <= bound},
                         {"referee_cpu_seconds", run.referee_cpu_seconds},
                         {"train_step_seconds", step_seconds},
                         {"cpu_ratio", run.referee_cpu_seconds / step_seconds},
                         {"cpu_ok", run.referee_cpu_seconds <= 0.05 * step_seconds},
                         {"referee_bytes_in", run.bytes_in},
                         {"op_input_bytes", input_bytes},
                         {"bytes_overhead", static_cast<int64_t>(run.bytes_in) - static_cast<int64_t>(input_bytes)},
                         {"bytes_ok", run.bytes_in <= input_bytes + 65536},
                         {"referee_bytes_out", run.bytes_out},
                         {"dispute_wall_seconds", wall}});
      std::filesystem::remove_all(cheater.store);
    }
    std::filesystem::remove_all(honest.store);
  }
  std::printf("%s\n", nlohmann::json({{"bench", "dispute"}, {"results", results}}).dump().c_str());
  return 0;
}
