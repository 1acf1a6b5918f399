#include "nodes/metrics.h"

#include <prometheus/check_names.h>
#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace tribunal::nodes {
namespace {

prometheus::Labels label_map(const MetricLabels& labels) {
  prometheus::Labels out;
  for (const auto& [k, v] : labels) {
    if (!prometheus::CheckLabelName(k)) throw std::invalid_argument("invalid label name '" + k + "'");
    if (!out.emplace(k, v).second) throw std::invalid_argument("label '" + k + "' given twice");
  }
  return out;
}

}  // namespace

void Counter::inc(double by) {
  series_.Increment(by);
}
double Counter::value() const {
  return series_.Value();
}
void Histogram::observe(double value) {
  series_.Observe(value);
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// A series read at scrape time (gauge or counter_fn): prometheus-cpp's metrics only hold values set
// beforehand, so these are added to its collected families by render().
struct MetricsRegistry::Read {
  std::string name, help;
  prometheus::MetricType type;
  std::vector<prometheus::ClientMetric::Label> labels;
  std::function<double()> read;
};

MetricsRegistry::MetricsRegistry() : registry_(std::make_unique<prometheus::Registry>()) {}
MetricsRegistry::~MetricsRegistry() = default;

// One type per name across prometheus-cpp's families and the series read at scrape time (the registry
// alone checks only its own families); HELP text is written unescaped by prometheus-cpp 1.0, so a
// newline would break the exposition.
void MetricsRegistry::check(const std::string& name, const std::string& help, const char* type) {
  if (!prometheus::CheckMetricName(name)) throw std::invalid_argument("invalid metric name '" + name + "'");
  if (help.find_first_of("\n\\") != std::string::npos)
    throw std::invalid_argument("help text of '" + name + "' has a newline or backslash");
  for (const auto& [n, t] : types_)
    if (n == name) {
      if (t != type) throw std::invalid_argument("metric '" + name + "' registered as " + t + " and " + type);
      return;
    }
  types_.emplace_back(name, type);
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, MetricLabels labels) {
  std::lock_guard lock(mu_);
  check(name, help, "counter");
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  return *counters_.emplace_back(std::make_unique<Counter>(family.Add(label_map(labels))));
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      std::vector<double> bounds, MetricLabels labels) {
  // prometheus-cpp refuses bounds out of order, not repeated ones.
  if (std::adjacent_find(bounds.begin(), bounds.end(), std::greater_equal<>()) != bounds.end())
    throw std::invalid_argument("histogram bounds must be strictly ascending");
  std::lock_guard lock(mu_);
  check(name, help, "histogram");
  auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
  return *histograms_.emplace_back(std::make_unique<Histogram>(family.Add(label_map(labels), bounds)));
}

void MetricsRegistry::gauge(const std::string& name, const std::string& help, std::function<double()> read,
                            MetricLabels labels) {
  std::vector<prometheus::ClientMetric::Label> pairs;
  for (const auto& [k, v] : label_map(labels)) pairs.push_back({k, v});
  std::lock_guard lock(mu_);
  check(name, help, "gauge");
  reads_.push_back({name, help, prometheus::MetricType::Gauge, std::move(pairs), std::move(read)});
}

void MetricsRegistry::counter_fn(const std::string& name, const std::string& help,
                                 std::function<double()> read, MetricLabels labels) {
  std::vector<prometheus::ClientMetric::Label> pairs;
  for (const auto& [k, v] : label_map(labels)) pairs.push_back({k, v});
  std::lock_guard lock(mu_);
  check(name, help, "counter");
  reads_.push_back({name, help, prometheus::MetricType::Counter, std::move(pairs), std::move(read)});
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mu_);
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (const Read& r : reads_) {
    auto family = std::find_if(families.begin(), families.end(),
                               [&](const prometheus::MetricFamily& f) { return f.name == r.name; });
    if (family == families.end()) {
      families.push_back({r.name, r.help, r.type, {}});
      family = families.end() - 1;
    }
    prometheus::ClientMetric& m = family->metric.emplace_back();
    m.label = r.labels;
    (r.type == prometheus::MetricType::Gauge ? m.gauge.value : m.counter.value) = r.read();
  }
  // The registry groups its families by type and keeps a family's series in a hash map: order them
  // (names as registered, series by labels) so that a scrape reads the same from one to the next.
  std::map<std::string, size_t> rank;
  for (const auto& [name, type] : types_) rank.emplace(name, rank.size());
  std::sort(families.begin(), families.end(),
            [&](const auto& a, const auto& b) { return rank.at(a.name) < rank.at(b.name); });
  for (prometheus::MetricFamily& f : families)
    std::sort(f.metric.begin(), f.metric.end(),
              [](const auto& a, const auto& b) { return a.label < b.label; });
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace tribunal::nodes
