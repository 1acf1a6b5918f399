// The referee never charges its own delay to a party (docs/protocol.md, "Clocks"), through the real
// nodes: the referee's store stalls (another process holds its database's write lock, as a slow disk
// or a busy backup would) for longer than a party's whole clock, right between an answer and
// the next question. Before the fix the next question's clock started at that answer's arrival, so
// both parties had lost on time before the question even left the referee ("no valid claim
// (timeout)"); now a question's clock starts when it is written to the party's connection.
#include <doctest/doctest.h>

#include <sqlite3.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using testing::Network;

TEST_CASE("a stalled referee store charges no party: the honest provider wins (issue 28, hole 2)") {
  testing::TempDir store{"stall"};
  RefereeNodeOptions options;
  options.data_dir = store.path;
  Network net(options);
  net.use_terms("base_seconds = 1.5\nstep_seconds = 1");
  // Longer than everything on a party's clock at round 2 (two allowances of 1.5 s, less what round 1
  // took), and shorter than the store's busy timeout (5 s), so the commit waits instead of failing.
  constexpr auto kStall = std::chrono::milliseconds{4000};

  std::atomic<bool> stalled{false};
  std::thread release;
  net.referee.on_event = [&](const DisputeEvent& e) {
    // Round 2 is being asked: take the store's write lock before the referee commits the answer that
    // asked it, and hold it for kStall (the referee's commit waits: sqlite3_busy_timeout).
    if (e.round != 2 || stalled.exchange(true)) return;
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((store.path / "referee.sqlite").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
    release = std::thread([db, kStall] {
      std::this_thread::sleep_for(kStall);
      sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
      sqlite3_close(db);
    });
  };
  const std::string honest = net.provider(Fault{});
  const std::string cheater = net.provider(testing::corrupt(12, 13));
  const auto started = std::chrono::steady_clock::now();
  const DelegateOutcome out = net.delegate({honest, cheater});
  const auto took = std::chrono::steady_clock::now() - started;
  if (release.joinable()) release.join();

  CHECK(stalled);
  CHECK(took > kStall);  // the stall happened inside the dispute
  REQUIRE(out.verdicts.size() == 1);
  const Verdict v = net.verify(out.verdicts[0]);
  CAPTURE(v.detail);
  CHECK(out.accepted);
  CHECK(out.winner == 0);
  CHECK(v.reason == VerdictReason::WrongOutput);
  CHECK(v.step == 12);
  CHECK(v.node == 13);
}

// Issue 33 item 5: a referee bounds the opened bytes in flight across its disputes
// (RefereeNodeOptions::opening_memory; nodes/opening_budget.h), so a thousand disputes reaching their
// input openings together cannot fill its memory. A dispute whose opening finds no room waits with its
// OpenInputs question unsent. Here the budget lets one opening through at a time, and the first
// dispute's re-execution stalls (a slow machine) until the second has waited longer than the whole
// clock its honest provider had left: had the wait run on that clock, as it did when the game was
// ticked meanwhile, the honest provider would have lost on time.
TEST_CASE("an opening that waits for the referee's memory charges no party: both honest providers win") {
  RefereeNodeOptions options;
  options.opening_memory = 1;  // one opening at a time
  options.workers = 2;         // the stalled re-execution takes one worker; the other dispute plays on
  constexpr auto kStall = std::chrono::seconds{12};
  std::atomic<int> reexecutions{0};
  std::atomic<int64_t> waited_ms{0};
  std::atomic<RefereeNode*> referee{nullptr};
  options.dispute.reexecute_hook = [&](int) {
    if (reexecutions++ != 0) return;
    // The other dispute reaches its opening while this one holds the budget.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{60};
    while (referee.load()->openings().waiting() == 0 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    if (referee.load()->openings().waiting() == 0) return;
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(kStall);
    waited_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  };
  Network net(options);
  referee = &net.referee;
  net.use_terms("base_seconds = 0.4\nstep_seconds = 0.1\nmin_bytes_per_second = 4194304");

  struct Run {
    DelegateOutcome out;
    std::chrono::steady_clock::time_point ended;
  };
  std::array<Run, 2> runs;
  std::array<std::string, 4> urls = {net.provider(Fault{}), net.provider(testing::corrupt(12, 13)),
                                     net.provider(Fault{}), net.provider(testing::corrupt(20, 13))};
  std::array<std::thread, 2> threads;
  for (size_t i = 0; i < 2; ++i)
    threads[i] = std::thread([&, i] {
      runs[i].out = net.delegate({urls[2 * i], urls[2 * i + 1]});
      runs[i].ended = std::chrono::steady_clock::now();
    });
  for (auto& t : threads) t.join();

  CHECK(net.referee.openings().deferred() == 1);
  CHECK(net.referee.openings().reserved() == 0);  // both given back
  CHECK(net.referee.openings().waiting() == 0);
  Verdict second;
  for (size_t i = 0; i < 2; ++i) {
    REQUIRE(runs[i].out.verdicts.size() == 1);
    const Verdict v = net.verify(runs[i].out.verdicts[0]);
    CAPTURE(v.detail);
    CHECK(runs[i].out.accepted);
    CHECK(runs[i].out.winner == 0);
    CHECK(v.reason == VerdictReason::WrongOutput);
    CHECK(v.step == (i == 0 ? 12u : 20u));
    CHECK(v.node == 13);
    if (runs[i].ended == std::max(runs[0].ended, runs[1].ended)) second = v;
  }
  // The premise: the dispute that waited did so for longer than its honest party's clock had left.
  CHECK(std::chrono::milliseconds{waited_ms.load()} >= kStall);
  INFO("the waiting dispute's clocks at its end: ", second.clocks[0].count(), " ms, ",
       second.clocks[1].count(), " ms");
  CHECK(second.clocks[0] + std::chrono::seconds{1} < kStall);
}
