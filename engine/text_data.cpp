// Text corpora as windows of bytes. See text_data.h.
#include "engine/text_data.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", path.string(), what));
}

// The files of the corpus in concatenation order (the path itself when it is a file).
std::vector<fs::path> corpus_files(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    fail(path, fmt::format("cannot open text corpus: {}", ec ? ec.message() : "no such file or directory"));
  if (fs::is_regular_file(st)) return {path};
  if (!fs::is_directory(st)) fail(path, "text corpus is neither a regular file nor a directory");
  std::vector<fs::path> files;
  fs::directory_iterator it(path, ec);
  if (ec) fail(path, fmt::format("cannot list text corpus directory: {}", ec.message()));
  for (const fs::directory_entry& entry : it) {
    const fs::file_status own = entry.symlink_status(ec);
    if (ec) fail(entry.path(), fmt::format("cannot stat: {}", ec.message()));
    if (fs::is_symlink(own) || !fs::is_regular_file(own) || entry.path().extension() == ".dat") continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    return a.filename().string() < b.filename().string();
  });
  if (files.empty())
    fail(path, "text corpus directory has no regular files (symbolic links and *.dat are skipped)");
  return files;
}

}  // namespace

std::vector<uint8_t> read_text_corpus(const fs::path& path) {
  std::vector<uint8_t> bytes;
  for (const fs::path& file : corpus_files(path)) {
    std::ifstream in(file, std::ios::binary);
    if (!in) fail(file, fmt::format("cannot open: {}", std::strerror(errno)));
    const std::vector<char> content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) fail(file, "read error");
    bytes.insert(bytes.end(), content.begin(), content.end());
  }
  if (bytes.empty()) fail(path, "text corpus is empty");
  return bytes;
}

int64_t text_corpus_size(const fs::path& path) {
  int64_t total = 0;
  for (const fs::path& file : corpus_files(path)) {
    std::error_code ec;
    const uintmax_t size = fs::file_size(file, ec);
    if (ec) fail(file, fmt::format("cannot stat: {}", ec.message()));
    total += static_cast<int64_t>(size);
  }
  if (total == 0) fail(path, "text corpus is empty");
  return total;
}

TextWindows text_windows(int64_t bytes, int64_t context, double validation, const fs::path& path) {
  TextWindows w;
  w.windows = bytes >= 1 ? (bytes - 1) / context : 0;
  w.held_out = static_cast<int64_t>(std::ceil(validation * static_cast<double>(w.windows)));
  w.train = w.windows - w.held_out;
  if (w.windows < 1)
    fail(path,
         fmt::format(
             "text corpus too short: {} bytes make no window of {} inputs and {} labels (needs {} bytes)",
             bytes, context, context, context + 1));
  if (w.train < 1)
    fail(path, fmt::format("text corpus too short: all {} windows of {} bytes are held out for validation {}",
                           w.windows, context, validation));
  return w;
}

Dataset load_text(const fs::path& path, int64_t context, double validation, Split split, ThreadPool& pool) {
  const std::vector<uint8_t> bytes = read_text_corpus(path);
  const TextWindows w = text_windows(static_cast<int64_t>(bytes.size()), context, validation, path);
  const int64_t first = split == Split::Train ? 0 : w.train;
  const int64_t n = split == Split::Train ? w.train : w.held_out;

  Dataset data;
  data.rows = 1;
  data.cols = context;
  data.classes = 256;
  data.inputs = Tensor(Shape{n, context});
  data.labels = Tensor(Shape{n, context});
  float* x = data.inputs.data();
  float* y = data.labels.data();
  const size_t base = static_cast<size_t>(first * context);
  for (int64_t k = 0; k < n * context; ++k) {
    x[k] = static_cast<float>(bytes[base + static_cast<size_t>(k)]);
    y[k] = static_cast<float>(bytes[base + static_cast<size_t>(k) + 1]);
  }

  // The training targets are bytes [1, train·T + 1).
  int64_t counts[256] = {};
  const int64_t targets = w.train * context;
  for (int64_t k = 1; k <= targets; ++k) ++counts[bytes[static_cast<size_t>(k)]];
  double entropy = 0.0;
  for (int64_t c : counts)
    if (c > 0) {
      const double p = static_cast<double>(c) / static_cast<double>(targets);
      entropy -= p * std::log(p);  // a report, not part of any commitment
    }
  data.unigram_entropy = entropy;
  data.root = dataset_root(data, pool);
  return data;
}

}  // namespace tribunal
