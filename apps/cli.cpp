#include "apps/cli.h"

#include <charconv>

namespace tribunal::cli {

std::string Args::value(std::string_view flag) {
  if (done()) throw UsageError(std::string(flag) + " needs a value");
  return args_[pos_++];
}

int64_t Args::integer(std::string_view flag, int64_t lo, int64_t hi) {
  const std::string v = value(flag);
  int64_t out = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || out < lo || out > hi)
    throw UsageError(std::string(flag) + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "], got '" + v + "'");
  return out;
}

}  // namespace tribunal::cli
