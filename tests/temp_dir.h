// A scratch directory for a test, unique per process and instance, removed at scope exit.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace tribunal::testing {

struct TempDir {
  std::filesystem::path path;
  /// Creates <tmp>/tribunal-<tag>-<pid>-<n> (empty).
  explicit TempDir(const std::string& tag = "test") {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("tribunal-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace tribunal::testing
