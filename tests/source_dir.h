// The repository's root, where the tests find the committed jobs, scenario scripts and fixtures.
#pragma once

#include <filesystem>

namespace tribunal::testing {

/// The source tree the suite was built from (absolute). Defined in tests/main.cpp, the one translation
/// unit that is compiled with the path, so that every other test object is the same bytes in any clone
/// and compile caching (ccache with a base directory, scripts/test.sh) carries it between clones.
std::filesystem::path source_dir();

}  // namespace tribunal::testing
