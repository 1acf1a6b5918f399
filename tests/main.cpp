#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include "tests/source_dir.h"

namespace tribunal::testing {
std::filesystem::path source_dir() {
  return TRIBUNAL_SOURCE_DIR;
}
}  // namespace tribunal::testing
