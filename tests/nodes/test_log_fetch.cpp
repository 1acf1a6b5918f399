// The auditor's fetch of the trainer's rounding logs (nodes/trainer_logs.h) against a trainer that
// keeps talking without progress: envelopes it signed for the job, but answering no request of the
// step being fetched. They are ignored, and they do not extend the fetch's allowance: the fetch ends
// with the trainer's fault within it instead of waiting as long as the trainer babbles.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>

#include "engine/error.h"
#include "engine/job.h"
#include "net/context.h"
#include "net/server.h"
#include "nodes/trainer_logs.h"
#include "protocol/envelope.h"
#include "tests/temp_dir.h"

using namespace tribunal;

TEST_CASE("a trainer that babbles stale envelopes gets no longer than the fetch's allowance") {
  const testing::TempDir dir("log-fetch");
  const JobSpec job = parse_job(
      "[model]\nkind = \"mlp\"\nwidths = [784, 32, 10]\n[train]\nsteps = 3\nbatch_size = 32\nstride = 1\n"
      "[optimizer]\nkind = \"adamw\"\nlr = 0.002\n[numerics]\nmode = \"rounding-log\"\n"
      "trainer = \"ws://127.0.0.1:1/\"\n",
      "babble.toml");
  const DataShape shape{64, 784, 10, 0};
  Digest id{};
  id.fill(3);
  const KeyPair trainer = generate_keypair();

  NetContext ctx(2, false);
  std::atomic<bool> stop{false};
  std::thread babbler;
  Server server(ctx, [&](std::shared_ptr<Session> s) {
    const std::weak_ptr<Session> weak = s;  // not s: the session keeps its handlers
    s->set_handlers({.on_message =
                         [&, weak](Session&, std::vector<uint8_t>) {
                           if (babbler.joinable()) return;
                           // Sequence 5 answers request 0 (5 >> 20): no request the auditor sent.
                           babbler = std::thread([&, weak] {
                             const std::vector<uint8_t> stale = seal(trainer, id, 5, LogRequest{id, 0});
                             for (int i = 0; i < 300 && !stop; ++i) {  // 30 s of talk, at most
                               const auto session = weak.lock();
                               if (!session) return;
                               session->send(std::vector<uint8_t>(stale));
                               std::this_thread::sleep_for(std::chrono::milliseconds(100));
                             }
                           });
                         },
                     .on_close = {}});
  });
  const std::string url = "ws://127.0.0.1:" + std::to_string(server.listen("127.0.0.1", 0)) + "/";
  ctx.start();

  std::string error;
  try {
    nodes::fetch_trainer_logs(ctx, url, generate_keypair(), trainer.public_key, job, shape, id, dir.path, {},
                              std::chrono::seconds(2));
  } catch (const EngineError& e) {
    error = e.what();
  }
  stop = true;
  if (babbler.joinable()) babbler.join();
  ctx.stop();
  ctx.join();
  // Before, each stale envelope restarted the wait: the fetch lasted as long as the talk (30 s), then
  // failed with "no answer within 1 s".
  CHECK(error == "rounding logs of step 0 from the trainer " + url + ": nothing new within 2 s");
}
