// A safetensors file written as a byte stream (engine/safetensors.h has the format): the header is
// fixed by the tensors' names and shapes up front, then their bytes arrive in order, a piece at a time,
// so a file of any size is written with bounded memory — e.g. a delivered model whose chunks are
// checked as they stream (nodes/delivery.h). Written to "<path>.tmp" and renamed over `path` only by
// commit(), once every byte came; an abandoned writer removes its .tmp file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace tribunal {

/// One tensor of a streamed file: F32, `shape` (non-negative dims).
struct StreamedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

class SafetensorsWriter {
 public:
  /// Creates "<path>.tmp" and writes the header (names unique, not "__metadata__"; `metadata` under
  /// "__metadata__"). Throws EngineError("<path>: <what>") on a bad name or an I/O failure.
  SafetensorsWriter(std::filesystem::path path, std::span<const StreamedTensor> tensors,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();  ///< removes the .tmp file unless committed
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  /// Appends the next bytes of the tensors' data (little-endian F32, in the order given). Throws
  /// EngineError beyond the tensors' total bytes or on an I/O failure.
  void write(std::span<const uint8_t> bytes);
  /// Bytes of data written so far, and in all.
  uint64_t written() const { return written_; }
  uint64_t total() const { return total_; }
  /// Flushes, fsyncs and renames the .tmp file over `path`. Throws EngineError if a byte is missing
  /// or on an I/O failure.
  void commit();

 private:
  std::filesystem::path path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0, total_ = 0;
  bool committed_ = false;
};

}  // namespace tribunal
