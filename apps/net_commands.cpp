// `tribunal keygen | verify | referee | provider | delegate`.
#include <cstdio>
#include <fstream>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/cli.h"
#include "nodes/delegate.h"
#include "ops/registry.h"
#include "nodes/provider_node.h"
#include "nodes/referee_node.h"
#include "nodes/train_set.h"
#include "engine/error.h"
#include "net/error.h"
#include "nodes/key_file.h"

namespace tribunal::cli {

using namespace tribunal::nodes;  // the roles this command line runs
namespace {

void log_line(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

// "HOST:PORT" → (host, port).
std::pair<std::string, uint16_t> host_port(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos) throw UsageError("--listen expects HOST:PORT, got '" + s + "'");
  int port = -1;
  try {
    port = std::stoi(s.substr(colon + 1));
  } catch (...) {
  }
  if (port < 0 || port > 65535) throw UsageError("--listen: bad port in '" + s + "'");
  std::string host = s.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return {host, static_cast<uint16_t>(port)};
}

// "STEP:NODE" → a fault adding 0.5 to every element of that node's first output (a cheater, for
// testing a network's referee).
Fault parse_corrupt(const std::string& s) {
  Fault f;
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

// A public key given in hex (--referee-key, --client-key).
PublicKey public_key_arg(std::string_view flag, const std::string& hex) {
  try {
    return digest_from_hex(hex);
  } catch (const std::exception&) {
    throw UsageError(std::string(flag) + " expects a public key as 64 hex digits (tribunal keygen prints it), got '" +
                     hex + "'");
  }
}

void add_dataset(DataRegistry& registry, const std::string& spec) {
  try {
    registry.add(std::string_view(spec));
  } catch (const EngineError& e) {
    throw UsageError(e.what());
  }
}

}  // namespace

int keygen_main(Args& args) {
  if (args.done()) throw UsageError("keygen: give the key file to write");
  const std::string path(args.next());
  const KeyPair keys = generate_keypair();
  save_keypair(path, keys);
  std::printf("%s\n", to_hex(Digest(keys.public_key)).c_str());
  return 0;
}

int verify_main(Args& args) {
  std::string file, key_hex;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--referee-key") key_hex = args.value(a);
    else if (file.empty()) file = std::string(a);
    else throw UsageError("verify: one verdict file at a time");
  }
  if (file.empty()) throw UsageError("verify: give a verdict file");
  // Anyone can sign a verdict: only the signature of the referee one trusts proves anything.
  if (key_hex.empty()) throw UsageError("verify: --referee-key HEX is required (a verdict signed by an unchecked key proves nothing)");
  const PublicKey referee = public_key_arg("--referee-key", key_hex);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ProtocolError(file + ": cannot open");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Verdict v = verify_verdict(bytes, referee);
  fmt::print("valid verdict signed by referee {}\n", to_hex(Digest(referee)));
  fmt::print("job {}\ndispute {}\n", to_hex(v.job_id), to_hex(v.dispute_id));
  for (size_t i = 0; i < v.opening.claims.size(); ++i) {
    const Envelope c = open_envelope(v.opening.claims[i]);
    const Claim& claim = std::get<Claim>(c.body);
    fmt::print("claim {}: provider {} at {}, trajectory_root {}\n", i, to_hex(Digest(c.sender)), claim.endpoint,
               to_hex(claim.trajectory_root));
  }
  fmt::print("outcome: {} ({})\n",
             v.reason == VerdictReason::RefereeFault ? std::string("undecided, no one convicted")
             : v.winners.empty()                     ? std::string("no valid claim")
                                                     : fmt::format("claim {} stands", v.winners[0]),
             reason_name(v.reason));
  const std::string op = v.op < kOpKindCount ? op_name(static_cast<OpKind>(v.op)) : "op " + std::to_string(v.op);
  fmt::print("located: level {}, step {}, node {} ({}); {} rounds\n", static_cast<int>(v.level), v.step, v.node, op,
             v.rounds);
  fmt::print("{}\n", v.detail);
  return 0;
}

int referee_main(Args& args) {
  std::string listen, key;
  RefereeNodeOptions options;
  std::vector<IpNetwork> allowed;
  options.data_dir = "referee-data";
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--listen") listen = args.value(a);
    else if (a == "--key") key = args.value(a);
    else if (a == "--data") options.data_dir = args.value(a);
    else if (a == "--allow-network") {
      try {
        allowed.push_back(parse_cidr(args.value(a)));
      } catch (const NetError& e) {
        throw UsageError(std::string("referee: --allow-network: ") + e.what());
      }
    }
    else if (a == "--max-live-disputes") options.max_live_disputes = static_cast<size_t>(args.integer(a, 1, 1000000));
    else if (a == "--max-disputes-per-client")
      options.max_disputes_per_client = static_cast<size_t>(args.integer(a, 1, 1000000));
    else if (a == "--client-key") options.trusted_clients.push_back(public_key_arg(a, args.value(a)));
    else if (a == "--reserved-disputes") options.reserved_disputes = static_cast<size_t>(args.integer(a, 0, 1000000));
    else if (a == "--max-parameters") options.limits.max_parameters = args.integer(a, 1, int64_t{1} << 40);
    else if (a == "--max-reexecution-work")
      options.limits.max_reexecution_work = static_cast<uint64_t>(args.integer(a, 1, int64_t{1} << 50));
    else if (a == "--max-opened-bytes")
      options.limits.max_opened_bytes = static_cast<uint64_t>(args.integer(a, 1, int64_t{1} << 40));
    else if (a == "--retention-days") options.retention = std::chrono::days(args.integer(a, 0, 36500));
    // Test hook, not in the usage text: SIGKILL right after committing the N-th event (tests/referee_crash.sh).
    else if (a == "--crash-after-events") options.crash_after_events = static_cast<uint64_t>(args.integer(a, 1, 1000000000));
    else throw UsageError("referee: unknown option '" + std::string(a) + "'");
  }
  if (listen.empty() || key.empty()) throw UsageError("referee: --listen and --key are required");
  if (options.data_dir.empty()) throw UsageError("referee: --data needs a directory");
  if (!options.trusted_clients.empty() && options.reserved_disputes >= options.max_live_disputes)
    throw UsageError("referee: --reserved-disputes must be below --max-live-disputes (strangers need some slots)");
  const auto [host, port] = host_port(listen);
  raise_fd_limit();  // a client connection per live dispute, two provider connections
  NetContext ctx(1);
  RefereeNode node(ctx, load_keypair(key), options, log_line, AddressPolicy::public_only(std::move(allowed)));
  const uint16_t bound = node.listen(host, port);
  log_line(fmt::format("referee: listening on {}:{} (store {})", host, bound, (options.data_dir / "referee.sqlite").string()));
  ctx.run();
  return 0;
}

