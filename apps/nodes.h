// The network roles of tribunal, wired to the WebSocket transport: the referee daemon, the provider
// daemon and the delegating client. Each runs on a NetContext, so `tribunal demo` can run all three
// in one process over real loopback connections.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/data_registry.h"
#include "engine/fault.h"
#include "net/client.h"
#include "net/context.h"
#include "net/server.h"
#include "referee/referee_dispute.h"
#include "referee/store.h"

namespace tribunal::cli {

/// One log line (no newline); called from any thread.
using LogFn = std::function<void(const std::string&)>;

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

/// What a provider sends in reply to one query of the referee. The honest node sends its answer
/// envelopes at once; scenario scripts (scenarios/behaviour.h) turn nodes into liars, slow or
/// silent peers and faulty links by rewriting this.
struct ProviderReply {
  std::vector<std::vector<uint8_t>> frames;  ///< sent in order (any bytes: may be malformed)
  uint64_t delay_ms = 0;                      ///< wait this long after the query arrived, then send
  bool disconnect = false;                    ///< close the connection after sending
};

/// The query being answered, for a reply filter.
struct QueryContext {
  const Envelope& open;   ///< the dispute's DisputeOpen (as the referee forwarded it)
  const Envelope& query;  ///< the referee's Query envelope
};

/// Rewrites the reply to one query; `answers` are the node's own signed answer envelopes.
using ReplyFilter = std::function<ProviderReply(const QueryContext&, std::vector<std::vector<uint8_t>> answers)>;

/// The job's training set (load_dataset; the job's data set must be located), loaded once per process
/// and shared by every dispute that needs it (a copy per connection would cost 188 MB each); freed
/// when no one holds it, except the most recently used one, kept for the disputes that follow a
/// training. Keyed by the data set's kind, local path and (text) window parameters. Throws EngineError.
std::shared_ptr<const Dataset> shared_train_set(const JobSpec& job, ThreadPool& pool);

/// A provider's connection limits: a referee opens one connection per live dispute, all from one
/// address, so the per-address cap equals the total cap (net/server.h defaults otherwise).
ServerOptions provider_server_options();

/// Caps on a submitted job: a provider refuses (ErrorMessage) what its operator did not agree to
/// train, before loading any data.
struct JobLimits {
  int64_t max_steps = int64_t{1} << 20;           ///< train.steps
  int64_t max_parameters = int64_t{1} << 27;      ///< the model's parameter count (caps widths, d_model, channels)
  uint64_t max_checkpoint_bytes = uint64_t{1} << 36;  ///< the job's stride checkpoints on disk (64 GiB)
};

/// What a provider's operator decides (the options of `tribunal provider`).
struct ProviderConfig {
  std::filesystem::path store;   ///< checkpoints of each job: STORE/<job_id>/
  int threads = 1;
  /// The data sets it serves, by name (a job never names a path).
  DataRegistry datasets = DataRegistry::debian();
  /// Referee keys whose queries it answers; a query signed by any other key is refused before
  /// anything is computed. None: it answers no dispute.
  std::vector<PublicKey> referees;
  /// Client keys whose JobSubmit it accepts; empty: any client, within `limits`.
  std::vector<PublicKey> clients;
  JobLimits limits;
  /// The ws:// URL it signs into its claims (where referees reach it). Empty: "ws://HOST:PORT/" of
  /// listen(), which must then be a specific address, not 0.0.0.0 or ::.
  std::string endpoint;
  Fault fault;  ///< a cheater (demo, tests, scenarios)
  /// Connection limits (a scenario's misbehaving node raises max_message_bytes to send oversized frames).
  ServerOptions server = provider_server_options();
};

/// `tribunal provider`: trains submitted jobs into STORE/<job_id>/ and answers a trusted referee's
/// queries about them (docs/protocol.md, "Threat model").
class ProviderNode {
 public:
  ProviderNode(NetContext& ctx, KeyPair key, ProviderConfig config, LogFn log);
  /// Stops accepting and closes every open connection (going away); in-flight answers are dropped.
  ~ProviderNode();
  /// Binds and starts accepting; returns the bound port. Throws NetError when no endpoint was
  /// configured and `host` is a wildcard address (the claims would name no reachable URL).
  uint16_t listen(const std::string& host, uint16_t port);
  const PublicKey& public_key() const { return key_.public_key; }
  /// The URL this node signs into its claims (set once listening).
  const std::string& endpoint() const { return config_.endpoint; }
  /// Seconds per training step of the last job trained.
  double last_step_seconds() const { return last_step_seconds_; }

