// A safetensors file written as a byte stream. See safetensors_writer.h.
#include "engine/safetensors_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include "engine/error.h"
#include "engine/safetensors.h"

namespace tribunal {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", path.string(), what));
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::span<const StreamedTensor> tensors,
                                     const std::map<std::string, std::string>& metadata)
    : path_(std::move(path)), tmp_(path_.string() + ".tmp") {
  std::vector<HeaderEntry> entries;
  for (const StreamedTensor& t : tensors) entries.push_back({t.name, "F32", t.shape});
  const EncodedHeader header = encode_safetensors_header(path_, entries, metadata);
  total_ = header.data_bytes;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path_, fmt::format("cannot create {}: {}", tmp_.string(), std::strerror(errno)));
  if (!write_all(fd_, header.bytes.data(), header.bytes.size())) {
    const std::string err = std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    fail(path_, fmt::format("cannot write {}: {}", tmp_.string(), err));
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void SafetensorsWriter::write(std::span<const uint8_t> bytes) {
  if (fd_ < 0) fail(path_, "written after commit");
  if (bytes.size() > total_ - written_)
    fail(path_,
         fmt::format("{} bytes beyond the tensors' {} bytes", written_ + bytes.size() - total_, total_));
  if (!write_all(fd_, bytes.data(), bytes.size()))
    fail(path_, fmt::format("cannot write {}: {}", tmp_.string(), std::strerror(errno)));
  written_ += bytes.size();
}

void SafetensorsWriter::commit() {
  if (fd_ < 0) fail(path_, "committed twice");
  if (written_ != total_) fail(path_, fmt::format("{} of the tensors' {} bytes written", written_, total_));
  if (::fsync(fd_) != 0) fail(path_, fmt::format("cannot fsync {}: {}", tmp_.string(), std::strerror(errno)));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(path_, fmt::format("cannot close {}: {}", tmp_.string(), std::strerror(errno)));
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    fail(path_, fmt::format("cannot rename {} to it: {}", tmp_.string(), std::strerror(errno)));
  committed_ = true;
}

}  // namespace tribunal
