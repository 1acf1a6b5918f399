// A node's metrics in the Prometheus text exposition format (version 0.0.4,
// https://prometheus.io/docs/instrumenting/exposition_formats/): counters, gauges read at scrape time,
// and histograms with fixed buckets. Served at /metrics (docs/running.md, "Monitoring").
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace tribunal::nodes {

/// Label pairs of one series, e.g. {{"reason", "wrong_output"}}; values are escaped when rendered.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

/// A monotonically increasing count (thread-safe).
class Counter {
 public:
  void inc(double by = 1) {
    double v = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(v, v + by, std::memory_order_relaxed)) {
    }
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

/// Observations counted into cumulative buckets `le` (upper bounds, ascending), with their sum and
/// count (thread-safe).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  /// The bounds and each bucket's cumulative count (the last one is +Inf: the total count), and the sum.
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  ///< bounds.size() + 1 entries
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last: above every bound
  double sum_ = 0;
};

/// Bucket bounds for durations in seconds: 1 ms to 60 s.
std::vector<double> latency_buckets();

/// The metrics of one node. Register every series once (at construction of the node; names must be
/// valid Prometheus metric names, `[a-zA-Z_:][a-zA-Z0-9_:]*`, else std::invalid_argument); the returned
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

  /// Every series, grouped by metric name in registration order, with one HELP and TYPE line each.
  std::string render() const;

 private:
  struct Series;
  Series& add(const std::string& name, const std::string& help, const char* type, MetricLabels labels);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Series>> series_;
};

/// The content type of render()'s text.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace tribunal::nodes
