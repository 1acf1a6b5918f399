// Data sets: Fashion-MNIST loading (IDX files inside gzip), the dispatch to the job's data set
// (Fashion-MNIST or text windows, engine/text_data.h) and the data-set commitment `dataset_root`.
// Source: Xiao, Rasul, Vollgraf 2017, "Fashion-MNIST" (arXiv:1708.07747); IDX format from
// LeCun et al., http://yann.lecun.com/exdb/mnist/ ("FILE FORMATS FOR THE MNIST DATABASE").
// Commitment: docs/architecture.md "State and commitments" (data).
#pragma once

#include <cstdint>
#include <filesystem>

#include "engine/job.h"
#include "engine/step.h"
#include "ops/tensor.h"
#include "ops/thread_pool.h"
#include "protocol/hash.h"

namespace tribunal {

/// Which part of the data set: Fashion-MNIST's 60000 training or 10000 test samples; a text's
/// training windows or its held-out (validation) windows.
enum class Split { Train, Test };

/// A data set held in memory: one row of `inputs` and one row of `labels` per sample.
struct Dataset {
  Tensor inputs;        ///< [N, F] float32. Fashion-MNIST: F = rows·cols pixels, p ∈ 0..255 stored as
                        ///< float(p) / 255.0f. Text: F = T byte values 0..255 as floats
  Tensor labels;        ///< [N] class ids 0..classes−1 (Fashion-MNIST), or [N, L] label sequences
                        ///< (text: the next byte of each input position, L = T), as float32
  int64_t rows = 0;     ///< image height in pixels (text: 1)
  int64_t cols = 0;     ///< image width in pixels (text: T)
  int64_t classes = 0;  ///< number of classes (10 for Fashion-MNIST; 256 byte values for text)
  double unigram_entropy = -1;  ///< text: entropy in nats of the byte distribution of the training
                                ///< targets (a unigram model's loss); −1 otherwise
  Digest root{};                ///< dataset_root (see below), computed by the loader

  int64_t samples() const { return inputs.shape()[0]; }
  /// 0 for class-id labels ([N]), L for label sequences ([N, L]).
  int64_t label_width() const { return labels.shape().rank() == 2 ? labels.shape()[1] : 0; }
};

/// Loads Fashion-MNIST from `dir`, as shipped by Debian's dataset-fashion-mnist
/// (/usr/share/datasets/fashion-mnist): {train,t10k}-images-idx3-ubyte.gz and
/// {train,t10k}-labels-idx1-ubyte.gz. Validates strictly: gzip integrity (truncation, CRC, non-gzip
/// input), IDX magic 0x00000803 / 0x00000801, equal image and label counts, labels < 10, payload
/// length exact (no missing and no trailing bytes). Computes `root`, hashing on `pool` when given.
/// Throws EngineError("<file path>: <what is wrong>") on any failure.
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split);
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split, ThreadPool& pool);

/// The value committed for sample i (0 ≤ i < N): sample_leaf of input row i and label row i, i.e.
///   H(Sample ‖ tensor_leaf(F32, [F], inputs row i) ‖ tensor_leaf(F32, labels.shape()[1:], label row i))
/// (a scalar label for class ids, [L] for sequences). A party proves one sample by an inclusion
/// proof of this value against `root`. Throws EngineError for i out of range.
Digest sample_hash(const Dataset& data, int64_t i);

/// dataset_root: RFC 6962 Merkle root over sample_hash(data, i) for i = 0..N-1 in order
/// (docs/architecture.md "State and commitments"). The result does not depend on the pool's thread count.
Digest dataset_root(const Dataset& data);
Digest dataset_root(const Dataset& data, ThreadPool& pool);

/// Loads the split of the job's data set from job.data_path (set by locate_data): Fashion-MNIST
/// (load_fashion_mnist), the text windows of the corpus with the job's context and validation
/// fraction (engine/text_data.h), or the user's .npy arrays with data.classes (engine/tensor_data.h). Throws
/// EngineError naming the file on any failure, or the job when its data set was never located.
Dataset load_dataset(const JobSpec& job, Split split, ThreadPool& pool);

/// check_job_against_data on the data set's sizes, and also its label layout (class ids for mlp and
/// cnn, sequences of context labels for gpt) and, for a cnn, the image height and width. Throws
/// EngineError.
void check_job_against_dataset(const JobSpec& job, const Dataset& data);

/// The sizes step graphs are built from: {samples, features, classes, label_width}.
DataShape data_shape_of(const Dataset& data);

/// job_id(job, data.root, data_shape_of(data)).
Digest job_id(const JobSpec& job, const Dataset& data);

/// The training set's shape as the job implies it, without loading or hashing the data: Fashion-MNIST
/// from the IDX headers of the training files (16 bytes of each gzip stream), text from the sizes of
/// the corpus files, tensors from the .npy headers. For tools that build step graphs without training (demo,
/// scenario scripts). Throws EngineError like the loaders when the files are missing or malformed.
DataShape expected_data_shape(const JobSpec& job);

}  // namespace tribunal
