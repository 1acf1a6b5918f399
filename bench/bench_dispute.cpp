// The light referee (issue: rounds, CPU and bytes per dispute). By default on the Fashion-MNIST MLP
// at T = 1000 and T = 10000 steps with stride s = 100; with --job on any job file (e.g. the GPT of
// scenarios/jobs/gpt_chars.toml). For each T an honest provider and cheaters that corrupt one node
// (every element) at step ⌊0.63·T⌋ play the full protocol over signed envelopes in one process (no
// sockets). Prints one JSON object.
//
//   bench_dispute [--job FILE] [--model NAME=PATH...] [--steps 1000,10000] [--stride 100] [--threads K]
//                 [--check]
//
// An onnx job (docs/onnx.md) names its model file, which --model registers as on `tribunal train`: the
// providers and the referee read the same file. --threads trains the providers on K threads (the
// trajectory does not depend on it): a GPT-2-small job's steps take seconds
// (bench/bench_onnx_gpt2.py).
//
// The corrupted nodes are found from the job's step graph (pick_targets): the first forward
// contraction, the last backward contraction, the optimizer update of the largest parameter, the
// contraction with the most multiply-adds (the largest matmul) and the node with the most input bytes
// (the largest opening). For the MLP these are nodes 2 (linear, also the largest matmul), 11 (matmul,
// dW₀) and 13 (adamw, l0.weight, also the largest opening).
//
// The referee's CPU and bytes in cover the whole dispute as the referee node handles it
// (nodes/referee_node.cpp): the DisputeOpen (its bytes; checking its signature, every check of the
// opening in RefereeDispute's constructor, and the dispute's cost against the default limits), then
// every answer (play_local). Baselines measured in the same run: one training step of the job (the
// honest provider's training time / T, wall and process CPU, one thread), and the disputed op's input
// bytes. Where the referee's CPU goes is measured per dispute (referee_cpu_breakdown): the opening;
// decoding and signature checks of the answers and the hashing and proofs of the opened inputs, both
// re-measured by the bench on the very bytes the referee received; the re-execution of the located op,
// timed inside the referee between its "re-executing" and verdict events; the rest is the game's own
// work (reassembling the opened bytes among it). The referee thread's minor page faults (getrusage,
// the parties' share taken out) and the CPU time of one fault on this machine (page_fault_seconds,
// measured at the start) show what first-touching fresh memory costs. The process keeps freed buffers
// for reuse as `tribunal referee` does (nodes/heap_reuse.h; --no-heap-reuse leaves glibc's default),
// and each dispute is played twice with a fresh referee: the main figures are the first play (the
// process's first dispute of that size), `again` the second (a referee that has served one). `store`: what
// a durable referee (`tribunal referee --data`) spends besides, journaling the second play's recorded
// inputs (a re-executed opening as its outcome, not its bytes) into a fresh SQLite store after both plays,
// timed apart (journal); `cpu_ratio_with_again` adds it to the second play's CPU. cpu_ok: the referee's CPU
// is at most 1 % of one step (issue 14), the step taken as the smaller of its wall and CPU time, so that a
// loaded machine's slow steps flatter nothing. With --check it exits 1 unless every cheater was caught at the
// injected step and node, within the round bound and the byte allowance, and the bytes in are exactly the
// opening's plus the answers the parties sent. A job's warmup_steps longer than the T asked for is scaled
// down with T (with_steps).
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "bench/bench_cli.h"
#include "cheats/fault_policy.h"
#include "dispute/job_oracle.h"
#include "dispute/opening.h"
#include "dispute/provider_session.h"
#include "engine/cost.h"
#include "nodes/heap_reuse.h"
#include "protocol/chunk_check.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"
#include "referee/local_dispute.h"
#include "referee/store.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

const std::filesystem::path kDefaultJob =
    std::filesystem::path(TRIBUNAL_SOURCE_DIR) / "scenarios/jobs/fashion_mlp.toml";

/// Issue 14's target: the referee's CPU per dispute at most this fraction of one training step.
constexpr double kCpuTarget = 0.01;

uint64_t ceil_log2(uint64_t n) {
  return n <= 1 ? 0 : std::bit_width(n - 1);
}

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
double thread_cpu_seconds() {
  return cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
}

// The calling thread's minor page faults so far (getrusage).
int64_t page_faults() {
  rusage r{};
  getrusage(RUSAGE_THREAD, &r);
  return r.ru_minflt;
}

