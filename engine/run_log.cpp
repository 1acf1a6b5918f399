#include "engine/run_log.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {
namespace {

constexpr const char* kLossHeader = "step,loss\n";
constexpr const char* kResourceHeader = "step,wall_seconds,cpu_seconds,utilisation\n";

// One line of each file; float32 losses printed exactly (9 significant digits round-trip).
std::string loss_line(const LossRecord& r) {
  return fmt::format("{},{:.9g}\n", r.step, r.loss);
}
std::string resource_line(const ResourceSample& s) {
  return fmt::format("{},{:.9g},{:.9g},{:.6g}\n", s.step, s.wall.count(), s.cpu.count(), s.utilisation);
}

// Writes `text` at the end of `f` and flushes it, so a reader sees whole lines as they come.
void put(std::FILE* f, const std::filesystem::path& path, const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fflush(f) != 0)
    throw EngineError(fmt::format("{}: write failed: {}", path.string(), std::strerror(errno)));
}

// Writes `text` to path through a temporary file renamed over it.
void write_atomically(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw EngineError(fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw EngineError(fmt::format("{}: write failed", tmp.string()));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    throw EngineError(fmt::format("{}: cannot rename to {}: {}", tmp.string(), path.string(), ec.message()));
}

// The data lines of a CSV file (header `header` checked and skipped), each split at commas; empty
// when the file does not exist.
std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& path, const std::string& header,
                                               size_t columns) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  if (!in) {
    if (!std::filesystem::exists(path)) return rows;
    throw EngineError(fmt::format("{}: cannot read", path.string()));
  }
  std::string line;
  if (!std::getline(in, line) || line != header)
    throw EngineError(fmt::format("{}:1: expected the header '{}'", path.string(), header));
  for (size_t n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    if (cells.size() != columns)
      throw EngineError(fmt::format("{}:{}: expected {} comma-separated values, got {}", path.string(), n,
                                    columns, cells.size()));
    rows.push_back(std::move(cells));
  }
  return rows;
}

template <class T>
T parse_number(const std::string& text, const std::filesystem::path& path, size_t line) {
  try {
    size_t used = 0;
    T v;
    if constexpr (std::is_same_v<T, int64_t>)
      v = std::stoll(text, &used);
    else
      v = static_cast<T>(std::stod(text, &used));
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  throw EngineError(fmt::format("{}:{}: '{}' is not a number", path.string(), line, text));
}

}  // namespace

std::filesystem::path loss_log_path(const std::filesystem::path& dir) {
  return dir / "losses.csv";
}
std::filesystem::path resource_log_path(const std::filesystem::path& dir) {
  return dir / "resources.csv";
}

void write_loss_log(const std::filesystem::path& path, const std::vector<LossRecord>& records) {
  std::string text = kLossHeader;
  for (const LossRecord& r : records) text += loss_line(r);
  write_atomically(path, text);
}

void write_resource_log(const std::filesystem::path& path, const std::vector<ResourceSample>& samples) {
  std::string text = kResourceHeader;
  for (const ResourceSample& s : samples) text += resource_line(s);
  write_atomically(path, text);
}

RunLogAppender::RunLogAppender(const std::filesystem::path& dir,
                               const std::vector<LossRecord>& earlier_losses,
                               const std::vector<ResourceSample>& earlier_samples)
    : loss_path_(loss_log_path(dir)), resource_path_(resource_log_path(dir)) {
  std::string losses = kLossHeader, resources = kResourceHeader;
  for (const LossRecord& r : earlier_losses) losses += loss_line(r);
  for (const ResourceSample& x : earlier_samples) resources += resource_line(x);
  losses_ = std::fopen(loss_path_.c_str(), "wb");
  if (!losses_)
    throw EngineError(fmt::format("{}: cannot write: {}", loss_path_.string(), std::strerror(errno)));
  resources_ = std::fopen(resource_path_.c_str(), "wb");
  if (!resources_)
    throw EngineError(fmt::format("{}: cannot write: {}", resource_path_.string(), std::strerror(errno)));
  put(losses_, loss_path_, losses);
  put(resources_, resource_path_, resources);
}

RunLogAppender::~RunLogAppender() {
  if (losses_) std::fclose(losses_);
  if (resources_) std::fclose(resources_);
}

void RunLogAppender::append(const LossRecord& loss, const ResourceSample& sample) {
  put(losses_, loss_path_, loss_line(loss));
  put(resources_, resource_path_, resource_line(sample));
}

std::vector<LossRecord> read_loss_log(const std::filesystem::path& path) {
  std::vector<LossRecord> out;
  size_t line = 2;
  for (const auto& cells : read_csv(path, "step,loss", 2))
    out.push_back({parse_number<int64_t>(cells[0], path, line), parse_number<float>(cells[1], path, line)}),
        ++line;
  return out;
}

std::vector<ResourceSample> read_resource_log(const std::filesystem::path& path) {
  std::vector<ResourceSample> out;
  size_t line = 2;
  for (const auto& cells : read_csv(path, "step,wall_seconds,cpu_seconds,utilisation", 4)) {
    ResourceSample s;
    s.step = parse_number<int64_t>(cells[0], path, line);
    s.wall = std::chrono::duration<double>(parse_number<double>(cells[1], path, line));
    s.cpu = std::chrono::duration<double>(parse_number<double>(cells[2], path, line));
    s.utilisation = parse_number<double>(cells[3], path, line);
    out.push_back(s);
    ++line;
  }
  return out;
}

std::chrono::duration<double> process_cpu_time() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

ResourceSample StepMeter::done(int threads) const {
  ResourceSample s{step_, std::chrono::steady_clock::now() - wall0_, process_cpu_time() - cpu0_, 0.0};
  // Capped at 1: the checkpoint writer's thread may add CPU time to a step beyond its training threads'.
  if (s.wall.count() > 0)
    s.utilisation = std::min(1.0, s.cpu.count() / (s.wall.count() * static_cast<double>(threads)));
  return s;
}

}  // namespace tribunal
