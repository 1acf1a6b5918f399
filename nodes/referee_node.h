// The referee daemon: `tribunal referee` as a library, so `tribunal demo`, the scenario runner, the
// tests and the load benchmark run the real node over loopback WebSockets.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/address_policy.h"
#include "net/client.h"
#include "net/context.h"
#include "net/server.h"
#include "nodes/log.h"
#include "referee/referee_dispute.h"
#include "referee/store.h"

namespace tribunal::nodes {

/// The public-address policy plus loopback (127.0.0.0/8, ::1): for a referee whose providers run on
/// the same machine (demo, tests, scenarios).
AddressPolicy loopback_policy();

/// What one dispute cost the referee.
struct DisputeStats {
  uint64_t bytes_in = 0;     ///< envelopes received from the providers
  uint64_t bytes_out = 0;    ///< envelopes sent to the providers and the client
  double cpu_seconds = 0;    ///< CPU time of the referee's dispute handling (thread CPU clock)
  double seconds = 0;        ///< wall time from opening to verdict
  uint64_t refused = 0;      ///< provider frames refused: undecodable, badly signed, stale, or refused by the game
  uint64_t reconnects = 0;   ///< provider connections re-established after the first one
};

/// `tribunal referee`: accepts DisputeOpen from clients, connects to both providers, plays the game,
/// signs the verdict and sends it to everyone. Many disputes at once; a ticker enforces deadlines.
///
/// Durable when `options.data_dir` is set (referee/store.h): every input that changes a dispute is
/// committed before any message it causes is sent, so after a crash (even SIGKILL) the next
/// RefereeNode on the same directory replays every undecided dispute, reconnects to both providers
/// and re-sends the DisputeOpen and the open questions with fresh sequence numbers and restarted
/// deadlines. A provider connection that drops is re-established with backoff until the dispute
/// ends. A DisputeOpen for a dispute that is already open attaches the new client connection (it
/// gets the verdict); for a decided one, the stored verdict is sent at once (also after its record
/// was pruned: RefereeOptions::retention). A new opening is refused with an ErrorMessage when what
/// the dispute can cost exceeds `options.limits` (referee_dispute.h check_dispute_cost), or beyond
/// the admission caps: `max_live_disputes` in all, `max_disputes_per_client` per client network
/// (/24, /48) or trusted client key, and `reserved_disputes` slots only trusted clients' openings take.
class RefereeNode {
 public:
  /// Opens the store of `options.data_dir`, if set (throws StoreError naming the file when it is
  /// corrupt or belongs to another referee key). `providers` decides which addresses a provider's
  /// signed endpoint may resolve to (by default public addresses only; `--allow-network`, or
  /// loopback_policy() for tests and demos on one machine): an opening whose endpoint is a literal
  /// address the policy refuses is refused, and a name that resolves only to refused addresses
  /// cannot be connected to.
  RefereeNode(NetContext& ctx, KeyPair key, RefereeOptions options, LogFn log,
              AddressPolicy providers = AddressPolicy::public_only());
  ~RefereeNode();
  /// Binds and starts accepting; the first call first resumes the store's undecided disputes
  /// (set on_event/on_finished before it to see them). Returns the bound port.
  uint16_t listen(const std::string& host, uint16_t port);
  /// Undecided disputes held now.
  size_t live_disputes();

  /// Every dispute event (round, narrowing, verdict).
  std::function<void(const DisputeEvent&)> on_event;
  /// Called once per finished dispute.
  std::function<void(const RefereeDispute&, const DisputeStats&)> on_finished;

 private:
  struct Live;
  void open(std::shared_ptr<Session> client, const Envelope& env);
  std::shared_ptr<Live> make_live(std::unique_ptr<RefereeDispute> dispute, std::string group, bool trusted);
  bool trusted(const PublicKey& client) const;
  void admit(const std::shared_ptr<Live>& live);
  void release(const Live& live);
  void prune_store();
  void resume_stored(const StoredDispute& stored);
  void connect_provider(const std::shared_ptr<Live>& live, int party);
  void provider_lost(Live& live, int party, const std::string& why);
  void deliver(Live& live, std::vector<RefereeDispute::Outgoing> out);
  void finish_if_done(Live& live);
  void drop(Live& live, const std::string& why);
  void commit(Live& live, const DisputeInput& input, const std::vector<uint8_t>* verdict);

  NetContext& ctx_;
  KeyPair key_;
  RefereeOptions options_;
  LogFn log_;
  std::unique_ptr<RefereeStore> store_;
  AddressPolicy policy_;
  Server server_;
  Client client_;
  std::mutex mu_;
  std::map<Digest, std::shared_ptr<Live>> live_;
  std::map<std::string, size_t> per_client_;  // live disputes per admission group (client network or trusted key)
  size_t trusted_live_ = 0;                   // live disputes opened by trusted clients
  std::atomic<uint64_t> events_{0};           // inputs committed by this process (crash hook)
  std::atomic<bool> resumed_{false};
  std::atomic<bool> stop_{false};
  std::thread ticker_;
};

}  // namespace tribunal::nodes
