// NumPy's .npy array files, read strictly (a data set may come from anyone).
//   "\x93NUMPY" ‖ u8 major ‖ u8 minor ‖ header length (u16 LE for version 1, u32 LE for 2 and 3) ‖
//   header: a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (N, …), } padded
//   with spaces and ended by '\n' ‖ the elements, C order, exactly prod(shape)·itemsize bytes.
// Source: NumPy Enhancement Proposal 1, "A simple file format for NumPy arrays"
// (https://numpy.org/neps/nep-0001-npy-format.html) and numpy/lib/format.py.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tribunal {

/// An .npy header: the element type and shape, and where the elements start.
struct NpyHeader {
  std::string descr;           ///< "<f4", "<i8", "<i4" or "|u1" (the only ones accepted)
  std::vector<int64_t> shape;  ///< C order; () is a scalar
  uint64_t data_offset = 0;    ///< bytes before the first element
  int64_t numel() const;
  int64_t itemsize() const;  ///< 4, 8, 4 or 1
};

/// Reads and checks the header of `path`: magic, version 1–3, the dict's three keys and nothing else,
/// descr one of the accepted types, fortran_order False (C order only), non-negative dimensions, and a
/// file holding exactly prod(shape)·itemsize bytes after the header (fewer: truncated; more:
/// trailing bytes). Throws EngineError("<path>: <what>").
NpyHeader read_npy_header(const std::filesystem::path& path);

/// An .npy file's header and its element bytes (little-endian, as in the file).
struct NpyArray {
  NpyHeader header;
  std::vector<uint8_t> bytes;
};

/// read_npy_header, then the elements. Throws EngineError("<path>: <what>").
NpyArray read_npy(const std::filesystem::path& path);

/// Writes `bytes` as an .npy file (version 1.0) of `descr` and `shape` (C order). For tests and tools.
/// Throws EngineError naming the path when it cannot be written or the sizes disagree.
void write_npy(const std::filesystem::path& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* bytes, uint64_t size);

}  // namespace tribunal
