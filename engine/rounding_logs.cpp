#include "engine/rounding_logs.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <zstd.h>

#include "engine/error.h"
#include "ops/thread_pool.h"
#include "protocol/tensor_hash.h"

namespace tribunal {
namespace {

constexpr std::string_view kMagic = "tribunal rounding log 1\n";

struct ZstdFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
  void operator()(std::FILE* f) const { std::fclose(f); }
};

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

/// The concatenation of `parts` as one zstd frame (RFC 8878) at level 1, with its content size and
/// checksum. The packed trits are mostly zero bytes: zstd's level 1 compresses a GPT step's 16 MB at
/// ~300 MB/s on one core, against zlib's ~90 MB/s for 11 % fewer bytes (docs/performance.md,
/// "Rounding-log mode").
std::vector<uint8_t> zstd_frame(std::span<const std::span<const uint8_t>> parts) {
  thread_local std::unique_ptr<ZSTD_CCtx, ZstdFree> context(ZSTD_createCCtx());  // kept: its tables
  ZSTD_CCtx* const z = context.get();
  size_t total = 0;
  for (std::span<const uint8_t> p : parts) total += p.size();
  if (z == nullptr || ZSTD_isError(ZSTD_CCtx_reset(z, ZSTD_reset_session_and_parameters)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 1)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1)) ||
      ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(z, total)))
    throw EngineError("rounding log: zstd could not start a frame");
  std::vector<uint8_t> out(ZSTD_compressBound(total));  // room for all of it: the frame never stalls
  ZSTD_outBuffer o{out.data(), out.size(), 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    ZSTD_inBuffer in{parts[i].data(), parts[i].size(), 0};
    const bool last = i + 1 == parts.size();
    for (;;) {
      const size_t left = ZSTD_compressStream2(z, &o, &in, last ? ZSTD_e_end : ZSTD_e_continue);
      if (ZSTD_isError(left))
        throw EngineError(std::string("rounding log: zstd: ") + ZSTD_getErrorName(left));
      if (last ? left == 0 : in.pos == in.size) break;
    }
  }
  out.resize(o.pos);
  return out;
}

/// A zstd file read as one stream of bytes: its frames one after the other (RFC 8878 §3.1).
class ZstdReader {
 public:
  explicit ZstdReader(const std::filesystem::path& path)
      : file_(std::fopen(path.c_str(), "rb")), context_(ZSTD_createDCtx()), buffer_(ZSTD_DStreamInSize()) {}
  bool opened() const { return file_ != nullptr && context_ != nullptr; }

  /// Fills [p, p + n); false where the file ends first. Throws std::runtime_error with zstd's reason
  /// where the bytes are no valid frame (read_rounding_log names the file).
  bool read(void* p, size_t n) {
    ZSTD_outBuffer out{p, n, 0};
    while (out.pos < out.size) {
      if (in_.pos == in_.size) {
        in_ = {buffer_.data(), std::fread(buffer_.data(), 1, buffer_.size(), file_.get()), 0};
        if (in_.size == 0) return false;
      }
      const size_t hint = ZSTD_decompressStream(context_.get(), &out, &in_);
      if (ZSTD_isError(hint)) throw std::runtime_error(ZSTD_getErrorName(hint));
      frame_done_ = hint == 0;
    }
    return true;
  }
  /// True where no byte follows what was read.
  bool at_end() {
    uint8_t extra;
    return !read(&extra, 1);
  }
  /// True where the last frame read is whole (its checksum included).
  bool frame_done() const { return frame_done_; }

 private:
  std::unique_ptr<std::FILE, ZstdFree> file_;
  std::unique_ptr<ZSTD_DCtx, ZstdFree> context_;
  std::vector<uint8_t> buffer_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool frame_done_ = true;
};

}  // namespace

Digest rounding_log_leaf(const RoundingLog& log) {
  const int64_t shape[1] = {static_cast<int64_t>(log.count)};
  return tensor_leaf(DType::Trits, shape, std::as_bytes(std::span<const uint8_t>(log.packed)));
}

std::filesystem::path rounding_log_path(const std::filesystem::path& dir, int64_t step) {
  return dir / "rounding_logs" / fmt::format("step_{:08}.rlog.zst", step);
}

std::filesystem::path log_header_path(const std::filesystem::path& dir, int64_t step) {
  return dir / "log_headers" / fmt::format("step_{:08}.bin", step);
}

