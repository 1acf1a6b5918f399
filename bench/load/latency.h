// bench_load's message-handling latency: per dispute, from a provider sending the last answer of a
// round to a provider receiving the referee's next question (the referee's handling, loopback both
// ways and this process's receive path); and the providers' own time from a question to its answer.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "bench/load/load.h"
#include "protocol/hash.h"

namespace tribunal::load_bench {

/// The samples of one phase, in milliseconds; every member function is thread-safe (mu guards the rest).
struct Latency {
  std::mutex mu;
  struct PerDispute {
    std::optional<Clock::time_point> answered;  // the last answer of the current round left then
  };
  std::map<Digest, PerDispute> disputes;
  std::vector<double> samples_ms;   // the referee's round trips
  std::vector<double> provider_ms;  // this process: a question's arrival to its answer leaving

  /// A provider sent an answer of dispute `id` at `t` (the round's last answer counts).
  void answered(const Digest& id, Clock::time_point t) {
    std::lock_guard lock(mu);
    auto& d = disputes[id];
    if (!d.answered || *d.answered < t) d.answered = t;
  }
  /// A provider received a question of dispute `id` at `t`: one sample, from the round's last answer.
  void question(const Digest& id, Clock::time_point t) {
    std::lock_guard lock(mu);
    auto& d = disputes[id];
    if (!d.answered) return;  // the other party's copy of this question was first
    samples_ms.push_back(std::chrono::duration<double, std::milli>(t - *d.answered).count());
    d.answered.reset();
  }
  /// A provider answered a question received at `received` at `answered`.
  void provider(Clock::time_point received, Clock::time_point answered) {
    std::lock_guard lock(mu);
    provider_ms.push_back(std::chrono::duration<double, std::milli>(answered - received).count());
  }
  /// Forgets every sample (a new phase).
  void reset() {
    std::lock_guard lock(mu);
    disputes.clear();
    samples_ms.clear();
    provider_ms.clear();
  }
};

}  // namespace tribunal::load_bench
