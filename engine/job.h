// The training job: what a client hands to every provider (docs/commitments.md "Job id and dispute id").
// Parsed from TOML; its identity `job_id` is the hash of a canonical binary encoding, so two parties agree on
// a job exactly when they agree on every field that influences the trajectory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/data_registry.h"
#include "engine/numerics.h"
#include "onnx/onnx_model.h"
#include "protocol/hash.h"
#include "protocol/terms.h"

namespace tribunal {

/// Version of the RepOps numerics contract (docs/numerics.md); part of every job_id.
inline constexpr uint32_t kRepOpsContractVersion = 3;  // 2: swap-or-not batch sampler; 3: BLAKE3 commitments

/// Largest step count: the step counter is a float32 state tensor, exact up to 2^24.
inline constexpr int64_t kMaxSteps = int64_t{1} << 24;

/// The model families (engine/model.h describes each one's parameters and forward graph).
/// Onnx: a user's model, imported from an ONNX file (onnx/lower.h, docs/onnx.md).
enum class ModelKind : uint8_t { Mlp = 1, Gpt = 2, Cnn = 3, Onnx = 4 };
enum class OptimizerKind : uint8_t { Sgd = 1, AdamW = 2 };
/// How the learning rate changes over the steps (engine/schedule.h).
enum class LrSchedule : uint8_t { Constant = 1, Cosine = 2 };
/// Which parameters get weight decay: every one, or only those of rank ≥ 2 (Linear weights, conv
/// kernels, embeddings; not biases or LayerNorm gains/shifts — the nanoGPT convention).
enum class DecayScope : uint8_t { All = 1, Matrices = 2 };
/// What the step graph's loss compares the model output with (engine/loss.h): class ids or label
/// sequences by softmax cross-entropy, or float targets by mean squared error.
enum class LossKind : uint8_t { CrossEntropy = 1, Mse = 2 };

/// The model. `kind` selects which fields apply:
///  - mlp: Linear(widths[i] → widths[i+1]) with ReLU between layers;
///  - gpt: a decoder-only pre-LN transformer over bytes (Radford et al. 2019, GPT-2; Karpathy's
///    nanoGPT without weight tying): vocab, context, layers, heads, d_model, dropout;
///  - cnn: per entry of `channels` a block Conv2d(kernel×kernel, stride 1, "same" padding kernel/2) →
///    ReLU → MaxPool2d(2×2), then a Linear to the classes. The image shape and the class count are
///    the data set's, filled in by parse_job from [data]: Fashion-MNIST 1×28×28 and 10; tensors
///    data.image and data.classes (checked against the files by the loader).
struct ModelSpec {
  ModelKind kind = ModelKind::Mlp;
  std::vector<int64_t> widths{784, 256, 10};  ///< mlp only (empty for the other kinds)
  // gpt
  int64_t vocab = 256;   ///< token ids 0..vocab−1 (256: bytes)
  int64_t context = 0;   ///< T, tokens per window
  int64_t layers = 0;    ///< transformer blocks
  int64_t heads = 0;     ///< attention heads H, d_model = H·E
  int64_t d_model = 0;   ///< D, the residual stream width
  float dropout = 0.0f;  ///< p ∈ [0, 1): after the embedding, the attention and the MLP projections
  // cnn
  std::vector<int64_t> channels;  ///< output channels of each conv block
  int64_t kernel = 0;             ///< odd kernel size k (padding k/2 keeps the image size)
  int64_t image_channels = 0, image_height = 0, image_width = 0;  ///< from the data set
  int64_t classes = 0;                                            ///< from the data set
  /// [model] init: the registered weights (DataRegistry::add_weights) the parameters of state 0 come
  /// from instead of init_param; empty: init_param. The name is not in job_id; the file's hash is.
  std::string init;
  // onnx (docs/onnx.md)
  std::string file;   ///< [model] file: the registered ONNX model file (DataRegistry::add_model); its hash is
                      ///< in job_id
  std::string input;  ///< [model] input: the graph input fed with the data ("" = the model's only input)
  std::string
      output;  ///< [model] output: the graph output holding the logits the loss reads ("" = the only output)
  /// [model] loss: "cross_entropy" (default) or "mse" (mlp and onnx on data.dataset = "tensors" with
  /// data.targets; the model output is [B, K] predictions of the K targets).
  LossKind loss = LossKind::CrossEntropy;
  /// The imported model: set by locate_model_files from the node's registry, never parsed from a job.
  std::shared_ptr<const OnnxModel> onnx;
};

struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::AdamW;
  float lr = 1e-3f;       ///< the peak learning rate (engine/schedule.h)
  float momentum = 0.9f;  ///< SGD only
  float beta1 = 0.9f;     ///< AdamW only
  float beta2 = 0.999f;   ///< AdamW only
  float eps = 1e-8f;      ///< AdamW only
  float weight_decay = 0.0f;
  LrSchedule schedule = LrSchedule::Constant;
  int64_t warmup_steps = 0;  ///< cosine only: linear warmup over steps 0..warmup_steps−1
  float min_lr = 0.0f;       ///< cosine only: the rate the cosine decays to
  float clip_norm = 0.0f;    ///< 0: off; else the gradients' global L2 norm is clipped to it
                             ///< (torch.nn.utils.clip_grad_norm_ semantics, before the optimizer)
  DecayScope decay = DecayScope::All;
};

