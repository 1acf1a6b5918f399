// The safetensors checkpoint format: F32 tensors (read and written); writing also takes I64 tensors
// (write_safetensors_raw, for the PyTorch form's step count); data files (the user's classification
// data, engine/tensor_data.h) are read with F32, I64, I32 and U8 tensors (read_safetensors_data).
//   u64 little-endian N ‖ N bytes of UTF-8 JSON header ‖ data buffer
//   header = {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..],
//             "data_offsets": [begin, end]}, ...}; offsets are relative to the buffer start and the
//   tensors tile the buffer exactly (no gaps, no overlaps). Writers pad the header with spaces so
//   that N is a multiple of 8.
// Source: https://github.com/huggingface/safetensors (README "Format").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ops/tensor.h"

namespace tribunal {

/// A tensor to write under a name. The pointer is borrowed and must not be null.
struct NamedTensor {
  std::string name;
  const Tensor* tensor = nullptr;
};

/// Writes `tensors` (data in the given order, little-endian F32) and `metadata` to `path`
/// atomically: to "<path>.tmp", flushed and fsync'ed, then renamed over `path`.
/// Throws EngineError("<path>: <what>") on a null tensor, a duplicate or reserved ("__metadata__")
/// name, or any I/O failure (missing or unwritable directory, disk full); the .tmp file is removed.
void write_safetensors(const std::filesystem::path& path, std::span<const NamedTensor> tensors,
                       const std::map<std::string, std::string>& metadata);

/// A tensor of another dtype to write: its name, dtype ("F32" or "I64"), shape and little-endian
/// bytes (borrowed; numel × 4 or 8 of them).
struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

/// One tensor of a safetensors header: its name, dtype ("F32" or "I64") and shape.
struct HeaderEntry {
  std::string_view name;
  std::string_view dtype;
  std::span<const int64_t> shape;
};

/// A file's start, everything before the tensors' data: the 8-byte little-endian header length, then
/// the JSON header (`__metadata__` first when there is any, then each tensor's dtype, shape and
/// data_offsets in order), padded with spaces so the data starts 8-aligned (the safetensors format,
/// https://github.com/huggingface/safetensors). `sizes[i]` is tensor i's byte count, `data_bytes` their sum.
struct EncodedHeader {
  std::string bytes;
  std::vector<uint64_t> sizes;
  uint64_t data_bytes = 0;
};

/// Encodes the header of `tensors` (written, in that order, by the caller after it). Throws
/// EngineError("<path>: <what>") on a reserved ("__metadata__") or duplicate name, another dtype, a
/// negative dimension, or names and metadata that are not UTF-8. Shared by write_safetensors_raw and
/// the streaming SafetensorsWriter (safetensors_writer.h).
EncodedHeader encode_safetensors_header(const std::filesystem::path& path,
                                        std::span<const HeaderEntry> tensors,
                                        const std::map<std::string, std::string>& metadata);

/// As write_safetensors, for tensors of either dtype. Throws EngineError("<path>: <what>") also on an
/// unknown dtype or a data size that is not the shape's.
void write_safetensors_raw(const std::filesystem::path& path, std::span<const RawTensor> tensors,
                           const std::map<std::string, std::string>& metadata);

/// The contents of a safetensors file.
struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  ///< in data-offset order
  std::map<std::string, std::string> metadata;          ///< "__metadata__", empty when absent
};

/// Reads and strictly validates a safetensors file, which may come from an adversary: header length
/// ≤ 100 MB and within the file, a JSON object, no duplicate keys, dtype "F32" only, rank ≤ 4,
/// non-negative dims, data_offsets [begin, end] with end - begin = numel·4, and the tensors tiling
/// the data buffer exactly up to the end of the file; metadata values must be strings.
/// Throws EngineError("<path>: <what>") on any violation or I/O failure.
SafetensorsFile read_safetensors(const std::filesystem::path& path);

/// Reads only the header (validated as above) and returns its "__metadata__". Does not read the data.
std::map<std::string, std::string> read_safetensors_metadata(const std::filesystem::path& path);

/// A tensor of a data file as its header states it: name, dtype ("F32", "I64", "I32" or "U8") and
/// shape.
struct DataTensorInfo {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};

/// A data file's tensor and its elements' bytes (little-endian, as in the file).
struct DataTensor {
  DataTensorInfo info;
  std::vector<uint8_t> bytes;
};

/// Reads a safetensors file of data (engine/tensor_data.h: features and integer labels), validated as
/// read_safetensors does except that the dtypes "I64", "I32" and "U8" are accepted besides "F32" (each
/// tensor's data_offsets then span numel × 8, 4 or 1 bytes). Returns the tensors in data-offset order.
/// Checkpoints never go through this entry point: read_safetensors stays F32-only.
/// Throws EngineError("<path>: <what>") on any violation or I/O failure.
std::vector<DataTensor> read_safetensors_data(const std::filesystem::path& path);

/// As read_safetensors_data, the header alone (no element read; the sizes are checked against the file).
std::vector<DataTensorInfo> read_safetensors_data_header(const std::filesystem::path& path);

}  // namespace tribunal
