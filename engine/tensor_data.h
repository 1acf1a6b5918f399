// The user's own data (a job's data.dataset = "tensors"): arrays in a registered directory, bound by the
// same dataset_root as Fashion-MNIST (engine/dataset.h). Two forms:
//   .npy (engine/npy.h):
//     DIR/features.npy   '<f4' [N, F], [N, H, W] or [N, C, H, W] (C order): one row per sample
//     DIR/labels.npy     '<i8', '<i4' or '|u1' [N]: class ids 0..classes−1
//     DIR/test-features.npy, DIR/test-labels.npy: the same for the test split
//   safetensors (engine/safetensors.h, read_safetensors_data):
//     DIR/data.safetensors  exactly two tensors: "features" F32 of the shapes above and "labels" I64,
//                           I32 or U8 [N]
//     DIR/test.safetensors  the same for the test split
// A regression job (model.loss = "mse", data.targets = K) reads float targets in place of the labels:
// DIR/targets.npy '<f4' [N, K] (and DIR/test-targets.npy), or a "targets" F32 [N, K] tensor in place of
// "labels" in the safetensors files. Its samples commit to their K targets as a label sequence does.
// The test split is optional: without it the split is empty and no test accuracy is reported. A
// directory holding files of both forms is refused (ambiguous). The same arrays give the same
// dataset_root, and so the same job id, in either form (docs/commitments.md).
#pragma once

#include <cstdint>
#include <filesystem>

#include "engine/dataset.h"

namespace tribunal {

/// Loads a split of the tensors data set in `dir` with `classes` classes. Checks, naming the file (and
/// for safetensors the tensor) and the first bad sample: one form only; features float32 of rank 2 to 4
/// with N ≥ 1 (train) rows, every feature finite; labels an accepted integer type of shape [N] with the
/// features' N, each in 0..classes−1; a safetensors file holding exactly "features" and "labels"; a
/// truncated or otherwise malformed file (read_npy_header, read_safetensors_data). The inputs are
/// [N, prod(shape[1:])]; rows × cols are H × W for image features and 1 × F for [N, F]. Computes `root`
/// on `pool`. Throws EngineError.
Dataset load_tensor_data(const std::filesystem::path& dir, int64_t classes, Split split, ThreadPool& pool);

/// The training set's {samples, features, classes, 0} from the .npy or safetensors headers alone (no
/// element read).
/// Throws EngineError like load_tensor_data for a missing or malformed header.
DataShape tensor_data_shape(const std::filesystem::path& dir, int64_t classes);

/// Loads a split of an mse job's tensors data set (`targets` = K = data.targets): the features as
/// load_tensor_data reads them, and the targets float32 [N, K] (targets.npy or the "targets" tensor),
/// every target finite. labels = [N, K] as they are, classes = K (the model output's width). Throws
/// EngineError naming the file (and tensor) and the first bad sample, as load_tensor_data does.
Dataset load_tensor_targets(const std::filesystem::path& dir, int64_t targets, Split split, ThreadPool& pool);

/// The training set's {samples, features, K, K} of an mse job from the headers alone. Throws
/// EngineError like load_tensor_targets.
DataShape tensor_targets_shape(const std::filesystem::path& dir, int64_t targets);

}  // namespace tribunal
