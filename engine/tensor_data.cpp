// The tensors data set: .npy or safetensors features and labels. See tensor_data.h.
#include "engine/tensor_data.h"

#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"
#include "engine/npy.h"
#include "engine/safetensors.h"

namespace tribunal {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", where, what));
}

// How a form spells its element types in messages.
struct Form {
  const char* float32;   // the accepted features type
  const char* integers;  // the accepted label types
};
constexpr Form kNpy{"'<f4'", "'<i8', '<i4' or '|u1'"};
constexpr Form kSafetensors{"F32", "I64, I32 or U8"};

// One array of the set (features or labels) as either form holds it. The accepted types are those of
// both readers: float32, or int64, int32 or uint8 (told apart by itemsize among the integers).
struct Array {
  std::string where;  // prefix of its errors: "<file>" or "<file>: tensor \"labels\""
  std::string ref;    // how the other array's errors name it: "<file>" or "tensor \"features\""
  std::string type;   // its element type as the form spells it: "'<i8'" or "I64"
  bool is_float = false;
  int64_t itemsize = 0;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // empty when only the header was read
};

struct Pair {
  Form form;
  Array features, labels;  // labels: the class ids, or an mse job's float targets
};

// What the samples are labelled with: class ids ("labels") or an mse job's float targets ("targets").
enum class Labels { ClassIds, Targets };

const char* labels_name(Labels kind) {
  return kind == Labels::Targets ? "targets" : "labels";
}

const char* kNpyNames[] = {"features.npy",      "labels.npy",      "targets.npy",
                           "test-features.npy", "test-labels.npy", "test-targets.npy"};
const char* kSafetensorsNames[] = {"data.safetensors", "test.safetensors"};

// True when `dir` holds the safetensors form, false for .npy (also when it holds neither: the .npy
// reader then names the missing file). Both forms in one directory are ambiguous and refused.
bool safetensors_form(const fs::path& dir) {
  const auto first_of = [&](const auto& names) -> const char* {
    for (const char* name : names)
      if (fs::exists(dir / name)) return name;
    return nullptr;
  };
  const char* npy = first_of(kNpyNames);
  const char* st = first_of(kSafetensorsNames);
  if (npy != nullptr && st != nullptr)
    fail(dir.string(),
         fmt::format("holds both {} and {}: keep one form of the data set (.npy or .safetensors)", npy, st));
  return st != nullptr;
}

fs::path safetensors_file(const fs::path& dir, Split split) {
  return dir / (split == Split::Train ? "data.safetensors" : "test.safetensors");
}

struct NpyFiles {
  fs::path features, labels;
};

NpyFiles npy_files(const fs::path& dir, Split split, Labels kind) {
  const char* prefix = split == Split::Train ? "" : "test-";
  return {dir / fmt::format("{}features.npy", prefix),
          dir / fmt::format("{}{}.npy", prefix, labels_name(kind))};
}

Array npy_array(const fs::path& file, const NpyHeader& h, std::vector<uint8_t> bytes) {
  return {file.string(), file.string(),   fmt::format("'{}'", h.descr), h.descr == "<f4", h.itemsize(),
          h.shape,       std::move(bytes)};
}

Pair read_npy_pair(const fs::path& dir, Split split, Labels kind, bool with_elements) {
  const NpyFiles f = npy_files(dir, split, kind);
  const auto read = [&](const fs::path& file) {
    if (!with_elements) return npy_array(file, read_npy_header(file), {});
    NpyArray a = read_npy(file);
    return npy_array(file, a.header, std::move(a.bytes));
  };
  Array x = read(f.features);
  Array y = read(f.labels);
  return {kNpy, std::move(x), std::move(y)};
}

Array safetensors_array(const fs::path& file, const DataTensorInfo& t, std::vector<uint8_t> bytes) {
  const int64_t itemsize = t.dtype == "I64" ? 8 : t.dtype == "U8" ? 1 : 4;  // the reader's dtypes only
  return {fmt::format("{}: tensor \"{}\"", file.string(), t.name),
          fmt::format("tensor \"{}\"", t.name),
          t.dtype,
          t.dtype == "F32",
          itemsize,
          t.shape,
          std::move(bytes)};
}

