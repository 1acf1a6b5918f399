// safetensors reader and writer. See safetensors.h.
#include "engine/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/error.h"

namespace tribunal {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

// Tensor bytes are written and read as stored in memory; safetensors is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // 100 MB, as in the reference implementation
constexpr const char* kMetadataKey = "__metadata__";

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", path.string(), what));
}

std::string errno_text() {
  return std::strerror(errno);
}

// An owned POSIX file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now and reports failure (close can report a delayed write error).
  bool close() {
    int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

// Reads exactly n bytes at offset; returns false on a short read, throws on an I/O error.
bool pread_all(const fs::path& path, int fd, void* out, size_t n, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(path, fmt::format("read error: {}", errno_text()));
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return true;
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Which dtypes a reader accepts: checkpoints hold F32 only; data files (read_safetensors_data) also
// hold integer labels.
enum class Dtypes { F32Only, Data };

// The bytes per element of `dtype` among those `accepted`; 0 when not accepted.
uint64_t itemsize_of(const std::string& dtype, Dtypes accepted) {
  if (dtype == "F32") return 4;
  if (accepted == Dtypes::F32Only) return 0;
  if (dtype == "I64") return 8;
  if (dtype == "I32") return 4;
  if (dtype == "U8") return 1;
  return 0;
}

// One tensor entry of a validated header.
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// A validated header: entries sorted by data offset, tiling [0, buffer_bytes).
struct Header {
  uint64_t data_start = 0;  // file offset of the data buffer: 8 + N
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

// Parses JSON, rejecting duplicate keys in any object (nlohmann would silently keep the last one).
ordered_json parse_json(const fs::path& path, const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto callback = [&](int, ordered_json::parse_event_t event, ordered_json& parsed) {
    using E = ordered_json::parse_event_t;
    if (event == E::object_start) open_objects.emplace_back();
    if (event == E::object_end) open_objects.pop_back();
    if (event == E::key && !open_objects.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  ordered_json j;
  try {
    j = ordered_json::parse(text, callback);
  } catch (const ordered_json::exception& e) {
    fail(path, fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!duplicate.empty()) fail(path, fmt::format("header has duplicate key \"{}\"", duplicate));
  return j;
}

uint64_t get_unsigned(const fs::path& path, const std::string& name, const char* field,
                      const ordered_json& v) {
  if (!v.is_number_unsigned()) {
    fail(path, fmt::format("tensor \"{}\": {} entries must be non-negative integers, got {}", name, field,
                           v.dump()));
  }
  return v.get<uint64_t>();
}

Entry parse_entry(const fs::path& path, const std::string& name, const ordered_json& v, uint64_t buffer_bytes,
                  Dtypes accepted) {
  if (!v.is_object()) fail(path, fmt::format("tensor \"{}\": entry is not an object", name));
  for (const auto& [key, _] : v.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(path, fmt::format("tensor \"{}\": unknown key \"{}\"", name, key));
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!v.contains(key)) fail(path, fmt::format("tensor \"{}\": missing \"{}\"", name, key));
  }
  const auto& dtype = v["dtype"];
  if (!dtype.is_string()) fail(path, fmt::format("tensor \"{}\": dtype is not a string", name));
  const uint64_t itemsize = itemsize_of(dtype.get<std::string>(), accepted);
  if (itemsize == 0) {
    fail(path,
         fmt::format("tensor \"{}\": dtype \"{}\" is not supported ({})", name, dtype.get<std::string>(),
                     accepted == Dtypes::F32Only ? "only F32" : "F32, I64, I32 or U8"));
  }

  Entry e;
  e.name = name;
  e.dtype = dtype.get<std::string>();
  const auto& shape = v["shape"];
  if (!shape.is_array()) fail(path, fmt::format("tensor \"{}\": shape is not an array", name));
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    fail(path, fmt::format("tensor \"{}\": rank {} exceeds {}", name, shape.size(), kMaxRank));
  }
  uint64_t bytes = itemsize;     // saturating: numel·itemsize
  uint64_t nonzero_product = 1;  // saturating product of the non-zero dims, keeps Shape::numel in range
  constexpr uint64_t kSaturated = ~uint64_t{0};
  for (const auto& d : shape) {
    uint64_t dim = get_unsigned(path, name, "shape", d);
    if (dim != 0 && __builtin_mul_overflow(nonzero_product, dim, &nonzero_product))
      nonzero_product = kSaturated;
    if (__builtin_mul_overflow(bytes, dim, &bytes)) bytes = kSaturated;
    e.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(dim, INT64_MAX)));
  }
  if (nonzero_product > (uint64_t{1} << 60))
    fail(path, fmt::format("tensor \"{}\": shape is too large", name));

  const auto& offsets = v["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(path, fmt::format("tensor \"{}\": data_offsets must be [begin, end]", name));
  }
  e.begin = get_unsigned(path, name, "data_offsets", offsets[0]);
  e.end = get_unsigned(path, name, "data_offsets", offsets[1]);
  if (e.begin > e.end) {
    fail(path, fmt::format("tensor \"{}\": data_offsets [{}, {}] begin after end", name, e.begin, e.end));
  }
  if (e.end > buffer_bytes) {
    fail(path, fmt::format("tensor \"{}\": data_offsets [{}, {}] out of range of the {}-byte data buffer",
                           name, e.begin, e.end, buffer_bytes));
  }
  if (e.end - e.begin != bytes) {
    fail(path, fmt::format("tensor \"{}\": shape {} needs {} bytes but data_offsets [{}, {}] span {}", name,
                           shape.dump(), bytes == kSaturated ? "too many" : std::to_string(bytes), e.begin,
                           e.end, e.end - e.begin));
  }
  return e;
}

