// The data sets, initial weights and model files a node serves, by name. A job names its training set
// (`data.name`), when it starts from pretrained weights their file (`model.init`), and when it trains
// an imported model its ONNX file (`model.file`); only the node's operator
// decides which local file or directory each name means. A job never carries a path, so a
// peer that submits or disputes a job cannot make a provider read any other file than the data sets
// its operator registered (docs/protocol.md, "Threat model").
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tribunal {

/// Name → local path of each data set, weights file and model file a node serves (three separate name
/// spaces).
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

  /// Registers (or replaces) the weights file `name` → `path` (a safetensors file, engine/init_weights.h),
  /// with the same name rules as a data set. Throws EngineError for a bad name or an empty path.
  void add_weights(const std::string& name, const std::filesystem::path& path);

  /// Parses one "NAME=PATH" (the --weights option) and adds it. Throws EngineError quoting `spec`.
  void add_weights(std::string_view spec);

  /// The path of the weights `name`. Throws EngineError("<source>: weights '<name>' (model.init) are not
  /// registered at this node …") when the operator did not register them.
  const std::filesystem::path& weights_path(const std::string& name, const std::string& source) const;

  /// Registers (or replaces) the ONNX model file `name` → `path` (docs/onnx.md), with the same name
  /// rules as a data set. Throws EngineError for a bad name or an empty path.
  void add_model(const std::string& name, const std::filesystem::path& path);

  /// Parses one "NAME=PATH" (the --model option) and adds it. Throws EngineError quoting `spec`.
  void add_model(std::string_view spec);

  /// The path of the model file `name`. Throws EngineError("<source>: model file '<name>' (model.file)
  /// is not registered at this node …") when the operator did not register it.
  const std::filesystem::path& model_path(const std::string& name, const std::string& source) const;

 private:
  std::map<std::string, std::filesystem::path> paths_;
  std::map<std::string, std::filesystem::path> weights_;
  std::map<std::string, std::filesystem::path> models_;
};

}  // namespace tribunal
