#include "engine/toml_reader.h"

#include <cmath>
#include <set>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/suggest.h"

namespace tribunal {

std::string toml_where(const std::string& source, const toml::source_region& r) {
  return fmt::format("{}:{}:{}", source, r.begin.line, r.begin.column);
}

toml::table parse_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw EngineError(fmt::format("{}: {}", toml_where(source, e.source()), e.description()));
  }
}

TableReader::TableReader(const toml::table& root, std::string name, std::string source, bool required)
    : source_(std::move(source)), name_(std::move(name)) {
  const toml::node* node = root.get(name_);
  if (!node) {
    if (required) throw EngineError(fmt::format("{}: missing table [{}]", source_, name_));
    return;
  }
  table_ = node->as_table();
  if (!table_)
    throw EngineError(fmt::format("{}: '{}' must be a table", toml_where(source_, node->source()), name_));
}

TableReader::TableReader(const toml::table* table, std::string name, std::string source)
    : source_(std::move(source)), name_(std::move(name)), table_(table) {}

void TableReader::allow_only(std::initializer_list<std::string_view> allowed) const {
  if (!table_) return;
  std::set<std::string_view> ok(allowed);
  for (auto&& [key, value] : *table_)
    if (!ok.count(key.str()))
      throw EngineError(fmt::format("{}: unknown key '{}' in [{}]{}", toml_where(source_, value.source()),
                                    key.str(), name_, did_you_mean(key.str(), {allowed})));
}

int64_t TableReader::integer(const char* key, int64_t fallback, bool required, int64_t lo, int64_t hi) const {
  const toml::node* n = find(key, required);
  if (!n) return fallback;
  auto v = n->value<int64_t>();
  if (!n->is_integer() || !v) bad(n, key, "an integer");
  if (*v < lo || *v > hi)
    throw EngineError(fmt::format("{}: {}.{} = {} is out of range [{}, {}]", toml_where(source_, n->source()),
                                  name_, key, *v, lo, hi));
  return *v;
}

float TableReader::number(const char* key, float fallback, double lo, double hi, bool hi_inclusive) const {
  const toml::node* n = find(key, false);
  if (!n) return fallback;
  auto v = n->value<double>();
  if (!(n->is_floating_point() || n->is_integer()) || !v) bad(n, key, "a number");
  const bool ok = std::isfinite(*v) && *v >= lo && (hi_inclusive ? *v <= hi : *v < hi);
  if (!ok)
    throw EngineError(fmt::format("{}: {}.{} = {} is out of range [{}, {}{}",
                                  toml_where(source_, n->source()), name_, key, *v, lo, hi,
                                  hi_inclusive ? "]" : ")"));
  return static_cast<float>(*v);
}

double TableReader::real(const char* key, double fallback, double lo, double hi) const {
  const toml::node* n = find(key, false);
  if (!n) return fallback;
  auto v = n->value<double>();
  if (!(n->is_floating_point() || n->is_integer()) || !v) bad(n, key, "a number");
  if (!std::isfinite(*v) || *v < lo || *v > hi)
    throw EngineError(fmt::format("{}: {}.{} = {} is out of range [{}, {}]", toml_where(source_, n->source()),
                                  name_, key, *v, lo, hi));
  return *v;
}

std::string TableReader::string(const char* key, const std::string& fallback, bool required) const {
  const toml::node* n = find(key, required);
  if (!n) return fallback;
  auto v = n->value<std::string>();
  if (!n->is_string() || !v) bad(n, key, "a string");
  return *v;
}

bool TableReader::boolean(const char* key, bool fallback) const {
  const toml::node* n = find(key, false);
  if (!n) return fallback;
  auto v = n->value<bool>();
  if (!n->is_boolean() || !v) bad(n, key, "true or false");
  return *v;
}

std::vector<int64_t> TableReader::integers(const char* key, std::vector<int64_t> fallback) const {
  const toml::node* n = find(key, false);
  if (!n) return fallback;
  const toml::array* arr = n->as_array();
  if (!arr) bad(n, key, "an array of integers");
  std::vector<int64_t> out;
  for (const toml::node& e : *arr) {
    auto v = e.value<int64_t>();
    if (!e.is_integer() || !v) bad(&e, key, "an array of integers");
    out.push_back(*v);
  }
  return out;
}

std::string TableReader::location(const char* key) const {
  const toml::node* n = table_ ? table_->get(key) : nullptr;
  return n ? toml_where(source_, n->source()) : source_;
}

const toml::node* TableReader::find(const char* key, bool required) const {
  const toml::node* n = table_ ? table_->get(key) : nullptr;
  if (!n && required) throw EngineError(fmt::format("{}: missing key {}.{}", source_, name_, key));
  return n;
}

void TableReader::bad(const toml::node* n, const char* key, const char* expected) const {
  throw EngineError(
      fmt::format("{}: {}.{} must be {}", toml_where(source_, n->source()), name_, key, expected));
}

}  // namespace tribunal
