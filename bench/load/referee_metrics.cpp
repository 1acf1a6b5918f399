#include "bench/load/referee_metrics.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "net/http_get.h"

namespace tribunal::load_bench {

HistogramScrape scrape_histogram(const std::string& url, const std::string& name) {
  const HttpGetReply reply = http_get(url, "/metrics");
  if (reply.status != 200)
    throw std::runtime_error("the referee's /metrics answered " + std::to_string(reply.status));
  HistogramScrape h;
  bool have_count = false;
  std::istringstream in(reply.body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "_", 0) != 0) continue;
    const std::string rest = line.substr(name.size() + 1);
    const double value = std::stod(line.substr(line.rfind(' ') + 1));
    if (rest.rfind("bucket{le=\"", 0) == 0) {
      const std::string le = rest.substr(11, rest.find('"', 11) - 11);
      const double bound = le == "+Inf" ? std::numeric_limits<double>::infinity() : std::stod(le);
      h.buckets.emplace_back(bound, static_cast<uint64_t>(value));
    } else if (rest.rfind("sum ", 0) == 0) {
      h.sum = value;
    } else if (rest.rfind("count ", 0) == 0) {
      h.count = static_cast<uint64_t>(value);
      have_count = true;
    }
  }
  if (!have_count || h.buckets.empty()) throw std::runtime_error("the referee's /metrics lacks " + name);
  return h;
}

nlohmann::json histogram_delta(const HistogramScrape& before, const HistogramScrape& after) {
  if (before.buckets.size() != after.buckets.size())
    throw std::runtime_error("histogram buckets changed between scrapes");
  const uint64_t count = after.count - before.count;
  // The bound of the first bucket holding at least q of the observations, in ms.
  auto bound_ms = [&](double q) -> nlohmann::json {
    const double need = std::ceil(q * static_cast<double>(count));
    for (size_t i = 0; i < after.buckets.size(); ++i) {
      const auto [bound, cumulative] = after.buckets[i];
      if (static_cast<double>(cumulative - before.buckets[i].second) >= need && need > 0)
        return std::isinf(bound) ? nlohmann::json("inf") : nlohmann::json(bound * 1000);
    }
    return nullptr;
  };
  // [upper bound (ms, or "inf"), observations in this bucket alone], ascending.
  nlohmann::json buckets = nlohmann::json::array();
  for (size_t i = 0; i < after.buckets.size(); ++i) {
    const double bound = after.buckets[i].first;
    const uint64_t below = i == 0 ? 0 : after.buckets[i - 1].second - before.buckets[i - 1].second;
    buckets.push_back({std::isinf(bound) ? nlohmann::json("inf") : nlohmann::json(bound * 1000),
                       after.buckets[i].second - before.buckets[i].second - below});
  }
  return {{"observations", count},
          {"mean_ms", count ? (after.sum - before.sum) * 1000 / static_cast<double>(count) : 0.0},
          {"p50_le_ms", bound_ms(0.50)},
          {"p99_le_ms", bound_ms(0.99)},
          {"max_le_ms", bound_ms(1.0)},
          {"buckets_ms", buckets}};
}

}  // namespace tribunal::load_bench
