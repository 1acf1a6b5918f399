// bench_load's clients: one connection to the referee per dispute, each sending its signed
// DisputeOpen and checking the verdict that comes back.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/load/load.h"
#include "net/context.h"
#include "net/session.h"
#include "protocol/envelope.h"

namespace tribunal::load_bench {

/// One dispute to open: the honest provider and a cheater identity over the same job.
struct Dispute {
  std::vector<uint8_t> open;  // the signed DisputeOpen
  Digest id{};
  int honest = 0;  // the honest party's index
};

/// What the clients of one phase saw; mu guards every member, cv is notified at each finished dispute.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  size_t verdicts = 0, correct = 0;
  std::vector<std::string> errors;
  std::vector<std::shared_ptr<Session>> sessions;
  Clock::time_point last;
};

/// Connects one client per dispute at once (spread over kClientAddresses source addresses) and sends
/// its DisputeOpen; `out` counts verdicts as they come. A verdict is correct when it is signed by
/// `referee_key`, for the right dispute, with the honest party the winner and the cheat located at
/// kFaultStep and kFaultNode. `ctx` must be running.
void open_disputes(NetContext& ctx, const std::string& referee_url, const PublicKey referee_key,
                   const std::vector<Dispute>& disputes, const std::shared_ptr<Outcome>& out);

}  // namespace tribunal::load_bench
