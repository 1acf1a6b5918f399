// The referee never charges its own delay to a party (docs/protocol.md, "Clocks"), through the real
// nodes: the referee's store stalls (another process holds its database's write lock, as a slow disk
// or a busy backup would) for longer than a party's whole clock, right between an answer and
// the next question. Before the fix the next question's clock started at that answer's arrival, so
// both parties had lost on time before the question even left the referee ("no valid claim
// (timeout)"); now a question's clock starts when it is written to the party's connection.
#include <doctest/doctest.h>

#include <sqlite3.h>

#include <atomic>
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
