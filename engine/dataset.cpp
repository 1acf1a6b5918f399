// Fashion-MNIST IDX-in-gzip loader and dataset_root. See dataset.h.
#include "engine/dataset.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor_data.h"
#include "engine/text_data.h"
#include "protocol/merkle.h"
#include "protocol/tensor_hash.h"

namespace tribunal {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned byte, 3 dims
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned byte, 1 dim
constexpr int64_t kClasses = 10;
constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 32;  // far above any IDX we load; caps allocation

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", file.string(), what));
}

// A gzip file opened for reading; every zlib error becomes an EngineError naming the file.
class GzFile {
 public:
  explicit GzFile(const fs::path& path) : path_(path), gz_(nullptr, &gzclose_r) {
    errno = 0;
    gz_.reset(gzopen(path.c_str(), "rb"));
    if (gz_ == nullptr)
      fail(path_, fmt::format("cannot open: {}", errno ? std::strerror(errno) : "out of memory"));
    gzbuffer(gz_.get(), 1 << 20);  // before the first read, per zlib.h
    // gzread passes non-gzip input through unchanged; we want gzip and nothing else.
    if (gzdirect(gz_.get()) != 0) {
      check_error();
      fail(path_, "not a gzip file");
    }
  }

  // Reads up to n bytes into out; fewer only at the end of the stream. Throws on gzip errors.
  size_t read(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      unsigned want = static_cast<unsigned>(std::min<size_t>(n - got, size_t{1} << 30));
      int r = gzread(gz_.get(), out + got, want);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    check_error();
    return got;
  }

  // zlib reports a truncated stream as Z_BUF_ERROR and a bad CRC/deflate stream as Z_DATA_ERROR.
  void check_error() {
    int errnum = Z_OK;
    std::string msg = gzerror(gz_.get(), &errnum);
    if (errnum == Z_OK) return;
    const std::string prefix = path_.string() + ": ";  // zlib prefixes the path; we already do
    if (msg.starts_with(prefix)) msg.erase(0, prefix.size());
    if (errnum == Z_ERRNO) fail(path_, fmt::format("read error: {}", std::strerror(errno)));
    if (errnum == Z_BUF_ERROR) fail(path_, fmt::format("truncated gzip stream ({})", msg));
    fail(path_, fmt::format("corrupt gzip stream ({})", msg));
  }

 private:
  fs::path path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> gz_;  // closed even when the constructor throws
};

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

struct Idx {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> payload;
};

// Reads one IDX file of unsigned bytes: magic, big-endian u32 dims, then exactly prod(dims) bytes.
// `unit` names the payload in messages ("pixel", "label").
Idx read_idx(const fs::path& path, uint32_t magic, int ndims, const char* unit) {
  GzFile gz(path);
  const size_t header_bytes = 4 + 4 * static_cast<size_t>(ndims);
  uint8_t header[16];
  size_t got = gz.read(header, header_bytes);
  if (got < header_bytes)
    fail(path, fmt::format("truncated: expected {} header bytes, got {}", header_bytes, got));
  uint32_t found = load_be32(header);
  if (found != magic) fail(path, fmt::format("wrong IDX magic 0x{:08x}, expected 0x{:08x}", found, magic));

  Idx idx;
  uint64_t expected = 1;
  for (int d = 0; d < ndims; ++d) {
    idx.dims.push_back(load_be32(header + 4 + 4 * d));
    expected *= idx.dims.back();  // each factor < 2^32 and expected ≤ 2^32 before it: no overflow
    if (expected > kMaxPayloadBytes)
      fail(path, fmt::format("IDX dims declare more than {} bytes", kMaxPayloadBytes));
  }

  // Grow while reading, so a lying header costs no more memory than the data actually present.
  constexpr size_t kStep = size_t{16} << 20;
  idx.payload.reserve(std::min<size_t>(expected, kStep));
  size_t have = 0;
  while (have < expected) {
    size_t want = std::min<size_t>(expected - have, kStep);
    idx.payload.resize(have + want);
    size_t n = gz.read(idx.payload.data() + have, want);
    have += n;
    if (n < want) break;
  }
  if (have < expected)
    fail(path, fmt::format("truncated: expected {} {} bytes, got {}", expected, unit, have));
  uint8_t extra = 0;
  if (gz.read(&extra, 1) != 0)
    fail(path, fmt::format("trailing bytes after the {} {} bytes the header declares", expected, unit));
  return idx;
}

}  // namespace

Digest sample_hash(const Dataset& data, int64_t i) {
  const int64_t n = data.samples();
  if (i < 0 || i >= n) throw EngineError(fmt::format("sample_hash: index {} out of range [0, {})", i, n));
  const int64_t d = data.inputs.shape()[1];
  const int64_t width = data.label_width();
  const size_t label_count = static_cast<size_t>(width == 0 ? 1 : width);
  return sample_leaf(
      std::span<const float>(data.inputs.data() + i * d, static_cast<size_t>(d)),
      std::span<const float>(data.labels.data() + static_cast<size_t>(i) * label_count, label_count),
      static_cast<uint64_t>(width));
}

Digest dataset_root(const Dataset& data, ThreadPool& pool) {
  const int64_t n = data.samples();
  std::vector<Digest> values(static_cast<size_t>(n));
  pool.parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) values[static_cast<size_t>(i)] = sample_hash(data, i);
      },
      256);
  return merkle_root(values);
}

Digest dataset_root(const Dataset& data) {
  ThreadPool serial(1);
  return dataset_root(data, serial);
}

