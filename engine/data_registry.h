// The data sets a node serves, by name. A job names its training set (`data.name`); only the node's
// operator decides which local file or directory that name means. A job never carries a path, so a
// peer that submits or disputes a job cannot make a provider read any other file than the data sets
// its operator registered (docs/protocol.md, "Threat model").
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tribunal {

/// Name → local path of each data set a node serves.
class DataRegistry {
 public:
  /// Debian's data sets: "fashion-mnist" → /usr/share/datasets/fashion-mnist (package
  /// dataset-fashion-mnist) and "fortunes" → /usr/share/games/fortunes (package fortunes).
  static DataRegistry debian();

  /// Registers (or replaces) `name` → `path`. Names are 1 to 64 characters of [a-z0-9._-]; the path
  /// is made absolute against the current directory. Throws EngineError for a bad name or an empty path.
  void add(const std::string& name, const std::filesystem::path& path);

  /// Parses one "NAME=PATH" (the --dataset option) and adds it. Throws EngineError quoting `spec`.
  void add(std::string_view spec);

  /// The path of `name`. Throws EngineError("<source>: data set '<name>' is not registered at this
  /// node …") when the operator did not register it; the message lists no other name or path.
  const std::filesystem::path& path(const std::string& name, const std::string& source) const;

  /// The registered names, sorted.
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::filesystem::path> paths_;
};

}  // namespace tribunal
