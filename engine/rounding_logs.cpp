#include "engine/rounding_logs.h"

#include <cstring>
#include <memory>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <zlib.h>

#include "engine/error.h"
#include "protocol/tensor_hash.h"

namespace tribunal {
namespace {

constexpr std::string_view kMagic = "tribunal rounding log 1\n";

struct GzClose {
  void operator()(gzFile f) const { gzclose(f); }
};
using Gz = std::unique_ptr<std::remove_pointer_t<gzFile>, GzClose>;

void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

}  // namespace

Digest rounding_log_leaf(const RoundingLog& log) {
  const int64_t shape[1] = {static_cast<int64_t>(log.count)};
  return tensor_leaf(DType::Trits, shape, std::as_bytes(std::span<const uint8_t>(log.packed)));
}

std::filesystem::path rounding_log_path(const std::filesystem::path& dir, int64_t step) {
  return dir / "rounding_logs" / fmt::format("step_{:08}.rlog.gz", step);
}

std::filesystem::path log_header_path(const std::filesystem::path& dir, int64_t step) {
  return dir / "log_headers" / fmt::format("step_{:08}.bin", step);
}

uint64_t write_rounding_log(const std::filesystem::path& path, const StepRoundingLog& log) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    throw EngineError(
        fmt::format("{}: cannot create directory: {}", path.parent_path().string(), ec.message()));
  std::vector<uint8_t> head(kMagic.begin(), kMagic.end());
  put_u64(head, static_cast<uint64_t>(log.step));
  put_u64(head, log.nodes.size());
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    // Z_RLE ("R"): the packed trits are mostly zero bytes, whose runs deflate's run-length matching
    // finds at a fraction of the default strategy's time, in fewer bytes (docs/performance.md,
    // "Rounding-log mode"). Any deflate stream reads back the same.
    Gz gz(gzopen(tmp.c_str(), "wb6R"));
    if (!gz)
      throw EngineError(fmt::format("{}: cannot write rounding log: {}", tmp.string(), std::strerror(errno)));
    gzbuffer(gz.get(), 1u << 20);
    const auto write = [&](const void* p, size_t n) {
      if (n > 0 && gzwrite(gz.get(), p, static_cast<unsigned>(n)) != static_cast<int>(n))
        throw EngineError(fmt::format("{}: cannot write rounding log", tmp.string()));
    };
    write(head.data(), head.size());
    for (const RoundingLog& node : log.nodes) {
      std::vector<uint8_t> count;
      put_u64(count, node.count);
      write(count.data(), count.size());
      write(node.packed.data(), node.packed.size());  // one node's log is far below 2^31 bytes
    }
    if (gzclose(gz.release()) != Z_OK)
      throw EngineError(fmt::format("{}: cannot finish rounding log", tmp.string()));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw EngineError(fmt::format("{}: cannot rename rounding log: {}", path.string(), ec.message()));
  return std::filesystem::file_size(path);
}

StepRoundingLog read_rounding_log(const std::filesystem::path& path, int64_t step,
                                  std::span<const uint64_t> counts) {
  const size_t nodes = counts.size();
  Gz gz(gzopen(path.c_str(), "rb"));
  if (!gz)
    throw EngineError(fmt::format("{}: cannot open rounding log: {}", path.string(), std::strerror(errno)));
  const auto read = [&](void* p, size_t n, const char* what) {
    if (n == 0) return;
    if (gzread(gz.get(), p, static_cast<unsigned>(n)) != static_cast<int>(n))
      throw EngineError(
          fmt::format("{}: rounding log truncated or corrupt (reading {})", path.string(), what));
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
  char extra;
  if (gzread(gz.get(), &extra, 1) != 0)
    throw EngineError(
        fmt::format("{}: trailing bytes after the rounding log of {} nodes", path.string(), nodes));
  return log;
}

}  // namespace tribunal
