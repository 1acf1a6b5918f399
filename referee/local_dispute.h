// Plays a RefereeDispute to its end in one thread, handing each envelope straight to the addressed
// party: for tests and benchmarks that want the whole protocol (signatures included) without
// sockets. The referee's own CPU time is measured apart from the parties'.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "referee/referee_dispute.h"

namespace tribunal {

/// A party: receives each envelope the referee sends it (the forwarded DisputeOpen, queries, the
/// verdict) and returns its answer envelopes.
using LocalParty = std::function<std::vector<std::vector<uint8_t>>(const Envelope&)>;

struct LocalRun {
  std::vector<uint8_t> verdict;      ///< the signed verdict envelope
  uint64_t bytes_in = 0;             ///< envelope bytes the referee received from the parties
  uint64_t bytes_out = 0;            ///< envelope bytes the referee sent
  double referee_cpu_seconds = 0;    ///< thread CPU time inside the referee's calls only
  std::vector<std::string> refused;  ///< envelopes the referee refused, with reasons
  std::vector<DisputeInput> inputs;  ///< every Step's `commit`, in order: what a durable referee records
  std::vector<DisputeEvent> events;  ///< every Step's `events`, in order
};

/// Runs the dispute to its verdict (time stands still: no deadline expires). Each Step is taken as a
/// referee node takes it: its inputs kept (no store), then its envelopes delivered. `on_step`, when
/// set, sees each Step as soon as the referee returned it (before any party answers).
LocalRun play_local(RefereeDispute& referee, const std::array<LocalParty, 2>& parties,
                    const std::function<void(const RefereeDispute::Step&)>& on_step = {});

}  // namespace tribunal