int provider_main(Args& args) {
  std::string listen, key;
  ProviderConfig config;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--listen") listen = args.value(a);
    else if (a == "--key") key = args.value(a);
    else if (a == "--store") config.store = args.value(a);
    else if (a == "--threads") config.threads = static_cast<int>(args.integer(a, 1, 256));
    else if (a == "--referee-key") config.referees.push_back(public_key_arg(a, args.value(a)));
    else if (a == "--client-key") config.clients.push_back(public_key_arg(a, args.value(a)));
    else if (a == "--dataset") add_dataset(config.datasets, args.value(a));
    else if (a == "--advertise") config.endpoint = args.value(a);
    else if (a == "--max-steps") config.limits.max_steps = args.integer(a, 1, kMaxSteps);
    else if (a == "--max-parameters") config.limits.max_parameters = args.integer(a, 1, int64_t{1} << 40);
    else if (a == "--max-checkpoint-bytes")
      config.limits.max_checkpoint_bytes = static_cast<uint64_t>(args.integer(a, 1, int64_t{1} << 50));
    else if (a == "--corrupt") config.fault = parse_corrupt(args.value(a));
    else throw UsageError("provider: unknown option '" + std::string(a) + "'");
  }
  if (listen.empty() || key.empty() || config.store.empty())
    throw UsageError("provider: --listen, --key and --store are required");
  if (config.referees.empty())
    throw UsageError("provider: give at least one --referee-key: the provider answers disputes only from referees it trusts");
  if (!config.endpoint.empty()) {
    try {
      parse_ws_url(config.endpoint);
    } catch (const NetError& e) {
      throw UsageError(std::string("provider: --advertise: ") + e.what());
    }
  }
  const auto [host, port] = host_port(listen);
  NetContext ctx(1);
  ProviderNode node(ctx, load_keypair(key), config, log_line);
  const uint16_t bound = node.listen(host, port);
  log_line(fmt::format("provider: listening on {}:{}, claims name {}; data sets: {}", host, bound, node.endpoint(),
                       fmt::join(config.datasets.names(), ", ")));
  ctx.run();
  return 0;
}

int delegate_main(Args& args) {
  std::string key, referee_key;
  DelegateRequest request;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--provider") request.providers.push_back(args.value(a));
    else if (a == "--referee") request.referee = args.value(a);
    else if (a == "--referee-key") referee_key = args.value(a);
    else if (a == "--out") request.out_dir = args.value(a);
    else if (a == "--key") key = args.value(a);
    else if (a == "--dataset") add_dataset(request.datasets, args.value(a));
    else if (!a.empty() && a[0] == '-') throw UsageError("delegate: unknown option '" + std::string(a) + "'");
    else request.job_file = std::string(a);
  }
  if (request.job_file.empty() || request.referee.empty() || request.providers.size() < 2)
    throw UsageError("delegate: give JOB.toml, --referee URL and at least two --provider URL");
  if (referee_key.empty())
    throw UsageError("delegate: --referee-key HEX is required: only that referee's signed verdicts are accepted");
  request.referee_key = public_key_arg("--referee-key", referee_key);
  NetContext ctx(1, false);
  ctx.start();
  request.client_key = key.empty() ? generate_keypair() : load_keypair(key);
  const DelegateOutcome o = delegate_job(ctx, request, log_line);
  ctx.stop();
  ctx.join();
  const auto& providers = request.providers;
  if (!o.undecided.empty()) {
    fmt::print("undecided: the referee could not decide a dispute ({}); no claim was convicted\n", o.undecided);
    return 4;
  }
  if (o.accepted)
    fmt::print("accepted: the claim of {} (trajectory_root {}) stands after {} dispute(s)\n", providers[o.winner],
               to_hex(o.claim.trajectory_root), o.verdicts.size());
  else
    fmt::print("no valid claim: every claim lost a dispute\n");
  return o.accepted ? 0 : 3;
}

}  // namespace tribunal::cli
