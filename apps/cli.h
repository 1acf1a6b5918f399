// Small helpers shared by the subcommands: argument scanning and the error type they report.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tribunal::cli {

/// A usage error: bad flag or value. main() prints it with the subcommand's usage, exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Walks argv after the subcommand name.
class Args {
 public:
  Args(int argc, char** argv, int first) : args_(argv + first, argv + argc) {}
  bool done() const { return pos_ >= args_.size(); }
  std::string_view next() { return args_[pos_++]; }
  /// The value after a flag; UsageError if missing.
  std::string value(std::string_view flag);
  /// An integer value in [lo, hi]; UsageError otherwise.
  int64_t integer(std::string_view flag, int64_t lo, int64_t hi);

 private:
  std::vector<std::string> args_;
  size_t pos_ = 0;
};

/// Subcommands: each returns the process exit code.
int train_main(Args& args);
int keygen_main(Args& args);
int verify_main(Args& args);
int referee_main(Args& args);
int provider_main(Args& args);
int delegate_main(Args& args);
int demo_main(Args& args);
int campaign_main(Args& args);
int scenario_main(Args& args);

}  // namespace tribunal::cli