/// The training set's shape: what step graphs are built from and what a job_id commits to besides the
/// set's root.
struct DataShape {
  int64_t samples = 0;
  int64_t features = 0;
  int64_t classes = 0;
  /// 0: one class id per sample (labels [N]); L: a label sequence (labels [N, L]), or for an mse job
  /// (model.loss) K float targets per sample (labels [N, K], classes = K too)
  int64_t label_width = 0;
  bool operator==(const DataShape&) const = default;
};

struct JobSpec {
  ModelSpec model;
  std::string dataset = "fashion-mnist";  ///< the data set's kind: "fashion-mnist", "text" or "tensors"
  /// The data set's name in each node's DataRegistry ("fashion-mnist", "fortunes", or one the
  /// operator registered); not in job_id (the data set's root and shape are).
  std::string data_name = "fashion-mnist";
  /// Where this node keeps data_name: set by locate_data from the node's own registry, never parsed
  /// from a job. Empty until then (load_dataset refuses to load).
  std::filesystem::path data_path;
  /// Where this node keeps model.init and BLAKE3(File tag ‖ the file's bytes): set by locate_data
  /// from the node's own registry when the job has model.init, never parsed from a job. The hash is in
  /// job_id, so every party of the job holds the same bytes.
  std::filesystem::path init_path;
  std::optional<Digest> init_hash;
  /// The same for an onnx job's model.file (set by locate_model_files, which also imports it).
  std::filesystem::path model_path;
  std::optional<Digest> model_hash;
  double validation = 0.1;   ///< text: the fraction of windows held out (the last ones), in [0, 1)
  int64_t data_classes = 0;  ///< tensors: data.classes, the class count labels must be below
  int64_t data_targets = 0;  ///< tensors with model.loss = "mse": data.targets, K float targets per sample
  uint64_t seed = 0;
  int64_t steps = 0;       ///< T, the number of optimizer steps
  int64_t batch_size = 0;  ///< B
  int64_t stride = 0;      ///< s: checkpoints at steps 0, s, 2s, …, T
  /// S: the batch is split into S shards of B/S rows; every reduction over the batch is one partial
  /// per shard combined by a fixed binary tree (docs/numerics.md "Sharded batch reductions"). 1: the
  /// unsharded step graph. Data-parallel training runs on any number of ranks dividing S.
  int64_t shards = 1;
  OptimizerSpec optimizer;
  NumericsSpec numerics;       ///< [numerics]: RepOps (default) or rounding-log mode, with its τ per op kind
  DisputeTerms dispute;        ///< [dispute]: what each question of a dispute about this job may take
  std::string source = "job";  ///< where the job came from (its file), for error messages; not part of job_id
};

/// Parses a job from TOML text. `source` names the file in error messages. Unknown keys, wrong
/// types and out-of-range values throw EngineError("<source>:<line>:<col>: <what>"). The job names
/// its data set and never a path: `data.dir` and `data.path` are refused, so a job received from a
/// peer cannot point a node at a file (locate_data resolves the name). Tables and keys:
///   [model]     init: registered weights to start from (optional, any kind; engine/init_weights.h);
///               loss = "cross_entropy" (default) | "mse" (mlp and onnx on data.dataset = "tensors");
///               kind = "mlp": widths | "gpt": vocab (256), context, layers, heads, d_model (a
///               multiple of heads), dropout (0) | "cnn": channels (one block per entry), kernel (odd)
///               | "onnx": file (a registered ONNX model file, docs/onnx.md), input and output (graph
///               value names; default: the only one); its initializers are state 0, so no init
///   [data]      dataset = "fashion-mnist" | "text" | "tensors" (the kind; default text for gpt,
///               fashion-mnist otherwise); name: the registered data set (default "fashion-mnist" for
///               that kind, "fortunes" for text, required for tensors; 1–64 of [a-z0-9._-]); text:
///               validation (0.1); tensors (mlp, cnn): classes (2..65536), and for a cnn image = [C, H, W];
///               tensors with model.loss = "mse" (mlp, onnx): targets (1..65536, K float targets per
///               sample) instead of classes
///   [train]     seed, steps, batch_size, stride, shards (1; must divide batch_size)
///   [optimizer] kind = "adamw": beta1, beta2, eps | "sgd": momentum; and lr, weight_decay,
///               schedule = "constant" | "cosine" (then warmup_steps ≤ steps, min_lr ≤ lr),
///               clip_norm (0 = off), decay = "all" | "matrices"
///   [numerics]  mode = "repops" (default) | "rounding-log": tau, one number for every op kind or a
///               table of op names with an optional `default` (engine/numerics.h), each in [0, 1/4]
///   [dispute]   base_seconds (10), step_seconds (30), min_bytes_per_second (262144): the time terms
///               of a dispute about the job (protocol/terms.h; docs/protocol.md, "Clocks")
/// Each key is refused where its kind does not use it.
JobSpec parse_job(std::string_view toml_text, const std::string& source);

