// The messages of tribunal's protocol (docs/protocol.md, "Messages"). Plain structs; their canonical
// binary encoding is in protocol/codec.h and the signed envelope that carries them in protocol/envelope.h.
//
// Trees are addressed by leaf ranges: the Merkle node over leaves [lo, hi) of a tree of n leaves
// is RFC 6962's MTH(leaves[lo, hi)), whose children split at lo + k, k the largest power of two
// < hi − lo. A referee descends the two parties' trees together to the first leaf where they differ.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "protocol/hash.h"
#include "protocol/merkle.h"

namespace tribunal {

/// Wire format version; the first byte of every envelope. 3: a TensorChunk carries a run of chunks
/// with one range proof. 4: level 4 (Level::Chunks) narrows a located node to one chunk of an output.
/// 5: a StepCommit carries the root of state t's tensor leaves, not the leaves of states t and t+1;
/// the leaves a decision reads come with the records (Records.state_leaves, Records.post_state).
inline constexpr uint8_t kWireVersion = 5;

enum class MessageKind : uint8_t {
  JobSubmit = 1,       ///< client → provider
  Claim = 2,           ///< provider → client
  DisputeOpen = 3,     ///< client → referee
  Query = 4,           ///< referee → provider
  Children = 5,        ///< provider → referee: the children of a tree node
  IntervalCommit = 6,  ///< provider → referee: level-2 commitment
  StepCommit = 7,      ///< provider → referee: level-3 (node-record) commitment
  Records = 8,         ///< provider → referee: opened node records
  TensorChunk = 9,     ///< provider → referee: one chunk of an opened tensor
  Samples = 10,        ///< provider → referee: opened data-set samples
  Verdict = 11,        ///< referee → everyone
  Error = 12,          ///< anyone → anyone: why a message was refused or a session ends
  RefereeCheck = 13,   ///< client → referee: prove your key, judge these provider endpoints
  RefereeAnswer = 14,  ///< referee → client: the signed answer to a RefereeCheck
  StateRequest = 15,   ///< client → provider: send the final state of a claim
  StateHeader = 16,    ///< provider → client: its commitment, then TensorChunk… per tensor
  LogRequest = 17,     ///< auditor → trainer: send your rounding logs of one step
  LogHeader = 18,      ///< trainer → auditor: its log leaves of the step, then TensorChunk… per node
  LogEvidence = 19,    ///< auditor → referee: the trainer's signed LogHeader of the located step
};

/// The dispute levels (docs/protocol.md, "The game").
enum class Level : uint8_t {
  Checkpoints = 1,  ///< the trajectory tree: state hashes at steps 0, s, 2s, …, T
  Steps = 2,        ///< one checkpoint interval: state hashes at every step of it
  Nodes = 3,        ///< one step: node records of its graph, then state_hash(t+1)
  /// Inside the located node: the chunk tree of one of its outputs (its 64 KiB chunks' hashes, the
  /// tree under the chunk root of the output's tensor leaf; docs/protocol.md, "The game", level 4).
  Chunks = 4,
};

/// client → provider: train this job. `job_toml` is the job file's text; the provider computes the
/// job_id itself and only answers for the id in the envelope. `trainer_claim`, to an auditor of a
/// rounding-log job with roles: the trainer's signed Claim envelope (encoded, at most
/// kMaxClaimEnvelopeBytes) as the client received it, whose signer the auditor requires of every
/// LogHeader and log chunk it fetches (docs/numerics.md, "Trainer and auditors"); empty otherwise.
struct JobSubmit {
  std::string job_toml;
  std::vector<uint8_t> trainer_claim{};
};

/// provider → client: the commitment to a whole trajectory, signed by the provider. `endpoint` is the
/// ws:// URL at which the provider answers a referee about this claim: the provider signs it, so
/// whoever opens a dispute cannot point the referee at another address (docs/protocol.md, "Threat
/// model").
struct Claim {
  Digest job_id{};
  uint64_t steps = 0;
  Digest trajectory_root{};
  Digest final_state_hash{};
  std::string endpoint;  ///< at most kMaxEndpointBytes
};

/// Longest Claim.endpoint (bytes).
inline constexpr size_t kMaxEndpointBytes = 1024;

/// client → referee: open a dispute between two claims. `claims` are the providers' signed Claim
/// envelopes (encoded), so the referee holds each provider to its own signature. Every field the game
/// rests on is signed by a provider or derived by the referee: the data set's root and shape are part
/// of the job_id both claims sign, the providers' endpoints are in their claims, and the initial state
/// hash is derived from the job. The dispute id is the hash of this whole body (dispute_id()).
struct DisputeOpen {
  std::string job_toml;
  Digest dataset_root{};         ///< the training set's root (part of the job_id the claims sign)
  uint64_t dataset_samples = 0;  ///< its size N and sample shape (part of the job_id too), so the
  uint64_t features = 0;         ///< referee needs no data
  uint64_t classes = 0;
  uint64_t label_width = 0;  ///< 0: a class id per sample; L: a label sequence of L values per sample
  std::vector<std::vector<uint8_t>> claims;  ///< exactly two signed Claim envelopes
  bool operator==(const DisputeOpen&) const = default;
};

/// What a Query asks for.
enum class QueryKind : uint8_t {
  Children = 1,        ///< the two children of tree node [lo, hi) of `level` (step/interval as set)
  CommitInterval = 2,  ///< recompute checkpoint interval `interval` and commit (→ IntervalCommit)
  CommitStep = 3,      ///< run step `step` recording node records and commit (→ StepCommit)
  OpenRecords = 4,     ///< open node records `indices` of step `step` (→ Records)
  OpenInputs = 5,      ///< open `values` of step `step` (→ TensorChunk… per value, in order) and
                       ///< data-set samples `indices` (→ Samples), as one round
  /// Rounding-log jobs only: open the party's own rounding log of node `indices[0]` of step `step`
  /// (→ TensorChunk… of value 0: the log as a DType::Trits tensor [count], proven against the last
  /// output hash of the party's record; docs/protocol.md, "Rounding-log jobs"). Asked of both parties
  /// after OpenInputs; each answers with its own log.
  OpenLog = 6,
  /// Rounding-log jobs with roles, to the auditor, when its record's log leaf at the located node is
  /// not the trainer's: show the LogHeader the trainer signed for step `step` when the auditor fetched
  /// its logs (→ LogEvidence). Asked in the same round as the trainer's OpenLog.
  LogEvidence = 7,
};

/// Where an opened tensor comes from in step `step`'s graph.
enum class ValueOrigin : uint8_t {
  StateInput = 1,  ///< state tensor `index` of state `step`
  NodeOutput = 2,  ///< output `slot` of node `index`
  /// OpenRecords only: every tensor leaf of state `step` + 1 (index and slot 0), for a step whose
  /// records all agree and whose next states differ (Records.post_state).
  NextState = 3,
};

/// One value of a step graph that a referee asks to see.
struct ValueAddress {
  ValueOrigin origin = ValueOrigin::NodeOutput;
  uint64_t index = 0;  ///< state tensor index or node index
  uint32_t slot = 0;   ///< node output slot (0 for state tensors)
  bool operator==(const ValueAddress&) const = default;
};

/// Chunks [first, end) of opened value `value` (TensorChunk.value and .chunk numbering).
struct ChunkRange {
  uint32_t value = 0;
  uint32_t first = 0;
  uint32_t end = 0;
  bool operator==(const ChunkRange&) const = default;
};

/// referee → provider. `round` numbers the referee's questions in one dispute; every answer repeats
/// it, so a stale or replayed answer is refused.
struct Query {
  uint32_t round = 0;
  QueryKind kind = QueryKind::Children;
  Level level = Level::Checkpoints;
  uint64_t interval = 0;    ///< level 2: index of the checkpoint interval (its end leaf in level 1)
  uint64_t step = 0;        ///< level 3 and openings: the step t
  uint64_t lo = 0, hi = 0;  ///< Children: the tree node's leaf range
  /// OpenRecords: node indices; OpenInputs: sample rows; Children of Level::Chunks: {node, output
  /// slot} of step `step`, whose chunk tree is descended.
  std::vector<uint64_t> indices;
  /// OpenInputs: tensors to open; OpenRecords: the tensor leaves of state `step` (StateInput) to
  /// prove, and NextState for all of state `step` + 1's.
  std::vector<ValueAddress> values;
  /// The time the asked party has to answer: its clock, i.e. what it saved on earlier questions
  /// plus this question's allowance (docs/protocol.md, "Clocks"). Informational: the referee's clock
  /// decides. On the wire: u64 milliseconds.
  std::chrono::milliseconds clock{0};
  /// OpenInputs and OpenLog asked again (docs/protocol.md, "Lost frames"), or an OpenInputs of the
  /// inputs one output chunk depends on (level 4): only these chunks are wanted, and the samples only
  /// when `indices` is not empty. Empty: the whole opening.
  std::vector<ChunkRange> chunks;
};

/// provider → referee: the children of node [lo, hi), in answer to a QueryKind::Children query. A
/// child spanning one leaf is given as the leaf's *value* (the referee hashes it with the leaf prefix);
/// a larger child as its node hash.
struct Children {
  uint32_t round = 0;
  Digest left{};
  Digest right{};
};

/// provider → referee, level 2: the Merkle root over state hashes of steps [c_{k−1}, c_k] (a tree of
/// c_k − c_{k−1} + 1 leaves). Its first leaf must be the agreed state_hash(c_{k−1}) — the party
/// proves that value against its own trajectory root (the level-1 descent only established that
/// both trees agree there, not the value) — and its last leaf the party's own level-1 value at c_k.
struct IntervalCommit {
  uint32_t round = 0;
  Digest root{};
  Digest start_value{};            ///< state_hash(c_{k−1})
  InclusionProof start_in_level1;  ///< start_value is leaf k−1 of the party's trajectory tree
  InclusionProof first;            ///< start_value is leaf 0 of `root`
  InclusionProof last;             ///< the party's level-1 value at c_k is the last leaf of `root`
};

/// provider → referee, level 3: the Merkle root over G + 1 leaves — the G node records of step t's
/// graph, then state_hash(t+1) — with the root of state t's tensor leaves, state_hash(t), proven to be
/// leaf j−1 of the party's level-2 tree (the agreed value there), and the party's own level-2 value at
/// t+1 proven to be leaf G of `root`. The tensor leaves themselves come only where a decision reads
/// them, with the records (Records): a commitment's size does not grow with the model's tensor count.
struct StepCommit {
  uint32_t round = 0;
  Digest root{};
  Digest pre_root{};             ///< state_hash(t): the Merkle root of state t's tensor leaves
  InclusionProof pre_in_level2;  ///< pre_root is leaf j−1 of the level-2 tree
  InclusionProof last;           ///< the party's state_hash(t+1) is leaf G of `root`
};

/// One node of a step graph as committed: record = H(NodeRecord ‖ op ‖ u32 attrs length ‖ attrs ‖
/// u32 inputs ‖ input hashes ‖ u32 outputs ‖ output hashes). An input from the data set has the hash
/// dataset_root.
struct NodeRecord {
  uint8_t op = 0;
  std::vector<uint8_t> attrs;
  std::vector<Digest> inputs;
  std::vector<Digest> outputs;
};

/// record hash as above.
Digest node_record_hash(const NodeRecord& record);

/// provider → referee: opened node records with proofs against the party's level-3 root, and the
/// state tensor leaves the query's `values` asked: one leaf of state t per StateInput value, in order,
/// each with its inclusion proof under the party's StepCommit.pre_root; and, for a NextState value,
/// every tensor leaf of state t+1, whose Merkle root must be the party's state_hash(t+1).
struct Records {
  uint32_t round = 0;
  std::vector<uint64_t> indices;
  std::vector<NodeRecord> records;
  std::vector<InclusionProof> proofs;
  std::vector<Digest> state_leaves{};
  std::vector<InclusionProof> state_proofs{};
  std::vector<Digest> post_state{};
};

/// provider → referee (and provider → client, provider → auditor): the chunks [chunk, chunk + count)
/// of the `chunks` of an opened tensor (kTensorChunkBytes each, tensor_hash.h), their bytes one after
/// the other, with `chunk_root` (the tensor's chunk tree root) and one range proof of the run in it
/// (merkle.h verify_range; docs/commitments.md, "Range proofs"). A sender puts up to kMaxFrameChunks
/// (codec.h) chunks in one frame. The receiver checks the tensor leaf H(Tensor ‖ dtype ‖ rank ‖ dims ‖ length
/// ‖ chunk_root) against the committed hash first.
struct TensorChunk {
  uint32_t round = 0;
  uint32_t value = 0;  ///< position of the tensor in the query's `values`
  std::vector<int64_t> shape;
  uint32_t chunk = 0;  ///< the run's first chunk
  uint32_t count = 1;  ///< the run's chunks, 1 to kMaxFrameChunks
  uint32_t chunks = 0;
  Digest chunk_root{};
  std::vector<uint8_t> bytes;
  std::vector<Digest> proof;  ///< MerkleTree::prove_range(chunk, count) of the chunk tree
};

/// provider → referee: data-set samples with inclusion proofs against dataset_root. Each sample's
/// input is float32 [features]; its label one float32 class id, or label_width float32 values for a
/// label sequence (DisputeOpen.label_width).
struct Samples {
  uint32_t round = 0;
  std::vector<uint64_t> indices;
  std::vector<std::vector<float>> inputs;
  std::vector<std::vector<float>> labels;
  std::vector<InclusionProof> proofs;
};

/// Why a dispute ended the way it did (docs/protocol.md, "Verdict").
enum class VerdictReason : uint8_t {
  WrongOutput = 1,        ///< re-execution of the located node gave other outputs
  InconsistentInput = 2,  ///< the located node's inputs or definition do not follow the agreed graph
  BadProof = 3,           ///< an opening did not match the party's own commitment
  Timeout = 4,            ///< no valid answer before the deadline
  // 5 is retired (it was `malformed`, never produced: a malformed message is refused without effect,
  // so its sender can only run out its clock) and is refused on the wire (codec_stream.h).
  Equivocation = 6,       ///< two different signed answers to one question
  WrongInitialState = 7,  ///< the trajectory does not start from the job's initial state
  WrongPostState = 8,     ///< state_hash(t+1) is not made of the step's own node outputs
  RefereeFault = 9,       ///< undecided: the referee failed to re-execute the located node (no one
                          ///< is convicted; winners and losers are both empty)
  BadRoundingLog = 10,    ///< rounding-log job: a decision of the party's log of the located node is
                          ///< not allowed for the referee's float64 value (ops/rounding_log.h)
  BothValid = 11,         ///< rounding-log job, undecided: both parties' logs are allowed and each
                          ///< replays to its own outputs (no one convicted; winners and losers empty)
};

/// True for the reasons that end a dispute undecided, with neither winners nor losers: RefereeFault
/// and BothValid.
inline bool is_undecided(VerdictReason reason) {
  return reason == VerdictReason::RefereeFault || reason == VerdictReason::BothValid;
}

/// The reason's wire-independent name ("wrong_output", …), for logs, files and JSON.
const char* reason_name(VerdictReason reason);

/// referee → everyone: the signed outcome. `winners`/`losers` index into the dispute's two claims
/// (0 or 1); both in `losers` means no valid claim; neither (reason RefereeFault or BothValid) means
/// undecided.
/// The verdict carries the whole opening, so anyone can check offline what was disputed:
/// dispute_id = dispute_id(opening), and the job_id follows from opening's job and data set.
struct Verdict {
  Digest job_id{};
  Digest dispute_id{};
  DisputeOpen opening;  ///< the disputed opening (job, data set, both signed Claim envelopes)
  std::vector<uint8_t> winners;
  std::vector<uint8_t> losers;
  VerdictReason reason = VerdictReason::WrongOutput;
  Level level = Level::Checkpoints;  ///< the level at which it ended
  uint64_t step = 0;                 ///< the located step t (when level ≥ Steps)
  uint64_t node = 0;                 ///< the located node index (when level = Nodes)
  uint8_t op = 0;                    ///< its OpKind
  uint32_t rounds = 0;               ///< questions asked
  std::string detail;                ///< one human-readable line
  /// The time left on each party's clock when the dispute ended (docs/protocol.md, "Clocks"): a
  /// party loses on time only with its clock at zero. Exactly two; on the wire u64 milliseconds.
  std::vector<std::chrono::milliseconds> clocks{std::chrono::milliseconds{0}, std::chrono::milliseconds{0}};
};

/// client → referee, before any provider trains (docs/protocol.md, "Checking the referee"): the
/// referee is to prove that it holds the key the client pinned, and to say which of the providers'
/// endpoints it would refuse to connect to. The envelope's context is `nonce`, fresh random bytes, so
/// the signed answer cannot be an old one replayed.
struct RefereeCheck {
  Digest nonce{};
  std::vector<std::string> endpoints;  ///< provider URLs, at most kMaxCheckedEndpoints
};

/// referee → client: the answer to a RefereeCheck, signed by the referee's key under the check's
/// nonce as context. `refusals[i]` is why the referee would refuse an opening naming `endpoints[i]`
/// (its address policy, nodes/admission.h provider_endpoints), or "" when it would connect to it.
struct RefereeAnswer {
  Digest nonce{};
  std::vector<std::string> refusals;  ///< one per endpoint of the check, in order
};

/// Most provider endpoints one RefereeCheck may name.
inline constexpr size_t kMaxCheckedEndpoints = 64;
/// Longest RefereeAnswer refusal (bytes).
inline constexpr size_t kMaxRefusalBytes = 2048;

/// client → provider, after a claim stood (docs/protocol.md, "Delivery"): send the final state of
/// your claim for job `job_id` whose trajectory root is `trajectory_root`. The provider answers with a
/// StateHeader and then every tensor of the state as TensorChunk messages (round 0, `value` the
/// tensor's index in the state layout, chunks 0 to n − 1, tensors in layout order), or with an
/// ErrorMessage. Names a job, never a path: only a job the provider holds a claim for is served.
struct StateRequest {
  Digest job_id{};
  Digest trajectory_root{};
};

/// provider → client: the final state's commitment, proven against the claim's trajectory root.
/// `state_hash` is the last leaf (index `checkpoints − 1` of a tree of `checkpoints`, the count of
/// checkpoint_steps(steps, stride)) of the trajectory tree whose root is `trajectory_root`, and the
/// Merkle root over `tensors`, the tensor leaves of the state in layout order. Each TensorChunk that
/// follows is checked against its tensor leaf (the shape from the job, the chunk's inclusion proof
/// under its chunk root) before a byte of it is kept.
struct StateHeader {
  Digest job_id{};
  Digest trajectory_root{};
  uint64_t step = 0;  ///< the state's step (the job's T)
  Digest state_hash{};
  InclusionProof in_trajectory;  ///< state_hash is the last leaf of the trajectory tree
  std::vector<Digest> tensors;   ///< tensor leaves, layout order
};

/// auditor → trainer, in a rounding-log job with roles (docs/protocol.md, "Rounding-log jobs"): send
/// the rounding logs of step `step` of job `job_id`, which the trainer trained (the envelope's context
/// is the job id). Answered with a LogHeader and then each node's log as TensorChunk messages (round
/// 0, `value` the node's index, shape [decisions], DType::Trits chunks), in node order.
struct LogRequest {
  Digest job_id{};
  uint64_t step = 0;
};

/// trainer → auditor: the trainer's commitment to the logs of one step, signed by it: `leaves[n]` is
/// the log leaf of node n (the last output hash of its node record, tensor_leaf(DType::Trits, [count],
/// packed)). Each TensorChunk that follows is checked against its node's leaf (the count from the
/// job's step graph, the chunk's inclusion proof under its chunk root) before a byte of it is kept.
struct LogHeader {
  Digest job_id{};
  uint64_t step = 0;
  std::vector<Digest> leaves;  ///< one per node of the step graph, in node order
};

/// auditor → referee, in a job with roles, answering QueryKind::LogEvidence: `header` is the LogHeader
/// envelope the trainer signed for the located step when the auditor fetched its logs, as received
/// (empty: the auditor has none). If it is a valid LogHeader of that step signed by the trainer's claim
/// key whose leaf for the located node is not the trainer's record's, the trainer signed two logs of
/// one node: it loses with Equivocation (docs/protocol.md, "Rounding-log jobs"). Anything else proves
/// nothing and costs the auditor nothing.
struct LogEvidence {
  uint32_t round = 0;
  std::vector<uint8_t> header;  ///< a signed LogHeader envelope, at most kMaxMessageBytes
};

/// Anyone → anyone: a refusal. `code` is a WebSocket-style close code (docs/protocol.md).
struct ErrorMessage {
  uint16_t code = 0;
  std::string reason;
};

}  // namespace tribunal
