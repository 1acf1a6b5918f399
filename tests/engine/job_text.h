// Helpers of the job-parsing tests: the error a job text gives, and one-place text edits.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "engine/error.h"
#include "engine/job.h"

namespace tribunal::jobtest {

/// The EngineError message parse_job gives for `text` (as file job.toml), or "" if it parses.
inline std::string error_of(const std::string& text) {
  try {
    parse_job(text, "job.toml");
  } catch (const EngineError& e) {
    return e.what();
  }
  return "";
}

/// `s` with the first occurrence of `from` (which must occur) replaced by `to`.
inline std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace tribunal::jobtest
