// .npy reading and writing. See npy.h.
#include "engine/npy.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace tribunal {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 16;  // numpy writes < 100 bytes; bounds allocation

[[noreturn]] void fail(const fs::path& path, const std::string& what) {
  throw EngineError(fmt::format("{}: {}", path.string(), what));
}

// A tokenizer for the header's dict literal: {'key': value, …} with values a quoted string, True,
// False or a tuple of integers.
class DictParser {
 public:
  DictParser(const fs::path& path, std::string_view text) : path_(path), text_(text) {}

  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t')) ++pos_;
  }
  bool accept(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(path_, fmt::format("header: expected '{}' at byte {} of {}", c, pos_, quoted()));
  }
  std::string string() {
    skip_spaces();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail(path_, fmt::format("header: expected a quoted string at byte {} of {}", pos_, quoted()));
    const char q = text_[pos_++];
    const size_t end = text_.find(q, pos_);
    if (end == std::string_view::npos)
      fail(path_, fmt::format("header: unterminated string in {}", quoted()));
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_spaces();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    fail(path_, fmt::format("header: expected True or False at byte {} of {}", pos_, quoted()));
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> dims;
    while (!accept(')')) {
      skip_spaces();
      const size_t begin = pos_;
      int64_t v = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (v > (int64_t{1} << 48)) fail(path_, fmt::format("header: dimension too large in {}", quoted()));
        v = v * 10 + (text_[pos_++] - '0');
      }
      if (pos_ == begin)
        fail(path_, fmt::format("header: expected a non-negative integer at byte {} of {}", pos_, quoted()));
      dims.push_back(v);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }
  bool at_end() {
    skip_spaces();
    return pos_ == text_.size();
  }
  std::string quoted() const { return fmt::format("\"{}\"", text_); }

 private:
  const fs::path& path_;
  std::string_view text_;
  size_t pos_ = 0;
};

int64_t itemsize_of(std::string_view descr) {
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<i8") return 8;
  if (descr == "|u1") return 1;
  return 0;
}

}  // namespace

int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t NpyHeader::itemsize() const {
  return itemsize_of(descr);
}

NpyHeader read_npy_header(const fs::path& path) {
  std::error_code ec;
  const uint64_t file_bytes = fs::file_size(path, ec);
  if (ec) fail(path, fmt::format("cannot open: {}", ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
  char lead[12] = {};
  in.read(lead, 10);
  if (in.gcount() < 10)
    fail(path, fmt::format("truncated: {} bytes, less than an .npy preamble", file_bytes));
  if (std::memcmp(lead, kMagic, 6) != 0) fail(path, "not an .npy file (no \\x93NUMPY magic)");
  const auto major = static_cast<uint8_t>(lead[6]);
  uint64_t header_bytes = 0, prefix = 10;
  if (major == 1) {
    header_bytes = static_cast<uint8_t>(lead[8]) | (uint64_t{static_cast<uint8_t>(lead[9])} << 8);
  } else if (major == 2 || major == 3) {
    in.read(lead + 10, 2);
    if (in.gcount() < 2) fail(path, "truncated .npy preamble");
    for (int i = 3; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(lead[8 + i]);
    prefix = 12;
  } else {
    fail(path,
         fmt::format(".npy version {}.{} is not supported (1, 2 or 3)", major, static_cast<int>(lead[7])));
  }
  if (header_bytes > kMaxHeaderBytes) fail(path, fmt::format("header length {} is too large", header_bytes));
  if (prefix + header_bytes > file_bytes)
    fail(path, fmt::format("truncated: the header needs {} bytes, the file has {}", prefix + header_bytes,
                           file_bytes));
  std::string text(header_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  if (static_cast<uint64_t>(in.gcount()) < header_bytes) fail(path, "truncated while reading the header");

  NpyHeader h;
  DictParser p(path, text);
  bool seen_descr = false, seen_order = false, seen_shape = false, fortran = false;
  p.expect('{');
  while (!p.accept('}')) {
    const std::string key = p.string();
    p.expect(':');
    if (key == "descr" && !seen_descr) {
      h.descr = p.string();
      seen_descr = true;
    } else if (key == "fortran_order" && !seen_order) {
      fortran = p.boolean();
      seen_order = true;
    } else if (key == "shape" && !seen_shape) {
      h.shape = p.tuple();
      seen_shape = true;
    } else {
      fail(path, fmt::format("header: unexpected or repeated key '{}' in {}", key, p.quoted()));
    }
    if (!p.accept(',')) {
      p.expect('}');
      break;
    }
  }
  if (!p.at_end()) fail(path, fmt::format("header: bytes after the dict in {}", p.quoted()));
  if (!seen_descr || !seen_order || !seen_shape)
    fail(path, fmt::format("header: needs descr, fortran_order and shape, got {}", p.quoted()));
  if (fortran)
    fail(path, "fortran_order is True: only C-order arrays are accepted (numpy.ascontiguousarray)");
  if (h.itemsize() == 0)
    fail(path, fmt::format("element type '{}' is not accepted ('<f4' features; '<i8', '<i4' or '|u1' labels)",
                           h.descr));
  h.data_offset = prefix + header_bytes;
  // Each dimension < 2^48 and the product checked step by step: no overflow.
  uint64_t expected = static_cast<uint64_t>(h.itemsize());
  for (int64_t d : h.shape) {
    if (d != 0 && expected > (uint64_t{1} << 50) / static_cast<uint64_t>(d))
      fail(path, "shape declares more than 2^50 bytes");
    expected *= static_cast<uint64_t>(d);
  }
  const uint64_t have = file_bytes - h.data_offset;
  if (have < expected)
    fail(path, fmt::format("truncated: shape {} of '{}' needs {} data bytes, the file has {}",
                           fmt::join(h.shape, "x"), h.descr, expected, have));
  if (have > expected)
    fail(path, fmt::format("{} trailing bytes after the {} data bytes of shape {}", have - expected, expected,
                           fmt::join(h.shape, "x")));
  return h;
}

NpyArray read_npy(const fs::path& path) {
  NpyArray a;
  a.header = read_npy_header(path);
  const auto n = static_cast<uint64_t>(a.header.numel() * a.header.itemsize());
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(a.header.data_offset));
  a.bytes.resize(n);
  in.read(reinterpret_cast<char*>(a.bytes.data()), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(in.gcount()) != n) fail(path, "truncated while reading the elements");
  return a;
}

void write_npy(const fs::path& path, const std::string& descr, const std::vector<int64_t>& shape,
               const void* bytes, uint64_t size) {
  uint64_t expected = static_cast<uint64_t>(itemsize_of(descr));
  for (int64_t d : shape) expected *= static_cast<uint64_t>(d);
  if (expected == 0 && itemsize_of(descr) == 0)
    fail(path, fmt::format("element type '{}' is not supported", descr));
  if (expected != size)
    fail(path, fmt::format("{} bytes given for {} of shape {}", size, expected, shape.size()));
  std::string dims = fmt::format("{}", fmt::join(shape, ", "));
  if (shape.size() == 1) dims += ",";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, fmt::format("cannot create: {}", std::strerror(errno)));
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char len[2] = {static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out.write(len, 2);
  out << header;
  out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
  if (!out.flush()) fail(path, "cannot write");
}

}  // namespace tribunal
