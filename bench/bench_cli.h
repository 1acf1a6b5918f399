// The benchmarks' command line (CLI11): one place for what --help and a bad flag do.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <CLI/CLI.hpp>

namespace tribunal::bench {

/// Parses a benchmark's command line into the options registered on `app`. `--help` prints the
/// options with their defaults on stdout and exits 0; a usage error prints one line
/// `NAME: PROBLEM` on stderr and exits 2. Call it first in main, before any thread exists.
inline void parse_command_line(CLI::App& app, int argc, char** argv) {
  app.get_formatter()->column_width(36);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s (see '%s --help')\n", app.get_name().c_str(), e.what(),
                 app.get_name().c_str());
    std::exit(2);
  }
}

}  // namespace tribunal::bench
