#include "engine/data_registry.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {

DataRegistry DataRegistry::debian() {
  DataRegistry r;
  r.add("fashion-mnist", "/usr/share/datasets/fashion-mnist");
  r.add("fortunes", "/usr/share/games/fortunes");
  return r;
}

void DataRegistry::add(const std::string& name, const std::filesystem::path& path) {
  const bool valid = !name.empty() && name.size() <= 64 &&
                     name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
  if (!valid)
    throw EngineError(
        fmt::format("data set name '{}': use 1 to 64 characters of a-z, 0-9, '.', '_', '-'", name));
  if (path.empty()) throw EngineError(fmt::format("data set '{}': empty path", name));
  paths_[name] = std::filesystem::absolute(path);
}

void DataRegistry::add(std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    throw EngineError(fmt::format("--dataset expects NAME=PATH, got '{}'", spec));
  add(std::string(spec.substr(0, eq)), std::filesystem::path(std::string(spec.substr(eq + 1))));
}

const std::filesystem::path& DataRegistry::path(const std::string& name, const std::string& source) const {
  const auto it = paths_.find(name);
  if (it == paths_.end())
    throw EngineError(
        fmt::format("{}: data set '{}' is not registered at this node (its operator registers data sets "
                    "with --dataset NAME=PATH)",
                    source, name));
  return it->second;
}

std::vector<std::string> DataRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, path] : paths_) out.push_back(name);
  return out;
}

}  // namespace tribunal
