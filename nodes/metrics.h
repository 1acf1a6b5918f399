// A node's metrics in the Prometheus text exposition format (version 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/): counters, gauges read at scrape time,
// and histograms with fixed buckets. Served at /metrics (docs/running.md, "Monitoring"). The registry
// and the text are prometheus-cpp's (Debian prometheus-cpp-dev, its core library only: the HTTP serving
// is nodes/http_routes.h); this adds the series read at scrape time, which prometheus-cpp lacks.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace prometheus {
class Counter;
class Histogram;
class Registry;
}  // namespace prometheus

namespace tribunal::nodes {

/// Label pairs of one series, e.g. {{"reason", "wrong_output"}}; values are escaped when rendered.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing count (thread-safe); a handle on a series of a MetricsRegistry.
class Counter {
 public:
  explicit Counter(prometheus::Counter& series) : series_(series) {}
  /// Adds `by` (≥ 0; a negative one is ignored, as prometheus-cpp does).
  void inc(double by = 1);
  double value() const;

 private:
  prometheus::Counter& series_;
};

/// Observations counted into cumulative buckets `le` (upper bounds, ascending, inclusive), with their
/// sum and count (thread-safe); a handle on a series of a MetricsRegistry.
class Histogram {
 public:
  explicit Histogram(prometheus::Histogram& series) : series_(series) {}
  void observe(double value);

 private:
  prometheus::Histogram& series_;
};

/// Bucket bounds for durations in seconds: 1 ms to 60 s.
std::vector<double> latency_buckets();

/// The metrics of one node. Register every series once (at construction of the node; names must be
/// valid Prometheus metric names, `[a-zA-Z_:][a-zA-Z0-9_:]*`, a name keeps one type and help text
/// without newlines, histogram bounds strictly ascend, else std::invalid_argument); the returned
/// references stay valid as long as the registry. render() is thread-safe with updates.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  Counter& counter(const std::string& name, const std::string& help, MetricLabels labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, std::vector<double> bounds,
                       MetricLabels labels = {});
  /// A value read when scraped (e.g. disputes open now).
  void gauge(const std::string& name, const std::string& help, std::function<double()> read,
             MetricLabels labels = {});
  /// A counter kept elsewhere (e.g. net/server.h refused_count), read when scraped.
  void counter_fn(const std::string& name, const std::string& help, std::function<double()> read,
                  MetricLabels labels = {});

  /// Every series, by prometheus::TextSerializer: one HELP and TYPE line per metric name, the names in
  /// registration order, the series of one name ordered by their labels.
  std::string render() const;

 private:
  struct Read;
  void check(const std::string& name, const std::string& help, const char* type);
  mutable std::mutex mu_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::vector<std::pair<std::string, std::string>> types_;  // name, type; registration order
  std::vector<std::unique_ptr<Counter>> counters_;
  std::vector<std::unique_ptr<Histogram>> histograms_;
  std::vector<Read> reads_;
};

/// The content type of render()'s text.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tribunal::nodes