Pair read_safetensors_pair(const fs::path& dir, Split split, Labels kind, bool with_elements) {
  const char* second = labels_name(kind);
  const fs::path file = safetensors_file(dir, split);
  std::vector<DataTensor> tensors;
  if (with_elements) {
    tensors = read_safetensors_data(file);
  } else {
    for (DataTensorInfo& t : read_safetensors_data_header(file)) tensors.push_back({std::move(t), {}});
  }
  const DataTensor* x = nullptr;
  const DataTensor* y = nullptr;
  for (const DataTensor& t : tensors) {
    if (t.info.name == "features") {
      x = &t;
    } else if (t.info.name == second) {
      y = &t;
    } else {
      fail(file.string(), fmt::format("unexpected tensor \"{}\" (a data file holds exactly \"features\" and "
                                      "\"{}\")",
                                      t.info.name, second));
    }
  }
  for (auto [t, name] : {std::pair{x, "features"}, {y, second}})
    if (t == nullptr)
      fail(file.string(),
           fmt::format("no tensor \"{}\" (a data file holds exactly \"features\" and \"{}\")", name, second));
  return {kSafetensors, safetensors_array(file, x->info, x->bytes),
          safetensors_array(file, y->info, y->bytes)};
}

Pair read_pair(const fs::path& dir, Split split, Labels kind, bool with_elements) {
  return safetensors_form(dir) ? read_safetensors_pair(dir, split, kind, with_elements)
                               : read_npy_pair(dir, split, kind, with_elements);
}

// Checks the two arrays' types and shapes against each other; `targets` > 0: the second array is an mse
// job's float targets [N, targets] (else class ids [N]).
void check_shapes(const Pair& p, bool need_samples, int64_t targets = 0) {
  const Array& x = p.features;
  const Array& y = p.labels;
  if (!x.is_float)
    fail(x.where, fmt::format("features must be float32 ({}), not {} (numpy: x.astype(np.float32))",
                              p.form.float32, x.type));
  if (x.shape.size() < 2 || x.shape.size() > 4)
    fail(x.where, fmt::format("features must be [N, F], [N, H, W] or [N, C, H, W], not shape ({})",
                              fmt::join(x.shape, ", ")));
  for (size_t d = 1; d < x.shape.size(); ++d)
    if (x.shape[d] == 0)
      fail(x.where, fmt::format("features of shape ({}) are empty", fmt::join(x.shape, ", ")));
  if (need_samples && x.shape[0] == 0) fail(x.where, "no samples (N = 0)");
  if (targets > 0) {
    if (!y.is_float)
      fail(y.where, fmt::format("targets must be float32 ({}), not {} (numpy: y.astype(np.float32))",
                                p.form.float32, y.type));
    if (y.shape.size() != 2 || y.shape[1] != targets)
      fail(y.where, fmt::format("targets must be [N, {}] (data.targets = {}), not shape ({})", targets,
                                targets, fmt::join(y.shape, ", ")));
    if (y.shape[0] != x.shape[0])
      fail(y.where, fmt::format("{} target rows but {} has {} samples", y.shape[0], x.ref, x.shape[0]));
    return;
  }
  if (y.is_float)
    fail(y.where,
         fmt::format("labels must be integers ({}), not float32 ({})", p.form.integers, p.form.float32));
  if (y.shape.size() != 1)
    fail(y.where, fmt::format("labels must be [N] class ids, not shape ({})", fmt::join(y.shape, ", ")));
  if (y.shape[0] != x.shape[0])
    fail(y.where, fmt::format("{} labels but {} has {} samples", y.shape[0], x.ref, x.shape[0]));
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool test_split_present(const fs::path& dir, Labels kind) {
  if (safetensors_form(dir)) return fs::exists(safetensors_file(dir, Split::Test));
  const NpyFiles f = npy_files(dir, Split::Test, kind);
  return fs::exists(f.features) || fs::exists(f.labels);
}

// Copies the features into data.inputs [n, features], reporting the first non-finite one.
void copy_features(Dataset& data, const Array& x, int64_t n, int64_t features) {
  std::memcpy(data.inputs.data(), x.bytes.data(), x.bytes.size());
  const float* in = data.inputs.data();
  for (int64_t k = 0; k < n * features; ++k)
    if (!std::isfinite(in[k]))
      fail(x.where, fmt::format("sample {}: feature {} is {} (features must be finite)", k / features,
                                k % features, in[k]));
}

}  // namespace

