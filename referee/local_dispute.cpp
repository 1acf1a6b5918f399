#include "referee/local_dispute.h"

#include <time.h>

#include <deque>

namespace tribunal {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

LocalRun play_local(RefereeDispute& referee, const std::array<LocalParty, 2>& parties) {
  LocalRun run;
  std::deque<RefereeDispute::Outgoing> queue;
  double t0 = thread_cpu_seconds();
  for (auto& o : referee.start(GameTime{})) queue.push_back(std::move(o));
  run.referee_cpu_seconds += thread_cpu_seconds() - t0;
  while (!queue.empty()) {
    RefereeDispute::Outgoing o = std::move(queue.front());
    queue.pop_front();
    run.bytes_out += o.envelope.size();
    const Envelope env = open_envelope(o.envelope);  // the party's own check, not the referee's cost
    if (env.kind == MessageKind::Verdict) {
      run.verdict = o.envelope;
      continue;
    }
    // Both parties are asked to open the located node's inputs; once one opening is complete the
    // other question is moot, and the party is not asked (a real one's stream would be refused).
    // Likewise a question of a round already over (an input opening, once the logs of a rounding-log
    // node are asked for).
    if (env.kind == MessageKind::Query &&
        (!referee.game().awaiting(o.party) ||
         std::get<Query>(env.body).round != referee.game().current_query().round))
      continue;
    for (const std::vector<uint8_t>& answer : parties[static_cast<size_t>(o.party)](env)) {
      run.bytes_in += answer.size();
      t0 = thread_cpu_seconds();
      std::string refused;
      // The referee decodes and checks every byte it receives: that is part of its cost.
      // It opens them as the referee node does (nodes/referee_node.cpp).
      const Envelope env = open_envelope(answer, SignatureCheck::DeferTensorChunks);
      for (auto& next : referee.on_envelope(o.party, env, GameTime{}, &refused))
        queue.push_back(std::move(next));
      run.referee_cpu_seconds += thread_cpu_seconds() - t0;
      if (!refused.empty()) run.refused.push_back(refused);
    }
  }
  return run;
}

}  // namespace tribunal
