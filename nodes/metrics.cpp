#include "nodes/metrics.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace tribunal::nodes {
namespace {

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Label values escape backslash, double quote and newline; HELP text backslash and newline.
std::string escape(const std::string& s, bool quote) {
  std::string out;
  for (const char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quote)
      out += "\\\"";
    else
      out += c;
  }
  return out;
}

// A sample value: Go's float formatting as Prometheus parses it (+Inf, -Inf, NaN, else shortest round trip).
std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

std::string label_text(const MetricLabels& labels, const std::string& extra_name = {},
                       const std::string& extra = {}) {
  std::string out;
  for (const auto& [k, v] : labels) out += (out.empty() ? "" : ",") + k + "=\"" + escape(v, true) + "\"";
  if (!extra_name.empty()) out += (out.empty() ? "" : ",") + extra_name + "=\"" + extra + "\"";
  return out.empty() ? "" : "{" + out + "}";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end())
    throw std::invalid_argument("histogram bounds must be strictly ascending");
}

void Histogram::observe(double value) {
  // Bucket `le` counts values ≤ its bound.
  const auto i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++counts_[i];
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t total = 0;
  for (const uint64_t c : counts_) s.cumulative.push_back(total += c);
  s.sum = sum_;
  return s;
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

struct MetricsRegistry::Series {
  std::string name, help, type;
  MetricLabels labels;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Histogram> histogram;
  std::function<double()> gauge;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

MetricsRegistry::Series& MetricsRegistry::add(const std::string& name, const std::string& help,
                                              const char* type, MetricLabels labels) {
  if (!valid_name(name)) throw std::invalid_argument("invalid metric name '" + name + "'");
  for (const auto& [k, v] : labels)
    if (!valid_name(k) || k.find(':') != std::string::npos)
      throw std::invalid_argument("invalid label name '" + k + "'");
  std::lock_guard lock(mu_);
  for (const auto& s : series_)
    if (s->name == name && s->type != type)
      throw std::invalid_argument("metric '" + name + "' registered as " + s->type + " and " + type);
  Series& s = *series_.emplace_back(std::make_unique<Series>());
  s.name = name;
  s.help = help;
  s.type = type;
  s.labels = std::move(labels);
  return s;
}

Counter& MetricsRegistry::counter(const std::string& name, const std::string& help, MetricLabels labels) {
  Series& s = add(name, help, "counter", std::move(labels));
  s.counter = std::make_unique<Counter>();
  return *s.counter;
}

Histogram& MetricsRegistry::histogram(const std::string& name, const std::string& help,
                                      std::vector<double> bounds, MetricLabels labels) {
  Series& s = add(name, help, "histogram", std::move(labels));
  s.histogram = std::make_unique<Histogram>(std::move(bounds));
  return *s.histogram;
}

void MetricsRegistry::gauge(const std::string& name, const std::string& help, std::function<double()> read,
                            MetricLabels labels) {
  Series& s = add(name, help, "gauge", std::move(labels));
  s.gauge = std::move(read);
}

void MetricsRegistry::counter_fn(const std::string& name, const std::string& help,
                                 std::function<double()> read, MetricLabels labels) {
  Series& s = add(name, help, "counter", std::move(labels));
  s.gauge = std::move(read);
}

std::string MetricsRegistry::render() const {
  std::lock_guard lock(mu_);
  std::string out;
  std::vector<bool> done(series_.size(), false);
  for (size_t i = 0; i < series_.size(); ++i) {
    if (done[i]) continue;
    const Series& first = *series_[i];
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", first.name, escape(first.help, false), first.name,
                       first.type);
    for (size_t j = i; j < series_.size(); ++j) {
      const Series& s = *series_[j];
      if (s.name != first.name) continue;
      done[j] = true;
      if (s.counter) out += s.name + label_text(s.labels) + " " + number(s.counter->value()) + "\n";
      if (s.gauge) out += s.name + label_text(s.labels) + " " + number(s.gauge()) + "\n";
      if (s.histogram) {
        const Histogram::Snapshot h = s.histogram->snapshot();
        for (size_t b = 0; b <= h.bounds.size(); ++b)
          out += s.name + "_bucket" +
                 label_text(s.labels, "le", b < h.bounds.size() ? number(h.bounds[b]) : "+Inf") + " " +
                 std::to_string(h.cumulative[b]) + "\n";
        out += s.name + "_sum" + label_text(s.labels) + " " + number(h.sum) + "\n";
        out += s.name + "_count" + label_text(s.labels) + " " + std::to_string(h.cumulative.back()) + "\n";
      }
    }
  }
  return out;
}

}  // namespace tribunal::nodes