// CPU seconds per minor page fault on fresh anonymous memory (the kernel mapping and zeroing a page
// at its first touch), measured on 16 MiB: what the referee's page faults cost on this machine.
double page_fault_seconds() {
  constexpr size_t kBytes = size_t{16} << 20;
  const int64_t faults0 = page_faults();
  const double t0 = thread_cpu_seconds();
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return 0;
  for (size_t i = 0; i < kBytes; i += 4096) static_cast<volatile char*>(p)[i] = 1;
  munmap(p, kBytes);
  const double seconds = thread_cpu_seconds() - t0;
  const int64_t faults = page_faults() - faults0;
  return faults > 0 ? seconds / static_cast<double>(faults) : 0;
}

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot read the job file");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The job's text with its `steps` and `stride` lines replaced (the rest, comments included, as is).
// A `warmup_steps` longer than the new T (the job's parser refuses it) is scaled with T: the same
// fraction of the run as in the job file, whose T is `job_steps`.
std::string with_steps(std::string text, uint64_t steps, uint64_t stride, uint64_t job_steps) {
  const auto line = [&](const std::string& key) {
    const size_t at = text.find("\n" + key + " = ");
    return at == std::string::npos ? std::pair(at, at) : std::pair(at + 1, text.find('\n', at + 1));
  };
  auto set = [&](const std::string& key, uint64_t value) {
    const auto [at, end] = line(key);
    if (at == std::string::npos) throw std::runtime_error("the job file has no '" + key + " = ' line");
    text.replace(at, end - at, key + " = " + std::to_string(value));
  };
  set("steps", steps);
  set("stride", stride);
  if (const auto [at, end] = line("warmup_steps"); at != std::string::npos) {
    const uint64_t warmup = std::stoull(text.substr(at + 15, end - at - 15));
    if (warmup > steps) set("warmup_steps", warmup * steps / std::max<uint64_t>(job_steps, 1));
  }
  return text;
}

/// What a durable referee (`tribunal referee --data`) adds to a dispute: its recorded inputs (the
/// opening, every accepted envelope, the re-executed opening's Opened record) journaled into a fresh
/// store one transaction each, the verdict with the last, as RefereeNode::commit does (referee/store.h:
/// SQLite, WAL, synchronous=NORMAL).
struct Journaled {
  double cpu = 0;      ///< this thread's CPU time, seconds
  double wall = 0;     ///< seconds, waiting for the disk included
  uint64_t bytes = 0;  ///< input bytes journaled (DisputeInput::envelope)
};
Journaled journal(const LocalRun& run, const Digest& id, const PublicKey& referee) {
  Journaled out;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("tribunal-bench-dispute-" + std::to_string(getpid()) + "-store");
  std::filesystem::remove_all(dir);
  {
    RefereeStore store(dir, referee);
    const auto w0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (size_t i = 0; i < run.inputs.size(); ++i) {
      const DisputeInput& input = run.inputs[i];
      if (input.kind == DisputeInput::Kind::Open)
        store.open_dispute(id, input, "bench");
      else
        store.append(id, input, i + 1 == run.inputs.size() ? &run.verdict : nullptr);
      out.bytes += input.envelope.size();
    }
    out.cpu = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    out.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  }
  std::filesystem::remove_all(dir);
  return out;
}

struct Provider {
  KeyPair key = generate_keypair();
  std::filesystem::path store;
  Fault fault;
  TrainResult result;
  double cpu_seconds = 0;  // process CPU time of run_training (one training thread)
  std::vector<uint8_t> claim;
};

Provider train(const JobSpec& job, const Dataset& data, const Fault& fault, const std::string& name,
               int threads) {
  Provider p;
  p.fault = fault;
  // Per process: two benches at once (ctest beside a measurement) must not share a store.
  p.store = std::filesystem::temp_directory_path() /
            ("tribunal-bench-dispute-" + std::to_string(getpid()) + "-" + name);
  std::filesystem::remove_all(p.store);
  TrainOptions o;
  o.out_dir = p.store;
  o.evaluate = false;
  o.policy = fault_policy(fault);
  o.train = &data;
  o.threads = threads;
  const double cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  p.result = run_training(job, o);
  p.cpu_seconds = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  p.claim = seal(p.key, p.result.job_id, 1,
                 Claim{p.result.job_id, static_cast<uint64_t>(p.result.steps), p.result.trajectory_root,
                       p.result.final_state_hash, "ws://" + name + ".invalid/"});
  return p;
}

