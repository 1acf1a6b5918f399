#include "engine/rounding_logs.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <memory>
#include <string_view>
#include <system_error>

#include <fmt/format.h>
#include <zlib.h>

#include "engine/error.h"
#include "ops/thread_pool.h"
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

/// The concatenation of `parts` as one gzip member. Z_RLE ("R"): the packed trits are mostly zero
/// bytes, whose runs deflate's run-length matching finds at a fraction of the default strategy's time,
/// in fewer bytes (docs/performance.md, "Rounding-log mode").
std::vector<uint8_t> gzip_member(std::span<const std::span<const uint8_t>> parts) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_RLE) != Z_OK)  // 15 + 16: a gzip wrapper
    throw EngineError("rounding log: zlib could not start a deflate stream");
  uLong total = 0;
  for (std::span<const uint8_t> p : parts) total += static_cast<uLong>(p.size());
  std::vector<uint8_t> out(deflateBound(&z, total));  // room for all of it: deflate never stalls
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  int rc = Z_OK;
  for (size_t i = 0; i < parts.size(); ++i) {
    z.next_in = const_cast<Bytef*>(parts[i].data());  // zlib's API is not const-correct; it only reads
    z.avail_in = static_cast<uInt>(parts[i].size());  // a piece of at most kMemberBytes
    rc = deflate(&z, i + 1 == parts.size() ? Z_FINISH : Z_NO_FLUSH);
  }
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw EngineError("rounding log: deflate did not finish its stream");
  return out;
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

uint64_t write_rounding_log(const std::filesystem::path& path, const StepRoundingLog& log, ThreadPool* pool) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec)
    throw EngineError(
        fmt::format("{}: cannot create directory: {}", path.parent_path().string(), ec.message()));
  std::vector<uint8_t> head(kMagic.begin(), kMagic.end());
  put_u64(head, static_cast<uint64_t>(log.step));
  put_u64(head, log.nodes.size());
  // The stream cut into pieces of kMemberBytes, each its own gzip member, compressed side by side on the
  // pool: a GPT step's 16 MB of packed trits take deflate ~0.17 s on one core. Concatenated members are
  // one gzip stream to every reader (RFC 1952 §2.2; zlib's gzread, gzip -d).
  constexpr size_t kMemberBytes = size_t{1} << 20;
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
      if (filled == kMemberBytes) {
        pieces.emplace_back();
        filled = 0;
      }
      const size_t n = std::min(part.size(), kMemberBytes - filled);
      pieces.back().push_back(part.first(n));
      part = part.subspan(n);
      filled += n;
    }
  std::vector<std::vector<uint8_t>> members(pieces.size());
  const auto compress = [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k)
      members[static_cast<size_t>(k)] = gzip_member(pieces[static_cast<size_t>(k)]);
  };
  if (pool)
    pool->parallel_for(static_cast<int64_t>(members.size()), compress, 1);
  else
    compress(0, static_cast<int64_t>(members.size()));
  const std::filesystem::path tmp = path.string() + ".tmp";
  uint64_t bytes = 0;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (const std::vector<uint8_t>& m : members) {
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