std::map<std::string, std::string> parse_metadata(const fs::path& path, const ordered_json& v) {
  if (!v.is_object()) fail(path, "__metadata__ is not an object");
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) fail(path, fmt::format("__metadata__ value of \"{}\" is not a string", key));
    out[key] = value.get<std::string>();
  }
  return out;
}

// Reads and validates the length field and header; see read_safetensors in the header for the rules.
Header read_header(const fs::path& path, int fd, Dtypes accepted) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, fmt::format("cannot stat: {}", errno_text()));
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8)
    fail(path, fmt::format("truncated: {} bytes, less than the 8-byte header length", file_bytes));

  uint8_t len_bytes[8];
  if (!pread_all(path, fd, len_bytes, 8, 0)) fail(path, "truncated while reading the header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len_bytes[i];
  if (n > kMaxHeaderBytes)
    fail(path, fmt::format("header length {} exceeds the {}-byte limit", n, kMaxHeaderBytes));
  if (n > file_bytes - 8) {
    fail(path, fmt::format("header length {} exceeds the {} bytes after the length field (truncated?)", n,
                           file_bytes - 8));
  }
  std::string text(n, '\0');
  if (!pread_all(path, fd, text.data(), n, 8)) fail(path, "truncated while reading the header");
  if (text.empty() || text[0] != '{') fail(path, "header does not start with '{'");

  ordered_json j = parse_json(path, text);
  if (!j.is_object()) fail(path, "header is not a JSON object");

  Header h;
  h.data_start = 8 + n;
  const uint64_t buffer_bytes = file_bytes - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key == kMetadataKey) {
      h.metadata = parse_metadata(path, value);
    } else {
      h.entries.push_back(parse_entry(path, key, value, buffer_bytes, accepted));
    }
  }
  std::stable_sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (size_t i = 0; i < h.entries.size(); ++i) {
    const Entry& e = h.entries[i];
    if (e.begin < pos) {
      fail(path, fmt::format("tensors \"{}\" and \"{}\" overlap in the data buffer", h.entries[i - 1].name,
                             e.name));
    }
    if (e.begin > pos) fail(path, fmt::format("gap of {} bytes before tensor \"{}\"", e.begin - pos, e.name));
    pos = e.end;
  }
  if (pos != buffer_bytes) {
    fail(path, fmt::format("{} bytes at the end of the data buffer belong to no tensor", buffer_bytes - pos));
  }
  return h;
}

int open_for_read(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, fmt::format("cannot open: {}", errno_text()));
  return fd;
}

}  // namespace

void write_safetensors(const fs::path& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<RawTensor> raw;
  raw.reserve(tensors.size());
  for (const NamedTensor& t : tensors) {
    if (t.tensor == nullptr) fail(path, fmt::format("tensor \"{}\" is null", t.name));
    const auto dims = t.tensor->shape().dims();
    raw.push_back({t.name, "F32", {dims.begin(), dims.end()}, t.tensor->bytes()});
  }
  write_safetensors_raw(path, raw, metadata);
}

