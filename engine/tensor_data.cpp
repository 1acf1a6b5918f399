// The tensors data set: .npy features and labels. See tensor_data.h.
#include "engine/tensor_data.h"

#include <cmath>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"
#include "engine/npy.h"

namespace tribunal {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", path.string(), what));
}

struct Files {
  fs::path features, labels;
};

Files files_of(const fs::path& dir, Split split) {
  const char* prefix = split == Split::Train ? "" : "test-";
  return {dir / fmt::format("{}features.npy", prefix), dir / fmt::format("{}labels.npy", prefix)};
}

// Checks the two headers against each other; returns the features' header.
NpyHeader check_headers(const Files& f, const NpyHeader& x, const NpyHeader& y, bool need_samples) {
  if (x.descr != "<f4")
    fail(f.features,
         fmt::format("features must be float32 ('<f4'), not '{}' (numpy: x.astype(np.float32))", x.descr));
  if (x.shape.size() < 2 || x.shape.size() > 4)
    fail(f.features, fmt::format("features must be [N, F], [N, H, W] or [N, C, H, W], not shape ({})",
                                 fmt::join(x.shape, ", ")));
  for (size_t d = 1; d < x.shape.size(); ++d)
    if (x.shape[d] == 0)
      fail(f.features, fmt::format("features of shape ({}) are empty", fmt::join(x.shape, ", ")));
  if (need_samples && x.shape[0] == 0) fail(f.features, "no samples (N = 0)");
  if (y.descr == "<f4")
    fail(f.labels, "labels must be integers ('<i8', '<i4' or '|u1'), not float32 ('<f4')");
  if (y.shape.size() != 1)
    fail(f.labels, fmt::format("labels must be [N] class ids, not shape ({})", fmt::join(y.shape, ", ")));
  if (y.shape[0] != x.shape[0])
    fail(f.labels,
         fmt::format("{} labels but {} has {} samples", y.shape[0], f.features.string(), x.shape[0]));
  return x;
}

}  // namespace

Dataset load_tensor_data(const fs::path& dir, int64_t classes, Split split, ThreadPool& pool) {
  const Files f = files_of(dir, split);
  Dataset data;
  data.classes = classes;
  if (split == Split::Test && !fs::exists(f.features) && !fs::exists(f.labels)) {
    data.inputs = Tensor(Shape{0, 1});  // no test split: nothing to evaluate
    data.labels = Tensor(Shape{0});
    data.rows = data.cols = 1;
    data.root = dataset_root(data, pool);
    return data;
  }
  const NpyArray x = read_npy(f.features);
  const NpyArray y = read_npy(f.labels);
  check_headers(f, x.header, y.header, split == Split::Train);
  const std::vector<int64_t>& s = x.header.shape;
  const int64_t n = s[0];
  const int64_t features = x.header.numel() / std::max<int64_t>(n, 1);
  data.rows = s.size() == 2 ? 1 : s[s.size() - 2];
  data.cols = s.back();
  data.inputs = Tensor(Shape{n, n == 0 ? 1 : features});
  data.labels = Tensor(Shape{n});

  // Labels: the first out of range is reported.
  const int64_t itemsize = y.header.itemsize();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = y.bytes.data() + i * itemsize;
    int64_t v = 0;
    if (itemsize == 8) {
      std::memcpy(&v, p, 8);
    } else if (itemsize == 4) {
      int32_t w = 0;
      std::memcpy(&w, p, 4);
      v = w;
    } else {
      v = *p;
    }
    if (v < 0 || v >= classes)
      fail(f.labels, fmt::format("sample {}: label {} is not a class id 0..{} (data.classes = {})", i, v,
                                 classes - 1, classes));
    data.labels[i] = static_cast<float>(v);
  }
  // Features: copied, the first non-finite one reported.
  std::memcpy(data.inputs.data(), x.bytes.data(), x.bytes.size());
  const float* in = data.inputs.data();
  for (int64_t k = 0; k < n * features; ++k)
    if (!std::isfinite(in[k]))
      fail(f.features, fmt::format("sample {}: feature {} is {} (features must be finite)", k / features,
                                   k % features, in[k]));
  data.root = dataset_root(data, pool);
  return data;
}

DataShape tensor_data_shape(const fs::path& dir, int64_t classes) {
  const Files f = files_of(dir, Split::Train);
  const NpyHeader x = check_headers(f, read_npy_header(f.features), read_npy_header(f.labels), true);
  return {x.shape[0], x.numel() / x.shape[0], classes, 0};
}

}  // namespace tribunal
