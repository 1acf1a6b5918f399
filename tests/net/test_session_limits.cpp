// The session's limits on their own, without sockets: the receive clocks (net/receive_limits.h: idle,
// first message, message) on synthetic times, and the write queue's bound (net/write_budget.h).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "net/receive_limits.h"
#include "net/session.h"
#include "net/write_budget.h"

using namespace tribunal;
using namespace tribunal::net_detail;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("ReceiveLimits: first message, then idle, and a slow message, each at its deadline") {
  SessionOptions options;
  options.first_message_timeout = 10000ms;
  options.idle_timeout = 30000ms;
  options.message_timeout = 60000ms;
  const Clock::time_point t0{};
  ReceiveLimits limits(options, t0);

  // Before any message the first-message limit comes first.
  REQUIRE(limits.next_deadline().has_value());
  CHECK(*limits.next_deadline() == t0 + 10000ms);
  CHECK(limits.check(t0 + 9999ms) == ReceiveBreach::None);
  CHECK(limits.check(t0 + 10000ms) == ReceiveBreach::NoMessage);

  // A message completed at 5 s: only the idle clock runs, from then.
  limits.message_done(t0 + 5000ms);
  CHECK_FALSE(limits.in_message());
  CHECK(*limits.next_deadline() == t0 + 35000ms);
  CHECK(limits.check(t0 + 34999ms) == ReceiveBreach::None);
  CHECK(limits.check(t0 + 35000ms) == ReceiveBreach::Idle);

  // A message started at 6 s and not finished: the message limit is checked first.
  limits.message_started(t0 + 6000ms);
  CHECK(limits.in_message());
  CHECK(*limits.next_deadline() == t0 + 35000ms);  // the idle deadline is still the earlier one
  CHECK(limits.check(t0 + 66000ms) == ReceiveBreach::MessageTooSlow);
  limits.message_done(t0 + 20000ms);
  CHECK(limits.check(t0 + 66000ms) == ReceiveBreach::Idle);

  // Paused reading restarts the idle clock.
  limits.restart_idle(t0 + 60000ms);
  CHECK(*limits.next_deadline() == t0 + 90000ms);
  CHECK(limits.check(t0 + 89999ms) == ReceiveBreach::None);
}

TEST_CASE("ReceiveLimits: zero timeouts disable their limits") {
  SessionOptions options;
  options.first_message_timeout = 0ms;
  options.idle_timeout = 0ms;
  options.message_timeout = 0ms;
  const Clock::time_point t0{};
  ReceiveLimits limits(options, t0);
  limits.message_started(t0);
  CHECK_FALSE(limits.next_deadline().has_value());
  CHECK(limits.check(t0 + 1000h) == ReceiveBreach::None);
}

TEST_CASE("WriteBudget: a claim past either bound counts nothing; release makes room") {
  WriteBudget budget(2, 100);
  auto a = budget.claim(60);
  CHECK(a.ok);
  CHECK(a.messages == 1);
  CHECK(a.bytes == 60);
  auto b = budget.claim(50);  // 110 bytes: over the byte bound
  CHECK_FALSE(b.ok);
  CHECK(b.messages == 2);
  CHECK(b.bytes == 110);
  auto c = budget.claim(40);  // the refused claim left nothing counted: 2 messages, 100 bytes
  CHECK(c.ok);
  CHECK(c.bytes == 100);
  auto d = budget.claim(0);  // a third message: over the message bound
  CHECK_FALSE(d.ok);
  CHECK(d.messages == 3);
  budget.release(60);
  auto e = budget.claim(60);
  CHECK(e.ok);
  CHECK(e.messages == 2);
  CHECK(e.bytes == 100);
}

TEST_CASE(
    "WriteBudget::wait_for_room: returns at once with room or nothing queued, waits for release, gives up "
    "when closed") {
  WriteBudget budget(2, 100);
  std::atomic<bool> open{true};
  CHECK(budget.wait_for_room(1000, open));  // nothing queued: even an oversized message may go
  REQUIRE(budget.claim(90).ok);
  CHECK(budget.wait_for_room(10, open));
  // 95 more bytes do not fit until the 90 are released, from another thread.
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    budget.release(90);
  });
  const auto start = Clock::now();
  CHECK(budget.wait_for_room(95, open));
  CHECK(Clock::now() - start >= 40ms);
  writer.join();

  REQUIRE(budget.claim(100).ok);
  open = false;
  CHECK_FALSE(budget.wait_for_room(1, open));
}
