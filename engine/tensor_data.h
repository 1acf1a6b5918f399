// The user's own classification data (a job's data.dataset = "tensors"): .npy arrays in a registered
// directory, bound by the same dataset_root as Fashion-MNIST (engine/dataset.h).
//   DIR/features.npy       '<f4' [N, F], [N, H, W] or [N, C, H, W] (C order): one row per sample
//   DIR/labels.npy         '<i8', '<i4' or '|u1' [N]: class ids 0..classes−1
//   DIR/test-features.npy, DIR/test-labels.npy: the same for the test split (optional; without them the
//   test split is empty and no test accuracy is reported)
// .npy format: engine/npy.h.
#pragma once

#include <cstdint>
#include <filesystem>

#include "engine/dataset.h"

namespace tribunal {

/// Loads a split of the tensors data set in `dir` with `classes` classes. Checks, naming the file and
/// the first bad sample: features '<f4' of rank 2 to 4 with N ≥ 1 (train) rows, every feature finite;
/// labels an accepted integer type of shape [N] with the features' N, each in 0..classes−1; a truncated
/// or otherwise malformed file (read_npy_header). The inputs are [N, prod(shape[1:])]; rows × cols are
/// H × W for image features and 1 × F for [N, F]. Computes `root` on `pool`. Throws EngineError.
Dataset load_tensor_data(const std::filesystem::path& dir, int64_t classes, Split split, ThreadPool& pool);

/// The training set's {samples, features, classes, 0} from the .npy headers alone (no element read).
/// Throws EngineError like load_tensor_data for a missing or malformed header.
DataShape tensor_data_shape(const std::filesystem::path& dir, int64_t classes);

}  // namespace tribunal