EncodedHeader encode_safetensors_header(const fs::path& path, std::span<const HeaderEntry> tensors,
                                        const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  EncodedHeader out;
  for (const HeaderEntry& t : tensors) {
    const std::string name(t.name);
    if (name == kMetadataKey) fail(path, "tensor name \"__metadata__\" is reserved");
    if (header.contains(name)) fail(path, fmt::format("duplicate tensor name \"{}\"", name));
    if (t.dtype != "F32" && t.dtype != "I64")
      fail(path, fmt::format("tensor \"{}\": dtype \"{}\" is not F32 or I64", name, t.dtype));
    uint64_t bytes = t.dtype == "F32" ? 4 : 8;
    ordered_json shape = ordered_json::array();
    for (int64_t d : t.shape) {
      if (d < 0) fail(path, fmt::format("tensor \"{}\" has a negative dimension", name));
      bytes *= static_cast<uint64_t>(d);
      shape.push_back(d);
    }
    header[name] = {{"dtype", std::string(t.dtype)},
                    {"shape", std::move(shape)},
                    {"data_offsets", {out.data_bytes, out.data_bytes + bytes}}};
    out.sizes.push_back(bytes);
    out.data_bytes += bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const ordered_json::exception& e) {
    fail(path, fmt::format("cannot encode header (names and metadata must be UTF-8): {}", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the data buffer starts 8-aligned
  out.bytes.resize(8);
  for (int i = 0; i < 8; ++i)
    out.bytes[static_cast<size_t>(i)] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.bytes += text;
  return out;
}

void write_safetensors_raw(const fs::path& path, std::span<const RawTensor> tensors,
                           const std::map<std::string, std::string>& metadata) {
  std::vector<HeaderEntry> entries;
  for (const RawTensor& t : tensors) entries.push_back({t.name, t.dtype, t.shape});
  const EncodedHeader header = encode_safetensors_header(path, entries, metadata);
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].data.size() != header.sizes[i])
      fail(path,
           fmt::format("tensor \"{}\": {} bytes for {} {} elements", tensors[i].name, tensors[i].data.size(),
                       header.sizes[i] / (tensors[i].dtype == "F32" ? 4u : 8u), tensors[i].dtype));

  const fs::path tmp = fs::path(path.string() + ".tmp");
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail(path, fmt::format("cannot create {}: {}", tmp.string(), errno_text()));
  auto abandon = [&](const std::string& what) {
    std::string err = errno_text();
    fd.close();
    ::unlink(tmp.c_str());
    fail(path, fmt::format("{} {}: {}", what, tmp.string(), err));
  };
  if (!write_all(fd.get(), header.bytes.data(), header.bytes.size())) abandon("cannot write");
  for (const RawTensor& t : tensors) {
    if (!write_all(fd.get(), t.data.data(), t.data.size())) abandon("cannot write");
  }
  if (::fsync(fd.get()) != 0) abandon("cannot fsync");
  if (!fd.close()) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    fail(path, fmt::format("cannot close {}: {}", tmp.string(), err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = errno_text();
    ::unlink(tmp.c_str());
    fail(path, fmt::format("cannot rename {} to it: {}", tmp.string(), err));
  }
  // Make the rename itself durable.
  fs::path dir = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0 || ::fsync(dir_fd.get()) != 0) {
    fail(path, fmt::format("cannot fsync directory {}: {}", dir.string(), errno_text()));
  }
}

SafetensorsFile read_safetensors(const fs::path& path) {
  Fd fd(open_for_read(path));
  Header h = read_header(path, fd.get(), Dtypes::F32Only);
  SafetensorsFile out;
  out.metadata = std::move(h.metadata);
  out.tensors.reserve(h.entries.size());
  for (const Entry& e : h.entries) {
    Tensor t{Shape(std::span<const int64_t>(e.shape))};
    if (!pread_all(path, fd.get(), t.data(), e.end - e.begin, h.data_start + e.begin)) {
      fail(path, fmt::format("truncated while reading tensor \"{}\"", e.name));
    }
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

std::map<std::string, std::string> read_safetensors_metadata(const fs::path& path) {
  Fd fd(open_for_read(path));
  return read_header(path, fd.get(), Dtypes::F32Only).metadata;
}

std::vector<DataTensorInfo> read_safetensors_data_header(const fs::path& path) {
  Fd fd(open_for_read(path));
  const Header h = read_header(path, fd.get(), Dtypes::Data);
  std::vector<DataTensorInfo> out;
  out.reserve(h.entries.size());
  for (const Entry& e : h.entries) out.push_back({e.name, e.dtype, e.shape});
  return out;
}

std::vector<DataTensor> read_safetensors_data(const fs::path& path) {
  Fd fd(open_for_read(path));
  const Header h = read_header(path, fd.get(), Dtypes::Data);
  std::vector<DataTensor> out;
  out.reserve(h.entries.size());
  for (const Entry& e : h.entries) {
    DataTensor t{{e.name, e.dtype, e.shape}, std::vector<uint8_t>(e.end - e.begin)};
    if (!pread_all(path, fd.get(), t.bytes.data(), t.bytes.size(), h.data_start + e.begin))
      fail(path, fmt::format("truncated while reading tensor \"{}\"", e.name));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tribunal
