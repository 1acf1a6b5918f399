// The `tribunal` executable: one binary, one subcommand per role.
#include <cstdio>
#include <exception>
#include <string_view>

#include "apps/cli.h"

namespace {

constexpr const char* kUsage =
    "usage: tribunal <command> [options]\n"
    "commands:\n"
    "  train JOB.toml [--steps N] [--threads K] [--out DIR] [--resume] [--json]\n"
    "      train a job with RepOps, write stride checkpoints to DIR, evaluate on the test set\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace tribunal::cli;
  if (argc < 2 || std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string_view command = argv[1];
  try {
    Args args(argc, argv, 2);
    if (command == "train") return train_main(args);
    throw UsageError("unknown command '" + std::string(command) + "'");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "tribunal: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tribunal: error: %s\n", e.what());
    return 1;
  }
}