// Bytes of the re-executed node's inputs that must travel: tensors, or the gathered samples (their
// inputs and labels).
uint64_t op_input_bytes(const StepGraph& g, uint64_t node, const DataShape& data) {
  uint64_t bytes = 0;
  for (ValueId v : g.nodes[node].inputs) {
    const Value& val = g.values[v];
    if (val.source == ValueSource::Constant) continue;
    if (val.source == ValueSource::Data)
      bytes += g.nodes[node].attrs.ints.size() *
               static_cast<uint64_t>(data.features + std::max<int64_t>(data.label_width, 1)) * 4;
    else
      bytes += static_cast<uint64_t>(val.shape.numel()) * 4;
  }
  return bytes;
}

/// A node a cheater corrupts, and why it was chosen ("forward", "backward", "optimizer", "largest
/// matmul", "largest opening"; several, comma-separated, when the choices coincide).
struct Target {
  int64_t node = -1;
  std::string role;
};

/// The nodes to corrupt, found from a step graph: the first contraction (linear or matmul) of the
/// forward pass (up to the node computing the loss), the last contraction of the backward pass, the
/// optimizer update with the most input bytes (that of the largest parameter), the contraction with
/// the most multiply-adds in the whole graph (node_work; ties to the one with more input bytes, then
/// the earlier) and the node of any op with the most input bytes (the largest opening a cheater
/// can make the honest provider stream; the earlier on ties). In graph order, each node once.
std::vector<Target> pick_targets(const StepGraph& g) {
  const auto contraction = [&](size_t n) {
    return g.nodes[n].op == OpKind::Linear || g.nodes[n].op == OpKind::Matmul;
  };
  const auto optimizer = [&](size_t n) {
    return g.nodes[n].op == OpKind::AdamW || g.nodes[n].op == OpKind::SgdMomentum;
  };
  size_t loss_node = g.nodes.size();
  for (size_t n = 0; n < g.nodes.size() && loss_node == g.nodes.size(); ++n)
    for (ValueId v : g.nodes[n].outputs)
      if (v == g.loss) loss_node = n;
  std::optional<size_t> forward, backward, update, largest, widest;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (contraction(n) && n <= loss_node && !forward) forward = n;
    if (contraction(n) && n > loss_node) backward = n;
    if (optimizer(n) && (!update || node_input_bytes(g, g.nodes[n]) > node_input_bytes(g, g.nodes[*update])))
      update = n;
    if (contraction(n)) {
      const auto key = [&](size_t m) {
        return std::pair(node_work(g, g.nodes[m]), node_input_bytes(g, g.nodes[m]));
      };
      if (!largest || key(n) > key(*largest)) largest = n;
    }
    if (!widest || node_input_bytes(g, g.nodes[n]) > node_input_bytes(g, g.nodes[*widest])) widest = n;
  }
  std::vector<Target> out;
  const auto add = [&](std::optional<size_t> n, const char* role) {
    if (!n) return;
    for (Target& t : out)
      if (t.node == static_cast<int64_t>(*n)) {
        t.role += std::string(", ") + role;
        return;
      }
    out.push_back({static_cast<int64_t>(*n), role});
  };
  add(forward, "forward");
  add(backward, "backward");
  add(update, "optimizer");
  add(largest, "largest matmul");
  add(widest, "largest opening");
  std::sort(out.begin(), out.end(), [](const Target& a, const Target& b) { return a.node < b.node; });
  return out;
}

/// Where one dispute's referee CPU went (seconds). `envelopes` and `input_proofs` are re-measured by
/// the bench on the bytes the referee received (the same functions on the same bytes, outside the
/// referee's clock); `reexecution` is timed inside the referee; `rest` is what remains of its total.
struct Breakdown {
  double opening = 0;       // the DisputeOpen: signatures, job, graph, cost (as opening_cpu_seconds)
  double envelopes = 0;     // open_envelope of every answer as the referee node opens it: decoding, and
                            // the BLAKE3 digest and Ed25519 check except for tensor chunks (deferred)
  double input_proofs = 0;  // the opened inputs: each tensor frame's chunk hashes and range proof, each
                            // sample's leaf and proof (InputOpening::accept)
  double reexecution = 0;   // the located op re-executed, its outputs hashed, the verdict decided and signed
};

