// The commitment layer's known answers (docs/commitments.md), read from
// tests/fixtures/commitment_kat.txt. tools/commitment_kat.py, an independent Python implementation,
// writes that file, and ctest's `commitment_kat` test checks the script against it; the tests in this
// directory check the C++ code against the same file.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include "tests/source_dir.h"

namespace tribunal::testing {

/// Every known answer of tests/fixtures/commitment_kat.txt, name → 64 hex digits. Throws when the
/// file is missing or a line is not "NAME HEX" (lines starting with '#' are comments).
inline const std::map<std::string, std::string>& commitment_kats() {
  static const std::map<std::string, std::string> kats = [] {
    const std::filesystem::path path = tribunal::testing::source_dir() / "tests/fixtures/commitment_kat.txt";
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    std::map<std::string, std::string> out;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string name, hex, extra;
      if (!(fields >> name >> hex) || (fields >> extra) || hex.size() != 64 || !out.emplace(name, hex).second)
        throw std::runtime_error(path.string() + ":" + std::to_string(number) +
                                 ": expected one 'NAME HEX' per name");
    }
    return out;
  }();
  return kats;
}

/// The known answer named `name`; throws (failing the test) when the file has none.
inline std::string commitment_kat(const std::string& name) {
  const auto it = commitment_kats().find(name);
  if (it == commitment_kats().end())
    throw std::runtime_error("tests/fixtures/commitment_kat.txt has no known answer named " + name);
  return it->second;
}

}  // namespace tribunal::testing