Dataset load_tensor_data(const fs::path& dir, int64_t classes, Split split, ThreadPool& pool) {
  Dataset data;
  data.classes = classes;
  if (split == Split::Test && !test_split_present(dir, Labels::ClassIds)) {
    data.inputs = Tensor(Shape{0, 1});  // no test split: nothing to evaluate
    data.labels = Tensor(Shape{0});
    data.rows = data.cols = 1;
    data.root = dataset_root(data, pool);
    return data;
  }
  const Pair p = read_pair(dir, split, Labels::ClassIds, true);
  check_shapes(p, split == Split::Train);
  const Array& x = p.features;
  const Array& y = p.labels;
  const std::vector<int64_t>& s = x.shape;
  const int64_t n = s[0];
  const int64_t features = numel(s) / std::max<int64_t>(n, 1);
  data.rows = s.size() == 2 ? 1 : s[s.size() - 2];
  data.cols = s.back();
  data.inputs = Tensor(Shape{n, n == 0 ? 1 : features});
  data.labels = Tensor(Shape{n});

  // Labels: the first out of range is reported.
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* b = y.bytes.data() + i * y.itemsize;
    int64_t v = 0;
    if (y.itemsize == 8) {
      std::memcpy(&v, b, 8);
    } else if (y.itemsize == 4) {
      int32_t w = 0;
      std::memcpy(&w, b, 4);
      v = w;
    } else {
      v = *b;
    }
    if (v < 0 || v >= classes)
      fail(y.where, fmt::format("sample {}: label {} is not a class id 0..{} (data.classes = {})", i, v,
                                classes - 1, classes));
    data.labels[i] = static_cast<float>(v);
  }
  copy_features(data, x, n, features);
  data.root = dataset_root(data, pool);
  return data;
}

DataShape tensor_data_shape(const fs::path& dir, int64_t classes) {
  const Pair p = read_pair(dir, Split::Train, Labels::ClassIds, false);
  check_shapes(p, true);
  const std::vector<int64_t>& s = p.features.shape;
  return {s[0], numel(s) / s[0], classes, 0};
}

Dataset load_tensor_targets(const fs::path& dir, int64_t targets, Split split, ThreadPool& pool) {
  Dataset data;
  data.classes = targets;
  if (split == Split::Test && !test_split_present(dir, Labels::Targets)) {
    data.inputs = Tensor(Shape{0, 1});  // no test split: nothing to evaluate
    data.labels = Tensor(Shape{0, targets});
    data.rows = data.cols = 1;
    data.root = dataset_root(data, pool);
    return data;
  }
  const Pair p = read_pair(dir, split, Labels::Targets, true);
  check_shapes(p, split == Split::Train, targets);
  const Array& x = p.features;
  const Array& y = p.labels;
  const std::vector<int64_t>& s = x.shape;
  const int64_t n = s[0];
  const int64_t features = numel(s) / std::max<int64_t>(n, 1);
  data.rows = s.size() == 2 ? 1 : s[s.size() - 2];
  data.cols = s.back();
  data.inputs = Tensor(Shape{n, n == 0 ? 1 : features});
  data.labels = Tensor(Shape{n, targets});
  // Targets: copied as they are, the first non-finite one reported.
  std::memcpy(data.labels.data(), y.bytes.data(), y.bytes.size());
  const float* t = data.labels.data();
  for (int64_t k = 0; k < n * targets; ++k)
    if (!std::isfinite(t[k]))
      fail(y.where, fmt::format("sample {}: target {} is {} (targets must be finite)", k / targets,
                                k % targets, t[k]));
  copy_features(data, x, n, features);
  data.root = dataset_root(data, pool);
  return data;
}

DataShape tensor_targets_shape(const fs::path& dir, int64_t targets) {
  const Pair p = read_pair(dir, Split::Train, Labels::Targets, false);
  check_shapes(p, true, targets);
  const std::vector<int64_t>& s = p.features.shape;
  return {s[0], numel(s) / s[0], targets, targets};
}

}  // namespace tribunal
