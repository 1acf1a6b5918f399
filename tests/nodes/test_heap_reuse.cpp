// nodes/heap_reuse.h: once set, a dispute's worth of large buffers freed and asked for again comes
// back without touching fresh pages (minor page faults, getrusage).
#include <doctest/doctest.h>

#include <sys/resource.h>

#include <array>
#include <cstdint>
#include <memory>

#include "nodes/heap_reuse.h"

using namespace tribunal;

namespace {

int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// Four buffers of 9 MiB (an AdamW opening of a 768 × 3072 weight: parameter, gradient and two
// moments), each page written; returns the faults that took.
int64_t touch_a_dispute(std::array<std::unique_ptr<char[]>, 4>& buffers) {
  constexpr size_t kBytes = size_t{9} << 20;
  const int64_t before = minor_faults();
  for (auto& b : buffers) {
    b.reset(new char[kBytes]);
    for (size_t i = 0; i < kBytes; i += 4096) b[i] = 1;
  }
  return minor_faults() - before;
}

}  // namespace

TEST_CASE("keep_freed_buffers: the next dispute's buffers reuse the last one's pages") {
  if (!nodes::keep_freed_buffers()) {
    MESSAGE("glibc's malloc tunables are not available here (a sanitizer's allocator): nothing to check");
    return;
  }
  std::array<std::unique_ptr<char[]>, 4> buffers;
  const int64_t first = touch_a_dispute(buffers);
  for (auto& b : buffers) b.reset();
  const int64_t again = touch_a_dispute(buffers);
  const int64_t pages = 4 * (9 << 20) / 4096;
  CAPTURE(first);
  CAPTURE(again);
  // glibc's own default maps each 9 MiB afresh the first time, then from the heap, which it trims
  // back once 36 MiB are free at its top: the second dispute faulted in every page again.
  CHECK(again < pages / 10);
}
