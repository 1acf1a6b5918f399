// A cheater scenario script (docs/scenarios.md): a job, the providers and how each behaves — the
// work it does, how it answers the referee, the link it sits behind — the referee's deadlines and
// the outcome the network must reach. `tribunal scenario run FILE...` plays each over real loopback
// WebSocket connections (scenarios/runner.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cheats/fault.h"
#include "engine/data_registry.h"
#include "engine/device.h"
#include "protocol/messages.h"

namespace tribunal::scenarios {

/// How a provider answers the referee's questions (docs/scenarios.md has one paragraph per kind).
enum class AnswerKind : uint8_t {
  Honest,
  // bisection lies
  BadProof,           ///< one answer whose children do not hash to the committed node
  Equivocate,         ///< two different signed answers to one question
  ChangeRoot,         ///< from `round` on, answers from another provider's trajectory
  AgreeThenDisagree,  ///< another provider's answers before `round`, its own after
  AlwaysAgree,        ///< always the other provider's answers
  AlwaysDisagree,     ///< random children every round
  BadHandoff,         ///< a level commitment that does not open to the agreed state
  // final-step fraud
  ForgedBytes,  ///< opened tensor bytes that are not the committed tensor
  BadRecord,    ///< an opened node record whose input is not its producer's output
  // liveness
  Silent,            ///< from `round` on, never answers
  Late,              ///< from `round` on, answers 500 ms after its clock ran out
  LastMoment,        ///< answers every question just before its clock runs out
  WithholdOpenings,  ///< answers everything but the opening of the located node's inputs
  Disconnect,        ///< at `round`, drops the connection instead of answering (once)
  CrashRestart,      ///< at `round`, the whole node crashes; it restarts from its store after down_ms
  // malformed frames (sent before the real answer, or instead of it)
  Truncated,
  Oversized,
  BadSignature,
  ForeignKey,
  ReplayRound,    ///< its own answer of the previous round again
  ReplayDispute,  ///< its answer signed for another dispute
  WrongRound,     ///< a signed answer naming another round
  NanBytes,       ///< NaN/Inf in place of an opened tensor's bytes
  ZeroHashes,     ///< all-zero digests in place of the answer's hashes
};

/// How a trainer of a job with roles serves its rounding logs to its auditors (`serve_logs`).
enum class LogServing : uint8_t {
  Honest,    ///< the logs its records commit to, signed with its key
  Withheld,  ///< `withheld`: refuses every LogRequest
  Altered,  ///< `altered`: other logs (each step's first near-boundary decision flipped), signed with its key
  AlteredThrowawayKey,  ///< `altered_throwaway_key`: the same, signed with a key no claim of it names
};

/// The scenario-file name of a kind ("bad_proof", …).
const char* answer_kind_name(AnswerKind kind);

struct AnswerBehaviour {
  AnswerKind kind = AnswerKind::Honest;
  uint32_t round = 1;    ///< first round it acts in
  uint32_t count = 1;    ///< malformed kinds: answers it sends a bad frame with (a question
                         ///< re-asked after a reconnect is another answer)
  bool instead = false;  ///< malformed kinds: the bad frame replaces the answer (else precedes it)
  std::chrono::milliseconds down{500};  ///< crash_restart: time the node stays down
  std::string mirror;                   ///< change_root/agree*/always_agree: whose trajectory it parrots
};

/// The link between a provider and the rest of the network.
struct LinkConditions {
  std::chrono::milliseconds latency{0};  ///< added to every reply
  double drop_rate = 0;  ///< probability a reply is lost with the connection (the referee reconnects)
  uint64_t bytes_per_second = 0;  ///< the link's bandwidth for replies (0: unlimited)
};

struct ProviderSpec {
  std::string name;
  cheats::Fault work;  ///< wrong work (cheats/fault.h); default honest
  std::string work_kind = "honest";
  AnswerBehaviour answers;
  LinkConditions link;
  /// How much slower its machine computes than the others' (≥ 1): each answer is held back by
  /// (slowdown − 1) × the time it took to compute.
  double slowdown = 1;
  /// Where it trains (engine/device.h: cpu, cuda, cuda-emulated); its dispute answers are computed on
  /// the CPU either way.
  Device device = Device::Cpu;
  /// `serve_logs`: how, as the trainer of a job with roles, it answers its auditors' LogRequests
  /// (nodes::ProviderNode::log_serving).
  LogServing serve_logs = LogServing::Honest;
};

/// What the scenario must end in. Unset fields are not checked.
struct Expectation {
  std::string winner;                   ///< a provider name, or "none" (no claim stands)
  std::optional<bool> dispute;          ///< whether any dispute is played
  std::optional<VerdictReason> reason;  ///< of the last verdict
  std::optional<uint64_t> step;
  std::optional<uint64_t> node;
  std::optional<std::string> op;  ///< op kind name of the located node
  // Counts of what happened (exact): each makes a scenario fail when its behaviour did not happen.
  std::optional<uint64_t> disputes;    ///< disputes played
  std::optional<uint64_t> crashes;     ///< provider crash-restarts
  std::optional<uint64_t> refused;     ///< provider frames the referee refused (all disputes)
  std::optional<uint64_t> reconnects;  ///< provider connections the referee re-established
};

struct Scenario {
  std::filesystem::path file;
  std::string name;
  std::string about;
  std::filesystem::path job;  ///< resolved against the scenario file's directory
  /// The job file's text, with the scenario's [dispute] table (the time terms) appended if it has one.
  std::string job_text;
  /// Debian's data sets and the scenario's [models] (NAME = path relative to the scenario file): what
  /// every node of the scenario registers, as an operator's --model NAME=PATH would (docs/onnx.md).
  DataRegistry registry = DataRegistry::debian();
  uint64_t seed = 1;  ///< drives drops and random lies
  /// `roles = true`: a rounding-log job with roles, the first provider its trainer and the others its
  /// auditors (nodes::DelegateRequest::roles; docs/numerics.md, "Trainer and auditors").
  bool roles = false;
  LinkConditions network;  ///< default link of every provider
  int cpu_hogs = 0;        ///< [load] busy threads spinning beside the nodes while the scenario runs
  std::vector<ProviderSpec> providers;
  Expectation expect;
};

/// Parses a scenario file. Throws EngineError("file:line:column: what") on anything unknown,
/// missing or out of range, including a `node` or `step` outside the job's graph and trajectory.
Scenario load_scenario(const std::filesystem::path& file);

}  // namespace tribunal::scenarios
