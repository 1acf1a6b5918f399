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
  std::string text = "step,loss\n";
  for (const LossRecord& r : records) text += fmt::format("{},{:.9g}\n", r.step, r.loss);
  write_atomically(path, text);
}

void write_resource_log(const std::filesystem::path& path, const std::vector<ResourceSample>& samples) {
  std::string text = "step,wall_seconds,cpu_seconds,utilisation\n";
  for (const ResourceSample& s : samples)
    text += fmt::format("{},{:.9g},{:.9g},{:.6g}\n", s.step, s.wall.count(), s.cpu.count(), s.utilisation);
  write_atomically(path, text);
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
