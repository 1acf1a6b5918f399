// The referee daemon: `tribunal referee` as a library, so `tribunal demo`, the scenario runner, the
// tests and the load benchmark run the real node over loopback WebSockets.
//
// The node drives: each dispute's strand and timer, the store and the wiring. What it asks is
// elsewhere: which openings it takes on (nodes/admission.h), each party's connection
// (nodes/provider_link.h), its HTTP routes (nodes/referee_routes.h) and its series
// (nodes/referee_meters.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "net/address_policy.h"
#include "net/client.h"
#include "net/context.h"
#include "net/server.h"
#include "nodes/admission.h"
#include "nodes/cpu_budget.h"
#include "nodes/log.h"
#include "nodes/metrics.h"
#include "nodes/opening_budget.h"
#include "nodes/rate_limit.h"
#include "nodes/referee_meters.h"
#include "referee/referee_dispute.h"
#include "referee/report.h"
#include "referee/store.h"

namespace tribunal::nodes {

class DisputePages;

/// The public-address policy plus loopback (127.0.0.0/8, ::1): for a referee whose providers run on
/// the same machine (demo, tests, scenarios).
AddressPolicy loopback_policy();

/// The referee daemon's settings (the options of `tribunal referee`; docs/running.md).
struct RefereeNodeOptions {
  DisputeOptions dispute;  ///< how each dispute is played (its time terms are its job's)
  /// Directory of the durable store (referee/store.h); empty: nothing is stored and a restarted
  /// referee forgets its disputes (`tribunal referee` defaults to ./referee-data).
  std::filesystem::path data_dir;
  /// Live (undecided) disputes held at once; an opening beyond it is refused with an ErrorMessage.
  size_t max_live_disputes = 4096;
  /// Live disputes opened from one client network (net/address_policy.h client_network: its /24 or
  /// /48, any port), or by one trusted client key; beyond it, refused likewise.
  size_t max_disputes_per_client = 256;
  /// Open connections from one peer address (net/server.h; 0: no limit); unset: enough for one
  /// client's disputes to wait for their verdicts, max(128, max_disputes_per_client + 16).
  std::optional<size_t> max_connections_per_address;
  /// Client keys the operator knows (`--client-key`): their openings (signed by them) may use the
  /// `reserved_disputes` slots that openings by other keys never take, so strangers filling the
  /// referee cannot lock them out.
  std::vector<PublicKey> trusted_clients;
  /// Slots of `max_live_disputes` kept for trusted clients (only when there are any).
  size_t reserved_disputes = 1024;
  /// What one dispute may cost; an opening beyond it is refused with an ErrorMessage. Derived from
  /// the job text and checked before anything else of the opening (RefereeDispute's constructor).
  DisputeLimits limits;
  /// The CPU time the openings of one source (a client network /24 or /48, or a trusted client key)
  /// may use, as a token bucket (nodes/cpu_budget.h): an opening whose source is in debt is refused
  /// with an ErrorMessage saying when to retry, before anything of it is checked.
  CpuBudgetOptions opening_cpu;
  /// Decided disputes keep their inputs this long, then the store prunes them (keeping the verdict).
  std::chrono::seconds retention = std::chrono::hours(24 * 30);
  /// How often the referee node prunes its store.
  std::chrono::seconds prune_interval = std::chrono::hours(1);
  /// /metrics' tribunal_referee_disputes_near_clock_end counts the undecided disputes whose awaited
  /// party has less than this left on its clock (docs/running.md, "Monitoring"; `--near-clock-end-seconds`).
  std::chrono::milliseconds near_clock_end = std::chrono::seconds(60);
  /// Opened bytes in flight across the disputes (nodes/opening_budget.h; docs/protocol.md, "Bounds on
  /// a dispute's cost"): a dispute reserves twice its opening's size on the wire (both parties stream
  /// it) before its OpenInputs question is written, and holds it through the re-execution; one that does
  /// not fit waits, first come first served, its question unsent and no party's clock running. One
  /// opening is always let through, however large (`limits.max_opened_bytes` bounds it).
  uint64_t opening_memory = uint64_t{256} << 20;
  /// Worker threads that play the disputes (signature checks, the game, store commits,
  /// re-execution); 0: the machine's hardware threads. The network threads only move bytes.
  int workers = 0;
  /// TLS (docs/running.md, "TLS"): with `tls.cert` and `tls.key` the referee serves wss:// (and its
  /// HTTP routes over https://); `tls.ca` (empty: the system's CAs) is what wss:// provider endpoints'
  /// certificates must chain to.
  TlsFiles tls;
  /// Plain HTTP requests (/healthz, /metrics, /disputes) per source address: beyond the bucket, 429
  /// with Retry-After (nodes/rate_limit.h; the WebSocket port and --metrics each have their buckets).
  RateLimit http_rate;
  /// Test hook (tests/referee_crash.sh): when non-zero, the process kills itself with SIGKILL right
  /// after committing its N-th event to the store, to test recovery at every point of a dispute.
  uint64_t crash_after_events = 0;
};

/// `tribunal referee`: accepts DisputeOpen from clients, connects to both providers, plays the game,
/// signs the verdict and sends it to everyone. Many disputes at once, each on its own strand of a
/// worker pool with one timer armed at its next deadline: the network threads never wait for a
/// dispute, and a message's lateness is judged by when it arrived (docs/protocol.md, "Clocks").
///
/// Durable when `options.data_dir` is set (referee/store.h): every input that changes a dispute is
/// committed before any message it causes is sent, so after a crash (even SIGKILL) the next
/// RefereeNode on the same directory replays every undecided dispute, reconnects to both providers
/// and re-sends the DisputeOpen and the open questions with fresh sequence numbers and restarted
/// deadlines. A provider connection that drops is re-established with backoff until the dispute
/// ends. A DisputeOpen for a dispute that is already open attaches the new client connection (it
/// gets the verdict); for a decided one, the stored verdict is sent at once (also after its record
/// was pruned: RefereeNodeOptions::retention). A new opening is refused with an ErrorMessage when what
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
  RefereeNode(NetContext& ctx, KeyPair key, RefereeNodeOptions options, Logger log,
              AddressPolicy providers = AddressPolicy::public_only());
  ~RefereeNode();
  /// Binds and starts accepting; the first call first resumes the store's undecided disputes
  /// (set on_event/on_finished before it to see them). Returns the bound port.
  uint16_t listen(const std::string& host, uint16_t port);
  /// Undecided disputes held now.
  size_t live_disputes();
  /// Where undecided dispute `dispute`'s game stands (as of its last event); nullopt when this node
  /// holds no such dispute or it has not started. Thread-safe.
  std::optional<DisputeProgress> progress(const Digest& dispute);
  /// For /metrics: undecided disputes whose awaited party has less than `options.near_clock_end` left,
  /// and the least time left (seconds; NaN when none awaits).
  std::pair<double, double> clock_left();
  /// Also serves /healthz and /metrics on a separate HTTP-only address (`--metrics`; they are always
  /// served on the WebSocket port too). Returns the bound port. Throws NetError.
  uint16_t listen_metrics(const std::string& host, uint16_t port);
  /// The node's budget of opened bytes in flight (RefereeNodeOptions::opening_memory).
  const OpeningBudget& openings() const { return openings_; }
  /// The node's metrics (docs/running.md, "Monitoring"): what /metrics serves.
  const MetricsRegistry& metrics() const { return metrics_; }

