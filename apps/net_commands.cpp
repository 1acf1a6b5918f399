// `tribunal keygen | verify | referee | provider | delegate`.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "apps/cli.h"
#include "cheats/fault_policy.h"
#include "engine/error.h"
#include "net/error.h"
#include "nodes/delegate.h"
#include "nodes/delivery.h"
#include "nodes/heap_reuse.h"
#include "nodes/key_file.h"
#include "nodes/provider_node.h"
#include "nodes/referee_node.h"
#include "nodes/train_set.h"
#include "nodes/training_ranks.h"
#include "ops/registry.h"

namespace tribunal::cli {

using namespace tribunal::nodes;  // the roles this command line runs
namespace {

// --log-format and --log-level of a node command (docs/running.md, "Logs").
struct LogSettings {
  std::string format = "text", level = "info";
};

void add_log_options(CLI::App& app, LogSettings& s) {
  app.add_option("--log-format", s.format,
                 "log lines on stderr as text, or as json: one object per line with time (UTC), level, node "
                 "and message")
      ->check(CLI::IsMember({"text", "json"}))
      ->type_name("text|json")
      ->envname("TRIBUNAL_LOG_FORMAT")
      ->capture_default_str();
  app.add_option("--log-level", s.level,
                 "the least level logged: debug (adds every dispute round), info (lifecycle), warning "
                 "(refused peers and frames), error (failures), off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warning", "warn", "error", "critical", "off"}))
      ->type_name("LEVEL")
      ->envname("TRIBUNAL_LOG_LEVEL")
      ->capture_default_str();
}

// The logger of a node command on stderr; the transport's lines (net/error.h) go to it too.
Logger command_logger(const LogSettings& s, const std::string& node) {
  Logger log = stderr_logger(node, s.format == "json" ? LogFormat::Json : LogFormat::Text,
                             spdlog::level::from_str(s.level));
  set_net_log_sink([log](std::string_view line) { log->info("[net] {}", line); });
  return log;
}

// "HOST:PORT" of `flag` → (host, port).
std::pair<std::string, uint16_t> host_port(const std::string& s, const std::string& flag = "--listen") {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) throw UsageError(flag + " expects HOST:PORT, got '" + s + "'");
  int port = -1;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw UsageError(flag + ": bad port in '" + s + "'");
  std::string host = s.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, static_cast<uint16_t>(port)};
}

// "STEP:NODE" → a fault adding 0.5 to every element of that node's first output (a cheater, for
// testing a network's referee).
cheats::Fault parse_corrupt(const std::string& s) {
  cheats::Fault f;
  const size_t colon = s.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    size_t used = 0;
    f.step = std::stoll(s.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument("step");
    f.node = std::stoll(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1) throw std::invalid_argument("node");
  } catch (const std::exception&) {
    throw UsageError("--corrupt expects STEP:NODE, got '" + s + "'");
  }
  if (f.step < 0 || f.node < 0) throw UsageError("--corrupt: STEP and NODE must be ≥ 0");
  f.element = -1;
  f.delta = 0.5f;
  return f;
}

// --metrics HOST:PORT of a node: a separate address for /metrics and /healthz.
void add_metrics_address(CLI::App& app, std::string& metrics) {
  app.add_option(
         "--metrics", metrics,
         "also serve /metrics and /healthz on this HTTP-only address (they are always on --listen too)")
      ->type_name("HOST:PORT")
      ->envname("TRIBUNAL_METRICS");
}

// --listen HOST:PORT and --key KEYFILE, both required, of a `role` node ("referee", "provider").
void add_listen_and_key(CLI::App& app, std::string& listen, std::string& key, const std::string& role) {
  app.add_option("--listen", listen, "address and port to listen on (port 0: any free one)")
      ->type_name("HOST:PORT")
      ->envname("TRIBUNAL_LISTEN")
      ->required();
  app.add_option("--key", key, "the " + role + "'s key file (tribunal keygen)")
      ->type_name("KEYFILE")
      ->envname("TRIBUNAL_KEY")
      ->required();
}

