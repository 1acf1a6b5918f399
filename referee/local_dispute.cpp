#include "referee/local_dispute.h"

#include <time.h>

#include <deque>
#include <iterator>

namespace tribunal {
namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

LocalRun play_local(RefereeDispute& referee, const std::array<LocalParty, 2>& parties,
                    const std::function<void(const RefereeDispute::Step&)>& on_step) {
  LocalRun run;
  std::deque<RefereeDispute::Outgoing> queue;
  const auto take = [&](RefereeDispute::Step step) {
    if (on_step) on_step(step);
    run.inputs.insert(run.inputs.end(), std::make_move_iterator(step.commit.begin()),
                      std::make_move_iterator(step.commit.end()));
    for (auto& o : step.send) queue.push_back(std::move(o));
    run.events.insert(run.events.end(), std::make_move_iterator(step.events.begin()),
                      std::make_move_iterator(step.events.end()));
    if (!step.refused.empty()) run.refused.push_back(std::move(step.refused));
  };
  double t0 = thread_cpu_seconds();
  RefereeDispute::Step first = referee.start(GameTime{});
  run.referee_cpu_seconds += thread_cpu_seconds() - t0;
  take(std::move(first));
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
    for (std::vector<uint8_t>& answer : parties[static_cast<size_t>(o.party)](env)) {
      run.bytes_in += answer.size();
      t0 = thread_cpu_seconds();
      // The referee decodes and checks every byte it receives: that is part of its cost.
      // It opens them as the referee node does (nodes/referee_node.cpp): once, keeping the frame.
      RefereeDispute::Step step = referee.on_envelope(
          o.party, open_envelope(std::move(answer), SignatureCheck::DeferTensorChunks), GameTime{});
      run.referee_cpu_seconds += thread_cpu_seconds() - t0;
      take(std::move(step));
    }
  }
  return run;
}

}  // namespace tribunal
