// Typed error for user-facing failures in the engine: bad job file, bad data file, bad checkpoint,
// unwritable output. The message says what went wrong and where (file, key, offset).
#pragma once

#include <stdexcept>

namespace tribunal {

class EngineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tribunal
