#include "engine/model_cache.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {
namespace {

// What identifies a file's bytes without reading them, as make and ccache's direct mode trust.
struct FileStamp {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp&) const = default;
};

struct Entry {
  FileStamp stamp;
  ModelFile file;
};

std::mutex mu;
std::vector<Entry> recent;  // most recent last
constexpr size_t kEntries = 2;

void remember(const Entry& e) {  // under mu
  recent.push_back(e);
  if (recent.size() > kEntries) recent.erase(recent.begin());
}

}  // namespace

ModelFile load_model_file(const std::filesystem::path& path, const std::string& name,
                          const OnnxLimits& limits) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw EngineError(
        fmt::format("{}: cannot read model file '{}': {}", path.string(), name, std::strerror(errno)));
  const FileStamp stamp{st.st_dev, st.st_ino, st.st_size,
                        static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  {
    std::lock_guard lock(mu);
    for (auto it = recent.begin(); it != recent.end(); ++it)
      if (it->stamp == stamp) {
        const Entry hit = *it;
        recent.erase(it);
        recent.push_back(hit);
        return hit.file;
      }
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > limits.max_file_bytes)
    throw EngineError(fmt::format("{}: the model file holds {} bytes, more than the {} a model file may",
                                  path.string(), size, limits.max_file_bytes));
  std::ifstream in(path, std::ios::binary);
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  if (!in || !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    throw EngineError(fmt::format("{}: cannot read model file: {}", path.string(), std::strerror(errno)));
  Entry e{stamp, {hash_tagged(HashTag::File, bytes), nullptr}};
  {
    std::lock_guard lock(mu);
    for (const Entry& other : recent)
      if (other.file.hash == e.file.hash) e.file.model = other.file.model;  // the same bytes elsewhere
  }
  // Imported outside the lock: imports of different files may run concurrently. The source name in
  // the import's messages is the file's name.
  if (!e.file.model) e.file.model = import_onnx(bytes, path.filename().string(), limits);
  std::lock_guard lock(mu);
  remember(e);
  return e.file;
}

}  // namespace tribunal
