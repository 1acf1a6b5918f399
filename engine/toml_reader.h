// Strict reading of TOML tables (toml++) for the files people write by hand — job specs and
// scenario scripts: a fixed set of allowed keys per table, typed accessors with ranges, and every
// error as EngineError("<file>:<line>:<column>: <what>") so a typo points at its line.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

namespace tribunal {

/// "file:line:column" of a region of a parsed TOML document.
std::string toml_where(const std::string& source, const toml::source_region& region);

/// Parses TOML text; a syntax error becomes EngineError("file:line:column: description").
toml::table parse_toml(std::string_view text, const std::string& source);

/// One table of a TOML document. An absent table (nullptr) reads as all defaults.
class TableReader {
 public:
  /// The table `name` of `root`; EngineError if `required` and missing, or if it is not a table.
  TableReader(const toml::table& root, std::string name, std::string source, bool required);
  /// A table already found (e.g. an element of an array of tables); `name` is used in messages.
  TableReader(const toml::table* table, std::string name, std::string source);

  bool present() const { return table_ != nullptr; }
  const toml::table* table() const { return table_; }

  /// Throws on any key not in `allowed`.
  void allow_only(std::initializer_list<std::string_view> allowed) const;
  /// An integer in [lo, hi]; `fallback` when absent and not required.
  int64_t integer(const char* key, int64_t fallback, bool required, int64_t lo, int64_t hi) const;
  /// A float32 hyperparameter from a TOML number, rounded to nearest float32, checked in [lo, hi).
  float number(const char* key, float fallback, double lo, double hi, bool hi_inclusive = false) const;
  /// A finite double in [lo, hi].
  double real(const char* key, double fallback, double lo, double hi) const;
  std::string string(const char* key, const std::string& fallback, bool required = false) const;
  bool boolean(const char* key, bool fallback) const;
  std::vector<int64_t> integers(const char* key, std::vector<int64_t> fallback) const;
  /// "file:line:column" of `key`, or the file name if absent.
  std::string location(const char* key) const;

 private:
  const toml::node* find(const char* key, bool required) const;
  [[noreturn]] void bad(const toml::node* n, const char* key, const char* expected) const;

  std::string source_;
  std::string name_;
  const toml::table* table_ = nullptr;
};

}  // namespace tribunal