  /// Set before listen(): how the node's answers leave it (default: as they are, at once).
  ReplyFilter reply_filter;

 private:
  struct Connection;
  void on_message(const std::shared_ptr<Connection>& c, std::vector<uint8_t> bytes);
  void train(Connection& c, const Envelope& env);
  void answer(const std::shared_ptr<Connection>& c, const Envelope& env);

  NetContext& ctx_;
  KeyPair key_;
  ProviderConfig config_;
  LogFn log_;
  Server server_;
  std::atomic<double> last_step_seconds_{0};
  std::mutex mu_;
  struct Worker {
    std::thread thread;
    std::shared_ptr<Connection> connection;
  };
  std::vector<Worker> workers_;  // one per connection; finished ones are joined as new ones arrive
};

/// The outcome of `tribunal delegate`.
struct DelegateOutcome {
  bool accepted = false;                 ///< some claim stands
  size_t winner = 0;                     ///< index into the providers of the standing claim
  Claim claim;                           ///< the standing claim
  std::vector<Claim> claims;             ///< every provider's claim, in order
  std::vector<std::string> refusals;     ///< per provider: why its claim was refused (empty: valid)
  std::vector<std::vector<uint8_t>> verdicts;  ///< signed verdict envelopes, in dispute order
  std::vector<std::filesystem::path> verdict_files;
  /// Non-empty when the referee could not decide a dispute (a RefereeFault verdict: no one was
  /// convicted): why. The delegation then stops with no claim accepted.
  std::string undecided;
};

/// What `tribunal delegate` is asked to do.
struct DelegateRequest {
  std::filesystem::path job_file;
  std::vector<std::string> providers;  ///< provider URLs (at least two)
  std::string referee;                 ///< the referee's URL
  PublicKey referee_key{};             ///< the only key whose verdicts are accepted
  std::filesystem::path out_dir = "verdicts";  ///< verdict-<dispute id>.bin files
  KeyPair client_key;                  ///< signs the JobSubmits and DisputeOpens
  DataRegistry datasets = DataRegistry::debian();  ///< where the job's data set is, to compute its id
};

/// Sends `open` (a signed DisputeOpen envelope) to the referee at URL `referee` and waits for its
/// verdict envelope, which must be signed by `referee_key` for this dispute (a verdict signed by
/// another key, e.g. forged by someone on the path, is refused with ProtocolError). Once the referee
/// was reached, a dropped connection is re-established with backoff (100 ms doubling to 2 s) and the
/// same opening re-sent, for up to 120 s after the last working connection and at most 100 times: a
/// restarted referee resumes the dispute or answers with its stored verdict. Throws NetError if the
/// referee is never reached, EngineError if it refuses the opening (ErrorMessage) or stays away.
/// `ctx` must be running on other threads (NetContext::start).
Envelope await_verdict(NetContext& ctx, const std::string& referee, const PublicKey& referee_key,
                       const std::vector<uint8_t>& open, const LogFn& log);

/// `tribunal delegate`: sends the job to every provider, collects signed claims, and disputes
/// differing claims at the referee until one stands, none does, or one is undecided. Every verdict
/// is checked with verify_verdict against the referee's key and written to
/// out_dir/verdict-<dispute id>.bin. Throws on unreachable peers or invalid messages.
DelegateOutcome delegate_job(NetContext& ctx, const DelegateRequest& request, LogFn log);

}  // namespace tribunal::cli
