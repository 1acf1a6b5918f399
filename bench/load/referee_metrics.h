// bench_load's reading of the referee's own latency: the tribunal_referee_handling_seconds histogram
// of its /metrics (nodes/referee_meters.h: a provider frame's arrival → the write of the question it
// caused), scraped before and after a phase and differenced.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tribunal::load_bench {

/// One scrape of a histogram: cumulative counts per upper bound (seconds, ascending, +Inf last), the
/// observations' sum (seconds) and count.
struct HistogramScrape {
  std::vector<std::pair<double, uint64_t>> buckets;
  double sum = 0;
  uint64_t count = 0;
};

/// GETs /metrics from the referee at `url` (ws://host:port/) and reads histogram `name` (its
/// _bucket, _sum and _count lines). Throws NetError when the GET fails, std::runtime_error when the
/// answer is not 200 or lacks the histogram.
HistogramScrape scrape_histogram(const std::string& url, const std::string& name);

/// What was observed between `before` and `after` (scrapes of one histogram): count, mean, the upper
/// bounds of the buckets holding p50, p99 and the largest observation, in milliseconds (a quantile is
/// at most its bound; "inf" beyond the last finite bound), and each bucket's own count as
/// [bound in ms, observations]. Throws std::runtime_error unless both have the same buckets.
nlohmann::json histogram_delta(const HistogramScrape& before, const HistogramScrape& after);

}  // namespace tribunal::load_bench