uint64_t write_rounding_log(const std::filesystem::path& path, const StepRoundingLog& log, ThreadPool* pool) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    throw EngineError(
        fmt::format("{}: cannot create directory: {}", path.parent_path().string(), ec.message()));
  std::vector<uint8_t> head(kMagic.begin(), kMagic.end());
  put_u64(head, static_cast<uint64_t>(log.step));
  put_u64(head, log.nodes.size());
  // The stream cut into pieces of kFrameBytes, each its own zstd frame, compressed side by side on the
  // pool. Concatenated frames are one stream to every reader (RFC 8878 §3.1; zstd -d).
  constexpr size_t kFrameBytes = size_t{1} << 20;
  std::vector<std::array<uint8_t, 8>> counts(log.nodes.size());
  std::vector<std::span<const uint8_t>> stream{head};
  for (size_t k = 0; k < log.nodes.size(); ++k) {
    for (int i = 0; i < 8; ++i)
      counts[k][static_cast<size_t>(i)] = static_cast<uint8_t>(log.nodes[k].count >> (8 * i));
    stream.emplace_back(counts[k]);
    stream.emplace_back(log.nodes[k].packed);
  }
  std::vector<std::vector<std::span<const uint8_t>>> pieces(1);
  size_t filled = 0;
  for (std::span<const uint8_t> part : stream)
    while (!part.empty()) {
      if (filled == kFrameBytes) {
        pieces.emplace_back();
        filled = 0;
      }
      const size_t n = std::min(part.size(), kFrameBytes - filled);
      pieces.back().push_back(part.first(n));
      part = part.subspan(n);
      filled += n;
    }
  std::vector<std::vector<uint8_t>> frames(pieces.size());
  const auto compress = [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      frames[static_cast<size_t>(k)] = zstd_frame(pieces[static_cast<size_t>(k)]);
  };
  if (pool)
    pool->parallel_for(static_cast<int64_t>(frames.size()), compress, 1);
  else
    compress(0, static_cast<int64_t>(frames.size()));
  const std::filesystem::path tmp = path.string() + ".tmp";
  uint64_t bytes = 0;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (const std::vector<uint8_t>& m : frames) {
      out.write(reinterpret_cast<const char*>(m.data()), static_cast<std::streamsize>(m.size()));
      bytes += m.size();
    }
    out.close();
    if (!out)
      throw EngineError(fmt::format("{}: cannot write rounding log: {}", tmp.string(), std::strerror(errno)));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw EngineError(fmt::format("{}: cannot rename rounding log: {}", path.string(), ec.message()));
  return bytes;
}

StepRoundingLog read_rounding_log(const std::filesystem::path& path, int64_t step,
                                  std::span<const uint64_t> counts) {
  const size_t nodes = counts.size();
  ZstdReader file(path);
  if (!file.opened())
    throw EngineError(fmt::format("{}: cannot open rounding log: {}", path.string(), std::strerror(errno)));
  const auto read = [&](void* p, size_t n, const char* what) {
    bool whole = false;
    std::string why = "it ends early";
    try {
      whole = file.read(p, n);
    } catch (const std::runtime_error& e) {
      why = e.what();
    }
    if (!whole)
      throw EngineError(
          fmt::format("{}: rounding log truncated or corrupt (reading {}: {})", path.string(), what, why));
  };
  const auto read_u64 = [&](const char* what) {
    uint8_t b[8];
    read(b, 8, what);
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | b[i];
    return v;
  };
  std::string magic(kMagic.size(), '\0');
  read(magic.data(), magic.size(), "the header");
  if (magic != kMagic) throw EngineError(fmt::format("{}: not a tribunal rounding log", path.string()));
  StepRoundingLog log;
  log.step = static_cast<int64_t>(read_u64("the step"));
  if (log.step != step)
    throw EngineError(
        fmt::format("{}: rounding log of step {}, expected step {}", path.string(), log.step, step));
  const uint64_t count = read_u64("the node count");
  if (count != nodes)
    throw EngineError(fmt::format("{}: rounding log of {} nodes, but step {}'s graph has {}", path.string(),
                                  count, step, nodes));
  log.nodes.resize(nodes);
  for (size_t n = 0; n < nodes; ++n) {
    RoundingLog& node = log.nodes[n];
    node.count = read_u64("a node's decision count");
    if (node.count != counts[n])
      throw EngineError(fmt::format("{}: node {} logs {} decisions, but its outputs hold {} values",
                                    path.string(), n, node.count, counts[n]));
    node.packed.resize((node.count + 4) / 5);
    read(node.packed.data(), node.packed.size(), "a node's decisions");
  }
  bool end = false;
  try {
    end = file.at_end();
  } catch (const std::runtime_error&) {  // bytes that are no zstd frame: trailing all the same
  }
  if (end && !file.frame_done())
    throw EngineError(
        fmt::format("{}: rounding log truncated or corrupt (its last frame is cut short)", path.string()));
  if (!end)
    throw EngineError(
        fmt::format("{}: trailing bytes after the rounding log of {} nodes", path.string(), nodes));
  return log;
}

}  // namespace tribunal
