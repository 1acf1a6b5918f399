// Fashion-MNIST loading (IDX files inside gzip) and the data-set commitment `dataset_root`.
// Source: Xiao, Rasul, Vollgraf 2017, "Fashion-MNIST" (arXiv:1708.07747); IDX format from
// LeCun et al., http://yann.lecun.com/exdb/mnist/ ("FILE FORMATS FOR THE MNIST DATABASE").
// Commitment: DESIGN.md §5 ("Data").
#pragma once

#include <cstdint>
#include <filesystem>

#include "ops/tensor.h"
#include "ops/thread_pool.h"
#include "protocol/hash.h"

namespace tribunal {

/// Which half of the data set: 60000 training or 10000 test samples.
enum class Split { Train, Test };

/// A labelled image data set held in memory.
struct Dataset {
  Tensor inputs;        ///< [N, rows*cols] float32, pixel p in 0..255 stored as float(p) / 255.0f
  Tensor labels;        ///< [N] float32 holding class ids 0..classes-1
  int64_t rows = 0;     ///< image height in pixels
  int64_t cols = 0;     ///< image width in pixels
  int64_t classes = 0;  ///< number of classes (10 for Fashion-MNIST)
  Digest root{};        ///< dataset_root (see below), computed by the loader
};

/// Loads Fashion-MNIST from `dir`, as shipped by Debian's dataset-fashion-mnist
/// (/usr/share/datasets/fashion-mnist): {train,t10k}-images-idx3-ubyte.gz and
/// {train,t10k}-labels-idx1-ubyte.gz. Validates strictly: gzip integrity (truncation, CRC, non-gzip
/// input), IDX magic 0x00000803 / 0x00000801, equal image and label counts, labels < 10, payload
/// length exact (no missing and no trailing bytes). Computes `root`, hashing on `pool` when given.
/// Throws EngineError("<file path>: <what is wrong>") on any failure.
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split);
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split, ThreadPool& pool);

/// The value committed for sample i (0 ≤ i < N):
///   H(Sample ‖ tensor_leaf(F32, [rows*cols], inputs row i) ‖ tensor_leaf(F32, [], labels[i])).
/// A party proves one sample by an inclusion proof of this value against `root`.
Digest sample_hash(const Dataset& data, int64_t i);

/// dataset_root: RFC 6962 Merkle root over sample_hash(data, i) for i = 0..N-1 in order
/// (DESIGN.md §5). The result does not depend on the pool's thread count.
Digest dataset_root(const Dataset& data);
Digest dataset_root(const Dataset& data, ThreadPool& pool);

}  // namespace tribunal