Dataset load_fashion_mnist(const fs::path& dir, Split split, ThreadPool& pool) {
  const char* prefix = split == Split::Train ? "train" : "t10k";
  const fs::path images_path = dir / fmt::format("{}-images-idx3-ubyte.gz", prefix);
  const fs::path labels_path = dir / fmt::format("{}-labels-idx1-ubyte.gz", prefix);

  Idx images = read_idx(images_path, kImagesMagic, 3, "pixel");
  Idx labels = read_idx(labels_path, kLabelsMagic, 1, "label");
  const int64_t n = images.dims[0];
  if (labels.dims[0] != images.dims[0]) {
    fail(labels_path, fmt::format("{} labels but {} has {} images", labels.dims[0], images_path.string(), n));
  }
  if (images.dims[1] == 0 || images.dims[2] == 0) {
    fail(images_path, fmt::format("empty images of {}x{} pixels", images.dims[1], images.dims[2]));
  }

  Dataset data;
  data.rows = images.dims[1];
  data.cols = images.dims[2];
  data.classes = kClasses;
  data.labels = Tensor(Shape{n});
  for (int64_t i = 0; i < n; ++i) {
    uint8_t v = labels.payload[static_cast<size_t>(i)];
    if (v >= kClasses)
      fail(labels_path, fmt::format("label {} of sample {} is not a class id 0..{}", v, i, kClasses - 1));
    data.labels[i] = static_cast<float>(v);
  }
  data.inputs = Tensor(Shape{n, data.rows * data.cols});
  float* out = data.inputs.data();
  const uint8_t* in = images.payload.data();
  pool.parallel_for(
      static_cast<int64_t>(images.payload.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t k = begin; k < end; ++k) out[k] = static_cast<float>(in[k]) / 255.0f;
      },
      int64_t{1} << 16);
  data.root = dataset_root(data, pool);
  return data;
}

Dataset load_fashion_mnist(const fs::path& dir, Split split) {
  ThreadPool serial(1);
  return load_fashion_mnist(dir, split, serial);
}

namespace {
const fs::path& located(const JobSpec& job) {
  if (job.data_path.empty())
    throw EngineError(fmt::format("{}: data set '{}' has not been located in this node's registry",
                                  job.source, job.data_name));
  return job.data_path;
}
}  // namespace

Dataset load_dataset(const JobSpec& job, Split split, ThreadPool& pool) {
  if (job.dataset == "text") return load_text(located(job), job.model.context, job.validation, split, pool);
  if (job.dataset == "fashion-mnist") return load_fashion_mnist(located(job), split, pool);
  if (job.dataset == "tensors" && job.model.loss == LossKind::Mse)
    return load_tensor_targets(located(job), job.data_targets, split, pool);
  if (job.dataset == "tensors") return load_tensor_data(located(job), job.data_classes, split, pool);
  throw EngineError(fmt::format("{}: data set '{}' is not supported", job.source, job.dataset));
}

void check_job_against_dataset(const JobSpec& job, const Dataset& data) {
  check_job_against_data(job, data.samples(), data.inputs.shape()[1], data.classes);
  const ModelSpec& m = job.model;
  const int64_t width = label_width(job);
  if (m.loss == LossKind::Mse && data.label_width() != width)
    throw EngineError(
        fmt::format("{}: the mse loss needs {} float targets per sample (data.targets) but {} "
                    "has label rows of {}",
                    job.source, width, job.dataset, data.label_width()));
  if (data.label_width() != width)
    throw EngineError(fmt::format(
        "{}: the {} model needs {} but {} has {}", job.source, width ? "next-token" : "classifier",
        width ? fmt::format("label sequences of {}", width) : std::string("class-id labels"), job.dataset,
        data.label_width() ? fmt::format("label sequences of {}", data.label_width())
                           : std::string("class-id labels")));
  if (m.kind == ModelKind::Cnn && (data.rows != m.image_height || data.cols != m.image_width))
    throw EngineError(fmt::format("{}: the cnn reads {}x{} images but {} has {}x{}", job.source,
                                  m.image_height, m.image_width, job.dataset, data.rows, data.cols));
}

DataShape data_shape_of(const Dataset& data) {
  return {data.samples(), data.inputs.shape()[1], data.classes, data.label_width()};
}

Digest job_id(const JobSpec& job, const Dataset& data) {
  return job_id(job, data.root, data_shape_of(data));
}

DataShape expected_data_shape(const JobSpec& job) {
  if (job.dataset == "text") {
    const TextWindows w =
        text_windows(text_corpus_size(located(job)), job.model.context, job.validation, job.data_path);
    return {w.train, job.model.context, 256, job.model.context};
  }
  if (job.dataset == "tensors" && job.model.loss == LossKind::Mse)
    return tensor_targets_shape(located(job), job.data_targets);
  if (job.dataset == "tensors") return tensor_data_shape(located(job), job.data_classes);
  if (job.dataset != "fashion-mnist")
    throw EngineError(fmt::format("{}: data set '{}' is not supported", job.source, job.dataset));
  const auto header = [](const fs::path& path, uint32_t magic, int ndims) {
    GzFile gz(path);
    uint8_t h[16];
    const size_t want = 4 + 4 * static_cast<size_t>(ndims);
    if (gz.read(h, want) < want) fail(path, fmt::format("truncated: expected {} header bytes", want));
    if (load_be32(h) != magic)
      fail(path, fmt::format("wrong IDX magic 0x{:08x}, expected 0x{:08x}", load_be32(h), magic));
    std::vector<int64_t> dims;
    for (int d = 0; d < ndims; ++d) dims.push_back(load_be32(h + 4 + 4 * d));
    return dims;
  };
  const std::vector<int64_t> images = header(located(job) / "train-images-idx3-ubyte.gz", kImagesMagic, 3);
  return {images[0], images[1] * images[2], kClasses, 0};
}

}  // namespace tribunal
