#include "engine/data_registry.h"

#include <map>
#include <utility>

#include <fmt/format.h>

#include "engine/error.h"

namespace tribunal {

DataRegistry DataRegistry::debian() {
  DataRegistry r;
  r.add("fashion-mnist", "/usr/share/datasets/fashion-mnist");
  r.add("fortunes", "/usr/share/games/fortunes");
  return r;
}

namespace {

// Adds name → absolute(path) to `paths`; `what` names the kind in errors ("data set", "weights").
void add_entry(std::map<std::string, std::filesystem::path>& paths, const char* what, const std::string& name,
               const std::filesystem::path& path) {
  const bool valid = !name.empty() && name.size() <= 64 &&
                     name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
  if (!valid)
    throw EngineError(
        fmt::format("{} name '{}': use 1 to 64 characters of a-z, 0-9, '.', '_', '-'", what, name));
  if (path.empty()) throw EngineError(fmt::format("{} '{}': empty path", what, name));
  paths[name] = std::filesystem::absolute(path);
}

// Splits "NAME=PATH"; `option` names the command-line option in errors.
std::pair<std::string, std::filesystem::path> split_spec(std::string_view spec, const char* option) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size())
    throw EngineError(fmt::format("{} expects NAME=PATH, got '{}'", option, spec));
  return {std::string(spec.substr(0, eq)), std::filesystem::path(std::string(spec.substr(eq + 1)))};
}

}  // namespace

void DataRegistry::add(const std::string& name, const std::filesystem::path& path) {
  add_entry(paths_, "data set", name, path);
}

void DataRegistry::add(std::string_view spec) {
  const auto [name, path] = split_spec(spec, "--dataset");
  add(name, path);
}

void DataRegistry::add_weights(const std::string& name, const std::filesystem::path& path) {
  add_entry(weights_, "weights", name, path);
}

void DataRegistry::add_weights(std::string_view spec) {
  const auto [name, path] = split_spec(spec, "--weights");
  add_weights(name, path);
}

const std::filesystem::path& DataRegistry::weights_path(const std::string& name,
                                                        const std::string& source) const {
  const auto it = weights_.find(name);
  if (it == weights_.end())
    throw EngineError(
        fmt::format("{}: weights '{}' (model.init) are not registered at this node (its operator registers "
                    "weights with --weights NAME=PATH)",
                    source, name));
  return it->second;
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

void DataRegistry::add_model(const std::string& name, const std::filesystem::path& path) {
  add_entry(models_, "model file", name, path);
}

void DataRegistry::add_model(std::string_view spec) {
  const auto [name, path] = split_spec(spec, "--model");
  add_model(name, path);
}

const std::filesystem::path& DataRegistry::model_path(const std::string& name,
                                                      const std::string& source) const {
  const auto it = models_.find(name);
  if (it == models_.end())
    throw EngineError(
        fmt::format("{}: model file '{}' (model.file) is not registered at this node (its operator registers "
                    "model files with --model NAME=PATH)",
                    source, name));
  return it->second;
}

}  // namespace tribunal