/// Sets job.data_path to where `registry` keeps job.data_name, then locate_model_files. Throws
/// EngineError when a name is not registered (naming it) or a file cannot be read or imported.
void locate_data(JobSpec& job, const DataRegistry& registry);

/// For a job with model.init: sets job.init_path to where `registry` keeps the weights and
/// job.init_hash to the hash of the file's bytes (init_weights_hash). For an onnx job: sets
/// job.model_path and job.model_hash the same way for model.file, and job.model.onnx to the imported
/// model (onnx/lower.h import_onnx, under OnnxLimits; the process keeps the last two models it
/// imported by the hash of their bytes and reuses them for the same bytes). Does nothing for other
/// jobs, nor for a file already located. An onnx job's costs derive from its imported graph, so a node
/// locates its model file before it costs the job. For a node that needs no data set (the referee). Throws
/// EngineError naming what is missing or refused.
void locate_model_files(JobSpec& job, const DataRegistry& registry);

/// BLAKE3(File tag 0x17 ‖ the file's bytes). Throws EngineError naming the file when it cannot be read.
Digest init_weights_hash(const std::filesystem::path& path);

/// Reads and parses a job file and locates its data set in `registry`; a missing or unreadable file
/// throws EngineError.
JobSpec load_job(const std::filesystem::path& path, const DataRegistry& registry = DataRegistry::debian());

/// Checks the job against the data set's shape (samples, input features per sample, classes): mlp:
/// the first width equals the features and the last the classes; cnn: the features are the image's
/// C·H·W and the classes the model's; gpt: the features (tokens per window) equal the context and
/// the classes (symbols) the vocabulary. The batch must fit in the samples. Throws EngineError.
void check_job_against_data(const JobSpec& job, int64_t samples, int64_t features, int64_t classes);

/// The label sequence length the job's step graph reads (DataShape::label_width): model.context for
/// next-token prediction on data.dataset = "text" (a gpt, or an onnx model fed token ids), data.targets
/// (K) for the float targets of an mse job, 0 for one class id per sample.
int64_t label_width(const JobSpec& job);

/// Canonical binary encoding of the job (fixed field order, integers u64 LE, floats as f32 bits,
/// strings length-prefixed), including the contract version and the data set's Merkle root and shape:
///   version ‖ model kind u8 ‖ #widths ‖ widths… ‖ dataset ‖ dataset_root ‖ samples ‖ features ‖
///   classes ‖ label_width ‖ seed ‖ steps ‖ batch ‖ stride ‖ optimizer kind u8 ‖ lr ‖
///   (momentum | β1 ‖ β2 ‖ ε) ‖ weight_decay
/// and, only when the job uses anything beyond that (a gpt/cnn model, text data, a cosine schedule,
/// clipping, decay "matrices"), the extension
///   0x01 ‖ gpt: vocab ‖ context ‖ layers ‖ heads ‖ d_model ‖ dropout f32 | cnn: #channels ‖
///   channels… ‖ kernel ‖ image C ‖ H ‖ W ‖ classes | onnx: model_hash (32 bytes) ‖ input ‖ output
///   (length-prefixed) | mlp: nothing ‖ text: validation f64 bits ‖
///   schedule u8 ‖ warmup_steps ‖ min_lr f32 ‖ clip_norm f32 ‖ decay u8.
/// (an MLP job on Fashion-MNIST with a constant rate, no clipping and decay "all" has no extension),
/// then, only when train.shards is not 1, 0x03 ‖ shards,
/// then, only when the [dispute] terms are not the defaults, 0x02 ‖ base ms ‖ step ms ‖ bytes per second,
/// then, only when the numerics mode is not RepOps, 0x04 ‖ mode u8 ‖ τ of every op kind in OpKind
/// order (f64 bits) ‖ (rounding-log mode: quantum bits),
/// then, only when the job has model.init, 0x05 ‖ init_hash (32 bytes),
/// then, only when model.loss is not "cross_entropy", 0x07 ‖ loss u8 (LossKind; an mse job's K is the
/// shape's classes and label_width). Written with protocol's
/// codec::ByteWriter. Throws EngineError for a job with model.init or model.file whose file was never
/// located.
/// The shape is in the id so that no one but the providers who signed the job_id can state it: the
/// referee derives the batches from the sample count (docs/protocol.md, "Threat model").
std::vector<uint8_t> canonical_job_encoding(const JobSpec& job, const Digest& dataset_root,
                                            const DataShape& shape);

/// job_id = BLAKE3(Job tag ‖ canonical_job_encoding).
Digest job_id(const JobSpec& job, const Digest& dataset_root, const DataShape& shape);

}  // namespace tribunal
