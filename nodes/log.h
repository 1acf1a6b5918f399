// How the nodes report: one line at a time, to whatever the caller chose (stderr, a test, a scenario).
#pragma once

#include <functional>
#include <string>

namespace tribunal::nodes {

/// One log line (no newline); called from any thread.
using LogFn = std::function<void(const std::string&)>;

}  // namespace tribunal::nodes
