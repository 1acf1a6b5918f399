#include "nodes/progress_poll.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/progress.h"
#include "net/http_get.h"

namespace tribunal::nodes {
namespace {

constexpr double kMaxExact = 9007199254740992.0;  // 2^53: a gauge beyond it is no count of steps

// The value of the unlabelled sample `name` in a Prometheus text; nullopt when absent or not a
// finite number in [0, 2^53].
std::optional<double> gauge(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() <= name.size() || line.compare(0, name.size(), name) != 0 || line[name.size()] != ' ')
      continue;
    const char* first = line.data() + name.size() + 1;
    const char* last = line.data() + line.size();
    double v = 0;
    const auto [end, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || (end != last && *end != ' ') || !std::isfinite(v) || v < 0 || v > kMaxExact)
      return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace

std::optional<TrainingProgress> parse_training_progress(const std::string& text) {
  const auto step = gauge(text, "tribunal_provider_training_step");
  const auto steps = gauge(text, "tribunal_provider_training_job_steps");
  const auto rate = gauge(text, "tribunal_provider_training_steps_per_second");
  if (!step || !steps || !rate || *steps == 0 || *step > *steps) return std::nullopt;
  return TrainingProgress{static_cast<int64_t>(*step), static_cast<int64_t>(*steps), *rate};
}

std::string training_progress_text(const TrainingProgress& p) {
  std::string s = fmt::format("step {}/{}", p.step, p.steps);
  if (p.steps_per_second > 0)
    s += fmt::format(", {}, ETA {}", format_rate(p.steps_per_second),
                     format_duration(std::chrono::duration<double>(static_cast<double>(p.steps - p.step) /
                                                                   p.steps_per_second)));
  return s;
}

std::optional<DisputeLevel> parse_dispute_level(const std::string& body, const Digest& id) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("disputes") || !doc["disputes"].is_array())
    return std::nullopt;
  const std::string hex = to_hex(id);
  for (const nlohmann::json& d : doc["disputes"]) {
    if (!d.is_object() || !d.contains("id") || d["id"] != hex) continue;
    if (!d.contains("progress") || !d["progress"].is_object()) return std::nullopt;
    const nlohmann::json& p = d["progress"];
    const auto count = [&](const char* key) -> std::optional<uint64_t> {
      if (!p.contains(key) || !p[key].is_number_unsigned()) return std::nullopt;
      return p[key].get<uint64_t>();
    };
    DisputeLevel out;
    const auto level = count("level"), round = count("round"), leaves = count("leaves");
    if (!level || !round || !leaves || *level < 1 || *level > 3 || !p.contains("phase") ||
        !p["phase"].is_string())
      return std::nullopt;
    out.phase = p["phase"].get<std::string>();
    if (out.phase.empty() || out.phase.size() > 32 ||
        out.phase.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") != std::string::npos)
      return std::nullopt;
    out.level = static_cast<int>(*level);
    out.round = *round;
    out.leaves = *leaves;
    if (p.contains("range") && p["range"].is_array()) {
      const nlohmann::json& r = p["range"];
      if (r.size() != 2 || !r[0].is_number_unsigned() || !r[1].is_number_unsigned()) return std::nullopt;
      const uint64_t lo = r[0].get<uint64_t>(), hi = r[1].get<uint64_t>();
      if (lo >= hi || hi > out.leaves) return std::nullopt;
      out.range = {lo, hi};
    }
    return out;
  }
  return std::nullopt;
}

std::string dispute_level_text(const DisputeLevel& d) {
  std::string s = fmt::format("level {} ({}), round {}", d.level, d.phase, d.round);
  if (d.range) s += fmt::format(", range [{}, {}) of {}", d.range->first, d.range->second, d.leaves);
  return s;
}

std::optional<std::string> ProgressPoll::get(const std::string& url, const char* path, size_t limit,
                                             std::string* why) const {
  try {
    HttpGetReply r = http_get(url, path, {timeout_, limit, tls_});
    if (r.status == 200) return std::move(r.body);
    if (why) *why = fmt::format("{}: {} answered HTTP {}", url, path, r.status);
  } catch (const std::exception& e) {
    if (why) *why = e.what();
  }
  return std::nullopt;
}

std::optional<TrainingProgress> ProgressPoll::training(const std::string& provider, int64_t steps,
                                                       std::string* why) const {
  const auto body = get(provider, "/metrics", size_t{1} << 20, why);
  if (!body) return std::nullopt;
  auto p = parse_training_progress(*body);
  if (!p || p->steps != steps) {
    if (why) *why = fmt::format("{}: /metrics shows no training of this job", provider);
    return std::nullopt;
  }
  return p;
}

std::optional<DisputeLevel> ProgressPoll::dispute(const std::string& referee, const Digest& id,
                                                  std::string* why) const {
  const auto body = get(referee, "/disputes.json", size_t{4} << 20, why);
  if (!body) return std::nullopt;
  auto d = parse_dispute_level(*body, id);
  if (!d && why) *why = fmt::format("{}: /disputes.json shows no progress of this dispute", referee);
  return d;
}

}  // namespace tribunal::nodes