// FLAG HEX, repeatable: each a public key in hex, appended to `keys`.
CLI::Option* add_public_keys(CLI::App& app, const std::string& flag, std::vector<PublicKey>& keys,
                             const std::string& help) {
  return add_repeatable(
      app, flag, "HEX", [flag, &keys](const std::string& v) { keys.push_back(public_key_arg(flag, v)); },
      help);
}

// `FLAG SECONDS`: a duration in seconds (fractions allowed, in [0, 86400]) stored in `target`, whose
// value now --help shows as the default.
CLI::Option* add_seconds(CLI::App& app, const std::string& flag, std::chrono::milliseconds& target,
                         const std::string& help) {
  return app
      .add_option_function<double>(
          flag, [&target](double v) { target = std::chrono::milliseconds(std::llround(v * 1000)); }, help)
      ->check(CLI::Range(0.0, 86400.0))
      ->type_name("SECONDS")
      ->default_str(fmt::format("{:g}", std::chrono::duration<double>(target).count()));
}

// What `tribunal verify` is given.
struct VerifySettings {
  std::string file, key_hex;
  bool json = false;
  DataRegistry weights;  // a job with model.init: its weights, to check the job id
};

int run_verify(const VerifySettings& s) {
  if (s.file.empty()) throw UsageError("give a verdict file");
  // Anyone can sign a verdict: only the signature of the referee one trusts proves anything.
  if (s.key_hex.empty())
    throw UsageError("--referee-key HEX is required (a verdict signed by an unchecked key proves nothing)");
  const std::string& file = s.file;
  const PublicKey referee = public_key_arg("--referee-key", s.key_hex);
  const std::vector<uint8_t> bytes = read_file_bytes(file);
  const Verdict v = about_verdict_file(file, [&] { return verify_verdict(bytes, referee, &s.weights); });
  std::vector<Envelope> claims;
  for (const auto& c : v.opening.claims) claims.push_back(open_envelope(c));
  const std::string op =
      v.op < kOpKindCount ? op_name(static_cast<OpKind>(v.op)) : "op " + std::to_string(v.op);
  // What each party had left on its clock (docs/protocol.md, "Clocks"); checked above for a timeout.
  const auto seconds = [](std::chrono::milliseconds ms) { return std::chrono::duration<double>(ms).count(); };
  const std::string outcome = is_undecided(v.reason) ? "undecided"
                              : v.winners.empty()    ? "no valid claim"
                                                     : "claim stands";
  if (s.json) {
    nlohmann::json out = {{"file", file},
                          {"valid", true},
                          {"referee", to_hex(Digest(referee))},
                          {"job_id", to_hex(v.job_id)},
                          {"dispute_id", to_hex(v.dispute_id)},
                          {"outcome", outcome},
                          {"reason", reason_name(v.reason)},
                          {"winners", v.winners},
                          {"losers", v.losers},
                          {"level", static_cast<int>(v.level)},
                          {"step", v.step},
                          {"node", v.node},
                          {"op", op},
                          {"rounds", v.rounds},
                          {"clock_seconds_left", {seconds(v.clocks[0]), seconds(v.clocks[1])}},
                          {"detail", v.detail}};
    out["claims"] = nlohmann::json::array();
    for (const Envelope& c : claims) {
      const Claim& claim = std::get<Claim>(c.body);
      out["claims"].push_back({{"provider", to_hex(Digest(c.sender))},
                               {"endpoint", claim.endpoint},
                               {"trajectory_root", to_hex(claim.trajectory_root)}});
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  fmt::print("valid verdict signed by referee {}\n", to_hex(Digest(referee)));
  fmt::print("job {}\ndispute {}\n", to_hex(v.job_id), to_hex(v.dispute_id));
  for (size_t i = 0; i < claims.size(); ++i) {
    const Claim& claim = std::get<Claim>(claims[i].body);
    fmt::print("claim {}: provider {} at {}, trajectory_root {}\n", i, to_hex(Digest(claims[i].sender)),
               claim.endpoint, to_hex(claim.trajectory_root));
  }
  fmt::print("outcome: {} ({})\n",
             outcome == "undecided"        ? std::string("undecided, no one convicted")
             : outcome == "no valid claim" ? outcome
                                           : fmt::format("claim {} stands", v.winners[0]),
             reason_name(v.reason));
  fmt::print("located: level {}, step {}, node {} ({}); {} rounds\n", static_cast<int>(v.level), v.step,
             v.node, op, v.rounds);
  fmt::print("clocks: claim 0 {:.3f} s left, claim 1 {:.3f} s left\n", seconds(v.clocks[0]),
             seconds(v.clocks[1]));
  fmt::print("{}\n", v.detail);
  return 0;
}

// What `tribunal referee` is given.
struct RefereeSettings {
  std::string listen, key, metrics;
  LogSettings log;
  RefereeNodeOptions options;
  std::vector<IpNetwork> allowed;
  RefereeSettings() { options.data_dir = "referee-data"; }
};

int run_referee(RefereeSettings& s) {
  RefereeNodeOptions& options = s.options;
  if (s.listen.empty() || s.key.empty()) throw UsageError("--listen and --key need values");
  if (options.data_dir.empty()) throw UsageError("--data needs a directory");
  if (!options.trusted_clients.empty() && options.reserved_disputes >= options.max_live_disputes)
    throw UsageError("--reserved-disputes must be below --max-live-disputes (strangers need some slots)");
  const std::string& listen = s.listen;
  const std::string& key = s.key;
  std::vector<IpNetwork>& allowed = s.allowed;
  check_tls_usage(options.tls);
  const auto [host, port] = host_port(listen);
  const auto metrics =
      s.metrics.empty() ? std::pair<std::string, uint16_t>{} : host_port(s.metrics, "--metrics");
  raise_fd_limit();      // a client connection per live dispute, two provider connections
  keep_freed_buffers();  // before any thread starts
  NetContext ctx(1);
  const Logger log = command_logger(s.log, "referee");
  RefereeNode node(ctx, load_keypair(key), options, log, AddressPolicy::public_only(std::move(allowed)));
  const uint16_t bound = node.listen(host, port);
  log->info(fmt::format(
      "referee: listening on {}:{} (store {}; {}; /metrics, /healthz and /disputes on that port)", host,
      bound, (options.data_dir / "referee.sqlite").string(), options.tls.cert.empty() ? "ws://" : "wss://"));
  if (!s.metrics.empty())
    log->info(fmt::format("referee: metrics on http://{}:{}/metrics", metrics.first,
                          node.listen_metrics(metrics.first, metrics.second)));
  ctx.run();
  return 0;
}

// What `tribunal provider` is given.
struct ProviderSettings {
  std::string listen, key, metrics;
  LogSettings log;
  ProviderConfig config;
};

int run_provider(ProviderSettings& s) {
  ProviderConfig& config = s.config;
  if (s.listen.empty() || s.key.empty() || config.store.empty())
    throw UsageError("--listen, --key and --store need values");
  if (config.referees.empty())
    throw UsageError(
        "give at least one --referee-key: the provider answers disputes only from referees it trusts");
  if (!config.endpoint.empty()) {
    try {
      parse_ws_url(config.endpoint);
    } catch (const NetError& e) {
      throw UsageError(std::string("--advertise: ") + e.what());
    }
  }
  check_tls_usage(config.tls);
  const std::string& listen = s.listen;
  const std::string& key = s.key;
  const auto [host, port] = host_port(listen);
  const auto metrics =
      s.metrics.empty() ? std::pair<std::string, uint16_t>{} : host_port(s.metrics, "--metrics");
  // Under mpirun: rank 0 is the node, the other ranks train each job with it (nodes/training_ranks.h).
  const std::unique_ptr<World> world = launched_world_or_solo();
  const Logger log = command_logger(s.log, "provider");
  std::optional<TrainingRanks> ranks;
  if (world->size() > 1) {
    ranks.emplace(*world);
    if (world->rank() != 0) {
      ranks->follow(config, log);
      return 0;
    }
    config.ranks = &*ranks;
  }
  NetContext ctx(1);
  ProviderNode node(ctx, load_keypair(key), config, log);
  const uint16_t bound = node.listen(host, port);
  log->info(fmt::format("provider: listening on {}:{}, claims name {}; data sets: {}; {} training rank(s)",
                        host, bound, node.endpoint(), fmt::join(config.datasets.names(), ", "),
                        world->size()));
  if (!s.metrics.empty())
    log->info(fmt::format("provider: metrics on http://{}:{}/metrics", metrics.first,
                          node.listen_metrics(metrics.first, metrics.second)));
  ctx.run();
  if (ranks) ranks->stop();
  log->info("provider: shutting down");
  return 0;
}

// What `tribunal delegate` is given.
struct DelegateSettings {
  std::string key, referee_key;
  bool json = false;
  LogSettings log;
  DelegateRequest request;
};

// After a claim stood: the verified final state into --out (nodes/delivery.h), a progress line on
// stderr for large models. Exit 6 when no holder of the accepted claim delivers it. With `json`, what
// happened goes into it instead of a line on stdout.
int deliver_accepted(NetContext& ctx, const DelegateRequest& request, const DelegateOutcome& o,
                     const Logger& log, nlohmann::json* json) {
  DeliveryOptions options;
  options.progress = [](uint64_t received, uint64_t total, double rate) {
    constexpr double kMiB = 1024.0 * 1024.0;
    fmt::print(stderr, "delegate: final state {:.1f} / {:.1f} MiB ({:.1f} MiB/s)\n", received / kMiB,
               total / kMiB, rate / kMiB);
  };
  try {
    const Delivery d = deliver(ctx, request, o, log, options);
    if (json) {
      (*json)["delivered"] = {{"model", (request.out_dir / d.files.model).string()},
                              {"optimizer", (request.out_dir / d.files.optimizer).string()},
                              {"state_hash", to_hex(d.state.state_hash)},
                              {"from", request.providers[d.state.provider]},
                              {"result", d.result.string()}};
      return 0;
    }
    fmt::print("delivered: {} and {} in {} (state_hash {}, from {}); {}\n", d.files.model.string(),
               d.files.optimizer.string(), request.out_dir.string(), to_hex(d.state.state_hash),
               request.providers[d.state.provider], d.result.string());
    return 0;
  } catch (const DeliveryFailed& e) {
    if (json) {
      (*json)["not_delivered"] = e.what();
      return 6;
    }
    fmt::print("not delivered: {}\n", e.what());
    return 6;
  }
}

int run_delegate(DelegateSettings& s) {
  DelegateRequest& request = s.request;
  const std::string& key = s.key;
  if (request.job_file.empty() || request.referee.empty() || request.providers.size() < 2)
    throw UsageError("give JOB.toml, --referee URL and at least two --provider URL");
  if (s.referee_key.empty())
    throw UsageError("--referee-key HEX is required: only that referee's signed verdicts are accepted");
  request.referee_key = public_key_arg("--referee-key", s.referee_key);
  check_tls_usage(request.tls);
  NetContext ctx(1, false);
  ctx.start();
  request.client_key = key.empty() ? generate_keypair() : load_keypair(key);
  const Logger log = command_logger(s.log, "delegate");
  nlohmann::json summary;  // --json: what happened, printed once the context is stopped
  nlohmann::json* json = s.json ? &summary : nullptr;
  const int code = [&] {
    DelegateOutcome o;
    try {
      o = delegate_job(ctx, request, log);
    } catch (const RefereeCheckError& e) {  // nothing trained, nothing to write to --out
      std::fprintf(stderr, "tribunal: error: %s\n", e.what());
      if (json) summary = {{"outcome", "referee check failed"}, {"error", e.what()}};
      return 5;
    }
    const auto& providers = request.providers;
    if (json) {
      summary["claims"] = nlohmann::json::array();
      for (size_t p = 0; p < o.claims.size(); ++p) {
        nlohmann::json c = {{"provider", providers[p]},
                            {"trajectory_root", to_hex(o.claims[p].trajectory_root)}};
        if (!o.refusals[p].empty()) c["refused"] = o.refusals[p];
        summary["claims"].push_back(c);
      }
      summary["verdicts"] = nlohmann::json::array();
      for (const auto& f : o.verdict_files) summary["verdicts"].push_back(f.string());
    }
    if (!o.undecided.empty()) {
      if (json) {
        summary["outcome"] = "undecided";
        summary["undecided"] = o.undecided;
      } else {
        fmt::print("undecided: the referee could not decide a dispute ({}); no claim was convicted\n",
                   o.undecided);
      }
      return 4;
    }
    if (!o.accepted) {
      if (json)
        summary["outcome"] = "no valid claim";
      else
        fmt::print("no valid claim: every claim lost a dispute\n");
      return 3;
    }
    if (json) {
      summary["outcome"] = "accepted";
      summary["winner"] = providers[o.winner];
      summary["trajectory_root"] = to_hex(o.claim.trajectory_root);
    } else {
      fmt::print("accepted: the claim of {} (trajectory_root {}) stands after {} dispute(s)\n",
                 providers[o.winner], to_hex(o.claim.trajectory_root), o.verdicts.size());
      std::fflush(stdout);
    }
    return deliver_accepted(ctx, request, o, log, json);
  }();
  if (json) {
    summary["exit_code"] = code;
    std::printf("%s\n", summary.dump().c_str());
  }
  ctx.stop();
  ctx.join();
  return code;
}

}  // namespace

Command add_keygen(CLI::App& root) {
  auto path = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  CLI::App* app =
      root.add_subcommand("keygen", "make an Ed25519 key file, mode 0600 (prints the public key in hex)");
  app->add_option("keyfile", *path, "the key file to write (an existing one is kept unless --force)")
      ->type_name("KEYFILE");
  app->add_flag("--force", *force,
                "replace an existing key file (every --referee-key or --client-key given out for it stops "
                "matching)");
  app->add_flag("--json", *json, "print one JSON object: the key file and its public key");
  return {
      app, [path, force, json] {
        if (path->empty()) throw UsageError("give the key file to write");
        const KeyPair keys = generate_keypair();
        save_keypair(*path, keys, *force ? KeyFileMode::Overwrite : KeyFileMode::Create);
        const std::string public_key = to_hex(Digest(keys.public_key));
        if (*json)
          std::printf("%s\n", nlohmann::json({{"file", *path}, {"public_key", public_key}}).dump().c_str());
        else
          std::printf("%s\n", public_key.c_str());
        return 0;
      }};
}

Command add_verify(CLI::App& root) {
  auto s = std::make_shared<VerifySettings>();
  CLI::App* app = root.add_subcommand("verify", "check a verdict file offline and print what it says");
  app->add_option("verdict", s->file, "the verdict file (verdict-<dispute id>.bin)")->type_name("VERDICT");
  app->add_option("--referee-key", s->key_hex,
                  "required: the public key of the referee you trust (64 hex digits)")
      ->type_name("HEX");
  app->add_flag("--json", s->json,
                "print one JSON object (ids, claims, outcome, where the dispute was located, clocks)");
  add_weights(*app, s->weights);
  return {app, [s] { return run_verify(*s); }};
}

Command add_referee(CLI::App& root) {
  auto s = std::make_shared<RefereeSettings>();
  RefereeNodeOptions& o = s->options;
  CLI::App* app = root.add_subcommand(
      "referee",
      "serve disputes: drive the bisection game, re-execute one op, sign verdicts; durable and resumed "
      "on restart");
  add_listen_and_key(*app, s->listen, s->key, "referee");
  add_weights(*app, o.dispute.weights);  // a dispute's model.init: the referee derives state 0 from them
  app->add_option("--data", o.data_dir, "durable store: every dispute is kept in DIR/referee.sqlite")
      ->type_name("DIR")
      ->envname("TRIBUNAL_DATA")
      ->default_str(o.data_dir.string());
  add_repeatable(
      *app, "--allow-network", "CIDR", [s](const std::string& v) { s->allowed.push_back(parse_cidr(v)); },
      "providers on loopback, link-local or private addresses are reached only in these networks",
      "--allow-network: ");
  add_public_keys(*app, "--client-key", o.trusted_clients,
                  "a trusted client's public key: its openings may use the reserved slots");
  add_integer(*app, "--reserved-disputes", o.reserved_disputes, 0, 1000000,
              "live-dispute slots kept for --client-key clients (only when there are any)");
  add_integer(*app, "--max-live-disputes", o.max_live_disputes, 1, 1000000,
              "undecided disputes held at once; openings beyond are refused");
  add_integer(*app, "--max-disputes-per-client", o.max_disputes_per_client, 1, 1000000,
              "live disputes per client network (/24 or /48) or trusted key");
  app->add_option_function<size_t>(
         "--max-connections-per-address", [s](size_t n) { s->options.max_connections_per_address = n; },
         "open connections from one peer address; beyond, HTTP 429 (0: no limit; default: "
         "max(128, --max-disputes-per-client + 16))")
      ->type_name("N")
      ->check(CLI::Range(size_t{0}, size_t{1000000}));
  add_integer(*app, "--max-parameters", o.limits.max_parameters, 1, int64_t{1} << 40,
              "a disputed job's model parameters at most");
  add_integer(*app, "--max-reexecution-work", o.limits.max_reexecution_work, 1, int64_t{1} << 50,
              "work of the heaviest node to re-execute, in multiply-adds or elements (a rounding-log job's "
              "times its float64 re-execution's factor)");
  add_integer(*app, "--max-opened-bytes", o.limits.max_opened_bytes, 1, int64_t{1} << 40,
              "input bytes of the node with the largest inputs", "BYTES");
  add_integer(*app, "--max-node-memory", o.limits.max_node_memory, 1, int64_t{1} << 44,
              "bytes held to re-execute one node (a rounding-log job's float64 re-execution counted)",
              "BYTES");
  add_integer(*app, "--max-graph-nodes", o.limits.max_graph_nodes, 1, int64_t{1} << 32,
              "nodes of a disputed job's step graph at most (derived from the job text before it is built)");
  add_integer(*app, "--opening-memory", o.opening_memory, 0, int64_t{1} << 44,
              "opened bytes in flight across the disputes: an input opening beyond it waits, its question "
              "unsent and no clock running (one opening always proceeds)",
              "BYTES");
  add_duration<std::chrono::milliseconds>(
      *app, "--opening-cpu-ms", o.opening_cpu.burst, 0, 3600000,
      "CPU time the openings of one client network (/24, /48) or trusted key may use at once (0: no budget)",
      "MS");
  app->add_option("--opening-cpu-rate", o.opening_cpu.refill_per_second,
                  "CPU-seconds per second given back to each source's opening budget")
      ->type_name("FRACTION")
      ->check(CLI::Range(0.000001, 1024.0))
      ->default_str(fmt::format("{}", o.opening_cpu.refill_per_second));
  add_duration<std::chrono::days>(
      *app, "--retention-days", o.retention, 0, 36500,
      "a decided dispute's record is pruned after this many days (its verdict is kept)", "DAYS");
  add_duration<std::chrono::seconds>(
      *app, "--near-clock-end-seconds", o.near_clock_end, 1, 86400,
      "/metrics counts an undecided dispute as near its clock's end when its awaited party has less "
      "than this left (tribunal_referee_disputes_near_clock_end)",
      "SECONDS")
      ->envname("TRIBUNAL_NEAR_CLOCK_END_SECONDS");
  add_metrics_address(*app, s->metrics);
  add_tls(*app, o.tls, true);
  add_log_options(*app, s->log);
  add_integer(*app, "--workers", o.workers, 0, 1024,
              "threads that play the disputes (0: one per hardware thread); the network has its own")
      ->envname("TRIBUNAL_WORKERS");
  // Test hook, not in --help: SIGKILL right after committing the N-th event (tests/referee_crash.sh).
  add_integer(*app, "--crash-after-events", o.crash_after_events, 1, 1000000000, "test hook")->group("");
  return {app, [s] { return run_referee(*s); }};
}

Command add_provider(CLI::App& root) {
  auto s = std::make_shared<ProviderSettings>();
  ProviderConfig& c = s->config;
  CLI::App* app = root.add_subcommand(
      "provider",
      "train submitted jobs, return claims signed with the URL referees reach it at, answer the referees "
      "it trusts");
  add_listen_and_key(*app, s->listen, s->key, "provider");
  app->add_option("--store", c.store, "checkpoints of each job go to DIR/<job_id>/")
      ->type_name("DIR")
      ->envname("TRIBUNAL_STORE")
      ->required();
  add_public_keys(*app, "--referee-key", c.referees,
                  "required: a referee it answers (public key, 64 hex digits)")
      ->envname("TRIBUNAL_REFEREE_KEY");
  app->add_option("--advertise", c.endpoint,
                  "the ws:// or wss:// URL its claims name (where referees reach it)")
      ->type_name("URL")
      ->envname("TRIBUNAL_ADVERTISE")
      ->default_str("ws://HOST:PORT/ of --listen, wss:// with --tls-cert");
  add_public_keys(*app, "--client-key", c.clients,
                  "accept jobs only from these clients' keys (default: any client)");
  add_datasets(*app, c.datasets);
  add_integer(*app, "--max-steps", c.limits.max_steps, 1, kMaxSteps, "a job's train.steps at most");
  add_integer(*app, "--max-parameters", c.limits.max_parameters, 1, int64_t{1} << 40,
              "a job's model parameters at most");
  add_integer(*app, "--max-checkpoint-bytes", c.limits.max_checkpoint_bytes, 1, int64_t{1} << 50,
              "a job's stride checkpoints on disk at most", "BYTES");
  add_integer(*app, "--max-step-work", c.limits.max_step_work, 1, int64_t{1} << 62,
              "a job's estimated work per step at most (multiply-adds; docs/running.md, \"Job admission\")");
  add_integer(*app, "--max-total-work", c.limits.max_total_work, 1, int64_t{1} << 62,
              "a job's estimated work per step × steps at most");
  add_integer(
      *app, "--max-memory-bytes", c.limits.max_memory_bytes, 1, int64_t{1} << 50,
      "a job's estimated training memory at most (one step's values, activations included, and its states)",
      "BYTES");
  add_integer(*app, "--max-graph-nodes", c.limits.max_graph_nodes, 1, int64_t{1} << 40,
              "nodes of a job's step graph at most (train.shards copies of the forward and backward)");
  add_integer(*app, "--max-concurrent-jobs", c.limits.max_concurrent_jobs, 1, 1024, "jobs trained at once");
  add_integer(*app, "--max-queued-jobs", c.limits.max_queued_jobs, 0, 1 << 20,
              "jobs waiting for a training slot; beyond them a submission is refused");
  // The operator's floors under a job's [dispute] terms: refused at submission, never lost on the clock.
  c.terms.base = std::chrono::seconds(1);
  c.terms.step = std::chrono::milliseconds(100);
  add_seconds(*app, "--min-base-seconds", c.terms.base, "a job's [dispute] base_seconds at least");
  add_seconds(
      *app, "--min-step-seconds", c.terms.step,
      "a job's [dispute] step_seconds at least (and at least its measured step time × --step-safety-factor)");
  add_integer(*app, "--link-bytes-per-second", c.terms.link_bytes_per_second, 1, int64_t{1} << 40,
              "the rate it can stream answers at: a job's [dispute] min_bytes_per_second at most", "BYTES");
  app->add_option("--step-safety-factor", c.terms.safety_factor,
                  "a job's step_seconds at least its measured step time (same model kind, scaled by work) × "
                  "this; 0: off")
      ->check(CLI::Range(0.0, 1000.0))
      ->default_str(fmt::format("{:g}", c.terms.safety_factor));
  app->add_option_function<std::string>(
         "--if-client-leaves",
         [s](const std::string& v) {
           s->config.if_client_leaves = v == "stop" ? ClientLeaves::Stop : ClientLeaves::Continue;
         },
         "a job whose submitting connection closed: stop its training, or train it to the end")
      ->check(CLI::IsMember({"stop", "continue"}))
      ->type_name("stop|continue")
      ->default_str("stop");
  add_integer(*app, "--max-connections-per-address", c.server.max_connections_per_address, 1, 1 << 20,
              "open connections of strangers from one address (proven referees do not count)");
  add_duration<std::chrono::seconds>(*app, "--stranger-idle-seconds", c.stranger_idle, 1, 86400,
                                     "an unproven connection without a message this long is closed",
                                     "SECONDS");
  add_integer(*app, "--threads", c.threads, 1, 256, "training threads", "K")->envname("TRIBUNAL_THREADS");
  add_metrics_address(*app, s->metrics);
  add_tls(*app, c.tls, true);
  add_log_options(*app, s->log);
  add_device(*app, c.device);
  add_simd(*app);
  app->add_option_function<std::string>(
         "--corrupt",
         [s](const std::string& v) { s->config.policy = cheats::fault_policy(parse_corrupt(v)); },
         "cheat: add 0.5 to every element of NODE's output at STEP (to test a referee)")
      ->type_name("STEP:NODE");
  return {app, [s] { return run_provider(*s); }};
}

Command add_delegate(CLI::App& root) {
  auto s = std::make_shared<DelegateSettings>();
  DelegateRequest& r = s->request;
  CLI::App* app = root.add_subcommand(
      "delegate",
      "give a job to several providers, dispute differing claims, fetch and verify the accepted claim's "
      "final state into --out (exit 3: no claim stands, 4: a dispute undecided, 5: the referee failed its "
      "check before any provider trained, 6: no holder delivered the accepted final state)");
  app->add_option("job", r.job_file, "the job file")->type_name("JOB.toml");
  add_repeatable(
      *app, "--provider", "URL", [s](const std::string& v) { s->request.providers.push_back(v); },
      "a provider's ws:// or wss:// URL; at least two");
  app->add_option("--referee", r.referee, "the referee's ws:// or wss:// URL (required)")
      ->type_name("URL")
      ->envname("TRIBUNAL_REFEREE");
  app->add_option("--referee-key", s->referee_key,
                  "required: the referee's public key (64 hex digits); only its signed verdicts are accepted")
      ->type_name("HEX")
      ->envname("TRIBUNAL_REFEREE_KEY");
  app->add_option(
         "--out", r.out_dir,
         "where verdict-<dispute id>.bin, model.safetensors, optimizer.safetensors and result.json go")
      ->type_name("DIR")
      ->default_str(r.out_dir.string());
  app->add_option("--key", s->key, "the client's key file, which signs its jobs and openings")
      ->type_name("KEYFILE")
      ->envname("TRIBUNAL_KEY")
      ->default_str("a fresh key");
  app->add_flag("--roles", r.roles,
                "a rounding-log job with roles: the first --provider trains and logs, the others audit by "
                "replaying its logs (written into the job as [numerics] trainer; docs/numerics.md)");
  add_datasets(*app, r.datasets);
  add_tls(*app, r.tls, false);
  add_log_options(*app, s->log);
  add_duration<std::chrono::seconds>(
      *app, "--progress-seconds", r.progress_every, 1, 86400,
      "log which providers are still training, or how long a dispute has run, every this many seconds",
      "SECONDS");
  app->add_flag("--json", s->json,
                "print one JSON object on stdout (outcome, claims, verdict files, what was delivered) "
                "instead of the result lines; the exit code is the same");
  return {app, [s] { return run_delegate(*s); }};
}

}  // namespace tribunal::cli
