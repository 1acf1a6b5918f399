// Provider behaviours of scenario scripts as reply filters (nodes/reply_filter.h ReplyFilter): the honest
// node computes its signed answers, the filter turns them into a liar's, a slow or silent peer's,
// a crashing node's, or a bad link's. What each kind does: docs/scenarios.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include "nodes/reply_filter.h"
#include "protocol/wire.h"
#include "scenarios/scenario.h"

namespace tribunal::scenarios {

/// What a provider's behaviour did, for the scenario's checks (a scripted behaviour that never acted
/// proves nothing: runner.cpp fails such a scenario).
struct BehaviourCounts {
  uint32_t acts = 0;             ///< replies its answer behaviour changed (a lie, a mirrored, withheld,
                                 ///< delayed or malformed reply, a disconnect, a crash)
  uint32_t frames_injected = 0;  ///< frames it sent that the honest node would not have (lies, malformed)
  uint32_t frames_withheld = 0;  ///< honest answer frames it did not send
  uint32_t disconnects = 0;      ///< connections it dropped (disconnect, crash, a lossy link)
  uint32_t link_delayed = 0;     ///< replies the link delayed (latency) or paced (bandwidth)
  uint32_t slowed = 0;           ///< replies held back by a slower machine (ProviderSpec::slowdown)
  uint32_t link_dropped = 0;     ///< replies the link lost
};

/// What a provider's behaviour remembers across queries, connections and crash-restarts of its node
/// (so a one-time act such as a disconnect happens once per scenario).
struct BehaviourState {
  explicit BehaviourState(uint64_t seed) : rng(seed) {}
  std::mutex mu;
  std::vector<uint8_t> last_answer;  ///< the previous round's first answer frame (replay_round)
  BehaviourCounts counts;            ///< also what a one-time act (counts.acts > 0) or a counted one checks
  std::mt19937_64 rng;
  struct Mirror;  ///< another provider's trajectory, per dispute
  std::map<Digest, std::shared_ptr<Mirror>> mirrors;
};

/// Everything a behaviour needs besides its state.
struct BehaviourSetup {
  KeyPair key;  ///< the provider's own key (lies are signed: they are evidence)
  AnswerBehaviour answers;
  LinkConditions link;
  double slowdown = 1;                 ///< ProviderSpec::slowdown
  std::filesystem::path mirror_store;  ///< store of the provider it parrots (change_root, always_agree, …)
  int threads = 1;
  DataRegistry registry = DataRegistry::debian();  ///< the scenario's data sets and model files
  /// crash_restart: asks the runner to crash this node now and restart it after `down`. Must not
  /// block (the node is destroyed from another thread).
  std::function<void(std::chrono::milliseconds down)> crash;
};

/// The reply filter of one provider. `state` may be shared by successive nodes of one provider.
nodes::ReplyFilter make_reply_filter(BehaviourSetup setup, std::shared_ptr<BehaviourState> state);

}  // namespace tribunal::scenarios