// Re-measures what the referee does with one answer envelope before and apart from the game:
// open_envelope, and for an opening of inputs the hashes and proofs InputOpening checks.
void measure_answer(const std::vector<uint8_t>& answer, const Digest& dataset_root, uint64_t label_width,
                    Breakdown& b) {
  const double t0 = thread_cpu_seconds();
  const Envelope env = open_envelope(answer, SignatureCheck::DeferTensorChunks);
  const double t1 = thread_cpu_seconds();
  b.envelopes += t1 - t0;
  bool ok = true;
  if (const auto* c = std::get_if<TensorChunk>(&env.body)) {
    const std::optional<uint64_t> total = opened_byte_length(DType::F32, c->shape);
    ok = total && chunk_bytes_proven(DType::F32, *c, *total);
  } else if (const auto* s = std::get_if<Samples>(&env.body)) {
    for (size_t i = 0; i < s->indices.size() && i < s->proofs.size(); ++i)
      ok = ok &&
           verify_inclusion(sample_leaf(s->inputs[i], s->labels[i], label_width), s->proofs[i], dataset_root);
  } else {
    return;
  }
  b.input_proofs += thread_cpu_seconds() - t1;
  if (!ok) std::fprintf(stderr, "bench_dispute: an opened input does not verify\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint64_t> steps_list = {1000, 10000};
  uint64_t stride = 100;
  std::string job_file;
  bool check = false;
  bool no_heap_reuse = false;
  int threads = 1;
  std::vector<std::string> roles;
  std::vector<std::string> models;
  DisputeLimits limits;
  CLI::App app(
      "The light referee: rounds, CPU and bytes per dispute, on the Fashion-MNIST MLP or a job file; prints "
      "one JSON object.",
      "bench_dispute");
  app.add_option("--job", job_file,
                 "the job file to dispute (e.g. scenarios/jobs/gpt_chars.toml); default: "
                 "scenarios/jobs/fashion_mlp.toml at --steps 1000,10000 --stride 100")
      ->type_name("FILE")
      ->check(CLI::ExistingFile.description(""));
  auto* steps_option =
      app.add_option(
             "--steps", steps_list,
             "the job lengths T to dispute, in steps, comma-separated (each at least 1); with --job the "
             "job file's steps by default")
          ->type_name("T,T...")
          ->delimiter(',')
          ->default_str("1000,10000")
          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24).description(""));
  auto* stride_option =
      app.add_option("--stride", stride,
                     "checkpoint stride s, in steps (at least 1); with --job the job file's "
                     "stride by default")
          ->type_name("S")
          ->capture_default_str()
          ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 24).description(""));
  app.add_option("--model", models,
                 "where the model file NAME of an onnx job (model.file) is, as on tribunal train "
                 "(repeatable)")
      ->type_name("NAME=PATH");
  app.add_option("--threads", threads,
                 "training threads of the providers (the trajectory does not depend on it); the step's "
                 "wall and CPU time are both reported")
      ->type_name("K")
      ->capture_default_str()
      ->check(CLI::Range(1, 256).description(""));
  app.add_option("--max-reexecution-work", limits.max_reexecution_work,
                 "the referee's limit on the heaviest node's work (as `tribunal referee "
                 "--max-reexecution-work`): GPT-2's 50257-token head at batch 4 × 256 needs 2^35.2")
      ->type_name("N")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50).description(""));
  app.add_option("--roles", roles,
                 "dispute only the nodes chosen for these roles (forward, backward, optimizer, "
                 "largest-matmul, largest-opening), comma-separated; every role by default")
      ->type_name("ROLE,ROLE...")
      ->delimiter(',')
      ->check(CLI::IsMember({"forward", "backward", "optimizer", "largest-matmul", "largest-opening"}));
  app.add_flag("--no-heap-reuse", no_heap_reuse,
               "leave glibc's malloc as it is (a fresh mapping per large buffer), for a comparison");
  app.add_flag("--check", check,
               "exit 1 unless every cheater is caught at the injected step and node, within the round "
               "bound and the byte allowance");
  bench::parse_command_line(app, argc, argv);
  const bool default_job = job_file.empty();
  const std::filesystem::path job_path = default_job ? kDefaultJob : std::filesystem::path(job_file);
  const std::string job_text = read_text(job_path);
  const JobSpec own = parse_job(job_text, job_path.string());
  if (!default_job && steps_option->count() == 0) steps_list = {static_cast<uint64_t>(own.steps)};
  if (!default_job && stride_option->count() == 0) stride = static_cast<uint64_t>(own.stride);
  std::vector<std::string> problems;
  nlohmann::json results = nlohmann::json::array();
  DataRegistry registry = DataRegistry::debian();
  for (const std::string& m : models) registry.add_model(m);
  ThreadPool pool(1);
  const double fault_seconds = page_fault_seconds();
  // As `tribunal referee` runs (nodes/heap_reuse.h): disputes after the first reuse freed buffers.
  const bool heap_reuse = !no_heap_reuse && nodes::keep_freed_buffers();
  for (uint64_t steps : steps_list) {
    const std::string text = with_steps(job_text, steps, stride, static_cast<uint64_t>(own.steps));
    JobSpec job = parse_job(text, "bench job");
    locate_data(job, registry);
    const Dataset data = load_dataset(job, Split::Train, pool);
    const DataShape shape = data_shape_of(data);
    const Provider honest = train(job, data, Fault{}, "honest", threads);
    const double step_seconds = honest.result.seconds / static_cast<double>(steps);
    const double step_cpu_seconds = honest.cpu_seconds / static_cast<double>(steps);
    const int64_t bad_step = static_cast<int64_t>(steps * 63 / 100);
    std::vector<Target> targets = pick_targets(JobOracle(job, shape).graph(static_cast<uint64_t>(bad_step)));
    if (!roles.empty())
      std::erase_if(targets, [&](const Target& t) {
        return std::none_of(roles.begin(), roles.end(), [&](std::string role) {
          std::replace(role.begin(), role.end(), '-', ' ');  // "largest-matmul" names "largest matmul"
          return t.role.find(role) != std::string::npos;
        });
      });
    for (const Target& target : targets) {
      const int64_t node = target.node;
      Fault f;
      f.step = bad_step;
      f.node = node;
      f.element = -1;
      f.delta = 0.5f;
      const Provider cheater = train(job, data, f, "cheater", threads);
      const DisputeOpen d = dispute_open(text, data, honest.claim, cheater.claim);
      const KeyPair client = generate_keypair(), referee_key = generate_keypair();
      const std::vector<uint8_t> open = seal(client, dispute_id(d), 1, d);
      // One play of the dispute with a fresh referee and fresh provider sessions. Played twice: the
      // first is this process's first dispute of its size (its buffers' pages touched for the first
      // time), the second what a referee that has served such disputes spends (nodes/heap_reuse.h).
      struct Played {
        std::unique_ptr<RefereeDispute> referee;
        Breakdown breakdown;
        LocalRun run;
        double opening_cpu = 0, referee_cpu = 0, wall = 0;
        int64_t referee_faults = 0;
        uint64_t bytes_in = 0, answer_bytes = 0, answers_sent = 0;
      };
      const auto play = [&]() {
        Played played;
        Breakdown& breakdown = played.breakdown;
        const auto w0 = std::chrono::steady_clock::now();
        // The referee receives the opening: it checks the client's signature, every check of the
        // opening (RefereeDispute's constructor: the claims' signatures, the job, its id) and the
        // dispute's cost against its limits, as the referee node does before it starts a dispute.
        const int64_t open_faults0 = page_faults();
        const double open_cpu0 = thread_cpu_seconds();
        // The re-execution, timed inside the referee: from its first attempt to the Step that carries
        // the verdict.
        double reexecute_cpu0 = -1;
        DisputeOptions options;
        options.weights = registry;  // an onnx job's model file, read by the referee's oracle
        options.reexecute_hook = [&](int attempt) {
          if (attempt == 1) reexecute_cpu0 = thread_cpu_seconds();
        };
        played.referee = std::make_unique<RefereeDispute>(referee_key, open_envelope(open), options);
        RefereeDispute& referee = *played.referee;
        check_dispute_cost(referee.cost(), limits);
        played.opening_cpu = thread_cpu_seconds() - open_cpu0;
        played.referee_faults = page_faults() - open_faults0;
        breakdown.opening = played.opening_cpu;
        const Provider* providers[2] = {&honest, &cheater};
        std::unique_ptr<ProviderDisputeSession> sessions[2];
        std::array<LocalParty, 2> parties;
        int64_t party_faults = 0;  // the parties' (and the bench's re-measuring) share of the thread's faults
        for (int p = 0; p < 2; ++p)
          parties[static_cast<size_t>(p)] = [&, p](const Envelope& env) -> std::vector<std::vector<uint8_t>> {
            const int64_t faults0 = page_faults();
            std::vector<std::vector<uint8_t>> answers;
            if (env.kind != MessageKind::DisputeOpen) {
              answers = sessions[p]->on_envelope(env);
            } else {
              sessions[p] = std::make_unique<ProviderDisputeSession>(
                  providers[p]->key, env, job, data, providers[p]->store, pool,
                  std::vector<PublicKey>{referee_key.public_key}, fault_policy(providers[p]->fault));
            }
            for (const auto& a : answers) {
              played.answer_bytes += a.size();
              measure_answer(a, data.root, d.label_width, breakdown);
            }
            played.answers_sent += answers.size();
            party_faults += page_faults() - faults0;
            return answers;
          };
        const int64_t play_faults0 = page_faults();
        played.run = play_local(referee, parties, [&](const RefereeDispute::Step& step) {
          if (step.verdict && reexecute_cpu0 >= 0)
            breakdown.reexecution = thread_cpu_seconds() - reexecute_cpu0;
        });
        played.referee_faults += page_faults() - play_faults0 - party_faults;
        played.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
        played.referee_cpu = played.opening_cpu + played.run.referee_cpu_seconds;
        played.bytes_in = open.size() + played.run.bytes_in;
        return played;
      };
      Played first = play();
      const RefereeDispute& referee = *first.referee;
      const Breakdown& breakdown = first.breakdown;
      const LocalRun& run = first.run;
      const double opening_cpu = first.opening_cpu, referee_cpu = first.referee_cpu, wall = first.wall;
      const int64_t referee_faults = first.referee_faults;
      const uint64_t bytes_in = first.bytes_in, answer_bytes = first.answer_bytes,
                     answers_sent = first.answers_sent;
      const auto rest_of = [](const Played& p) {
        return p.referee_cpu - p.breakdown.opening - p.breakdown.envelopes - p.breakdown.input_proofs -
               p.breakdown.reexecution;
      };
      const Verdict v = verify_verdict(run.verdict, referee_key.public_key, &registry);
      const StepGraph& g = referee.oracle().graph(v.step);
      const uint64_t g_nodes = g.nodes.size();
      // docs/protocol.md "Rounds": ⌈log2(T/s + 1)⌉ + ⌈log2(s + 1)⌉ + ⌈log2(G + 1)⌉ descents, two
      // commitments, one record opening and one input opening; and ⌈log2 n⌉ for level 4 when the
      // corrupted output (every element of output 0) has n ≥ 2 chunks and its op has parts.
      const uint64_t out_elements = static_cast<uint64_t>(g.values[g.nodes[v.node].outputs[0]].shape.numel());
      const uint64_t out_chunks = (out_elements + kTensorChunkBytes / 4 - 1) / (kTensorChunkBytes / 4);
      const bool level4 =
          out_chunks >= 2 &&
          referee.oracle().part_inputs(v.step, v.node, 0, {0, kTensorChunkBytes / 4}).has_value();
      const uint64_t bound = ceil_log2((steps + stride - 1) / stride + 1) + ceil_log2(stride + 1) +
                             ceil_log2(g_nodes + 1) + 4 + (level4 ? ceil_log2(out_chunks) : 0);
      const uint64_t input_bytes = op_input_bytes(g, v.node, shape);
      const bool caught = v.losers == std::vector<uint8_t>{1} && v.step == static_cast<uint64_t>(bad_step) &&
                          v.node == static_cast<uint64_t>(node);
      const bool bytes_accounted = bytes_in == open.size() + answer_bytes;
      const std::string where = "T = " + std::to_string(steps) + ", node " + std::to_string(node) + ": ";
      if (!caught) problems.push_back(where + "the cheater was not caught at the injected step and node");
      if (v.rounds > bound) problems.push_back(where + "more rounds than the bound");
      if (bytes_in > input_bytes + 65536)
        problems.push_back(where + "bytes in beyond the op's inputs + 64 KiB");
      if (!bytes_accounted)
        problems.push_back(where + "the bytes in are not the opening's plus every answer's");
      if (!run.refused.empty())
        problems.push_back(where + "the referee refused an envelope: " + run.refused.front());
      const Node& injected = g.nodes[static_cast<size_t>(node)];
      const double rest = rest_of(first);
      results.push_back(
          {{"steps", steps},
           {"stride", stride},
           {"graph_nodes", g_nodes},
           {"max_node_work", referee.cost().max_node_work},
           {"max_reexecution_work", limits.max_reexecution_work},
           {"injected",
            {{"step", bad_step},
             {"node", node},
             {"op", op_name(injected.op)},
             {"output", g.values[injected.outputs[0]].name},
             {"role", target.role}}},
           {"caught", caught},
           {"rounds", v.rounds},
           {"round_bound", bound},
           {"level4_chunks", level4 ? out_chunks : 0},
           {"rounds_ok", v.rounds <= bound},
           {"referee_cpu_seconds", referee_cpu},
           {"opening_cpu_seconds", opening_cpu},
           {"referee_cpu_breakdown",
            {{"opening", breakdown.opening},
             {"envelopes", breakdown.envelopes},
             {"input_proofs", breakdown.input_proofs},
             {"reexecution", breakdown.reexecution},
             {"rest", rest}}},
           {"referee_page_faults", referee_faults},
           {"train_step_seconds", step_seconds},
           {"train_step_cpu_seconds", step_cpu_seconds},
           {"cpu_ratio", referee_cpu / step_seconds},
           {"cpu_ratio_to_step_cpu", referee_cpu / step_cpu_seconds},
           {"cpu_target", kCpuTarget},
           {"cpu_ok", referee_cpu <= kCpuTarget * std::min(step_seconds, step_cpu_seconds)},
           {"referee_bytes_in", bytes_in},
           {"referee_envelopes_in", answers_sent + 1},
           {"opening_bytes", open.size()},
           {"op_input_bytes", input_bytes},
           {"bytes_overhead", static_cast<int64_t>(bytes_in) - static_cast<int64_t>(input_bytes)},
           {"bytes_ok", bytes_in <= input_bytes + 65536},
           {"bytes_accounted", bytes_accounted},
           {"referee_bytes_out", run.bytes_out},
           {"dispute_wall_seconds", wall}});

      // The second play, once the first referee (its opened inputs, its oracle's graph) is gone.
      first = Played{};
      const Played again = play();
      const Verdict again_v = verify_verdict(again.run.verdict, referee_key.public_key, &registry);
      const bool again_caught = again_v.losers == std::vector<uint8_t>{1} &&
                                again_v.step == static_cast<uint64_t>(bad_step) &&
                                again_v.node == static_cast<uint64_t>(node);
      if (!again_caught)
        problems.push_back("T = " + std::to_string(steps) + ", node " + std::to_string(node) +
                           ": the second play did not catch the cheater at the injected step and node");
      // The journal after both plays: its SQLite allocations between them made the second play fault
      // as much as the first (GPT-2-small's AdamW opening: 27,649 pages, against none with it here).
      const Journaled store = journal(again.run, again.referee->dispute_id(), referee_key.public_key);
      results.back()["store"] = {{"cpu_seconds", store.cpu},
                                 {"wall_seconds", store.wall},
                                 {"bytes", store.bytes},
                                 {"cpu_ratio_with_again", (again.referee_cpu + store.cpu) / step_seconds}};
      results.back()["again"] = {
          {"referee_cpu_seconds", again.referee_cpu},
          {"referee_cpu_breakdown",
           {{"opening", again.breakdown.opening},
            {"envelopes", again.breakdown.envelopes},
            {"input_proofs", again.breakdown.input_proofs},
            {"reexecution", again.breakdown.reexecution},
            {"rest", rest_of(again)}}},
          {"referee_page_faults", again.referee_faults},
          {"cpu_ratio", again.referee_cpu / step_seconds},
          {"cpu_ratio_to_step_cpu", again.referee_cpu / step_cpu_seconds},
          {"cpu_ok", again.referee_cpu <= kCpuTarget * std::min(step_seconds, step_cpu_seconds)},
          {"caught", again_caught}};
      std::filesystem::remove_all(cheater.store);
    }
    std::filesystem::remove_all(honest.store);
  }
  std::printf("%s\n", nlohmann::json({{"bench", "dispute"},
                                      {"job", default_job ? "scenarios/jobs/fashion_mlp.toml" : job_file},
                                      {"page_fault_seconds", fault_seconds},
                                      {"heap_reuse", heap_reuse},
                                      {"results", results}})
                          .dump()
                          .c_str());
  for (const std::string& p : problems) std::fprintf(stderr, "bench_dispute: %s\n", p.c_str());
  return check && !problems.empty() ? 1 : 0;
}