  /// Every dispute event (round, narrowing, verdict).
  std::function<void(const DisputeEvent&)> on_event;
  /// Called once per finished dispute.
  std::function<void(const RefereeDispute&, const DisputeStats&)> on_finished;

 private:
  struct Live;
  struct Workers;
  void on_client_message(const std::shared_ptr<Session>& client, std::vector<uint8_t> bytes);
  void on_provider_message(const std::shared_ptr<Live>& live, int party,
                           const std::shared_ptr<Session>& session, std::vector<uint8_t> bytes,
                           GameTime arrived, std::chrono::steady_clock::time_point received);
  void on_provider_connected(const std::shared_ptr<Live>& live, int party, std::shared_ptr<Session> s,
                             const std::string& error);
  void on_provider_closed(const std::shared_ptr<Live>& live, int party, const std::shared_ptr<Session>& s,
                          const CloseInfo& info);
  void on_timer(const std::shared_ptr<Live>& live);
  void arm(const std::shared_ptr<Live>& live);
  void arm_pruning();
  void open(std::shared_ptr<Session> client, const Envelope& env);
  void handle_opening(const std::shared_ptr<Session>& client, const std::vector<uint8_t>& bytes);
  void answer_check(const std::shared_ptr<Session>& client, const Envelope& env);
  DisputeOptions opening_options() const;
  std::shared_ptr<Live> make_live(std::unique_ptr<RefereeDispute> dispute, std::string group, bool trusted);
  void admit(const std::shared_ptr<Live>& live);
  void hold(const std::shared_ptr<Live>& live);
  void release(const Live& live);
  void prune_store();
  void resume_stored(const StoredDispute& stored);
  void connect_provider(const std::shared_ptr<Live>& live, int party);
  void provider_lost(Live& live, int party, const std::string& why);
  void deliver(Live& live, std::vector<RefereeDispute::Outgoing> out,
               std::optional<std::chrono::steady_clock::time_point> caused_by = std::nullopt);
  bool admit_opening(Live& live, RefereeDispute::Outgoing& o);
  void settle_opening(Live& live);
  void finish_if_done(Live& live);
  void drop(Live& live, const std::string& why);
  void apply(Live& live, RefereeDispute::Step step,
             std::optional<std::chrono::steady_clock::time_point> caused_by = std::nullopt);
  void commit(Live& live, RefereeDispute::Step& step);
  HttpHandler http_handler();

  NetContext& ctx_;
  KeyPair key_;
  RefereeNodeOptions options_;
  Logger log_;
  MetricsRegistry metrics_;
  RefereeMeters meters_{metrics_};
  std::unique_ptr<Workers> workers_;  // destroyed after live_, whose timers run on it
  std::unique_ptr<RefereeStore> store_;
  std::unique_ptr<DisputePages> pages_;  // with a store; outlives server_, whose requests it answers
  AddressPolicy policy_;
  Admission admission_;     // caps (under mu_) and each admission group's CPU budget for openings
  OpeningBudget openings_;  // opened bytes in flight across the live disputes
  Server server_;
  std::unique_ptr<Server> metrics_server_;  // --metrics
  Client client_;
  std::mutex mu_;
  std::map<Digest, std::shared_ptr<Live>> live_;  // held disputes, as counted by admission_
  std::atomic<uint64_t> events_{0};               // inputs committed by this process (crash hook)
  std::atomic<bool> resumed_{false};
};

}  // namespace tribunal::nodes
