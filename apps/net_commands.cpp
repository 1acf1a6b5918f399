// `tribunal keygen | verify | referee | provider | delegate`.
#include <cstdio>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "apps/cli.h"
#include "apps/nodes.h"

namespace tribunal::cli {
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
  std::ifstream in(file, std::ios::binary);
  if (!in) throw ProtocolError(file + ": cannot open");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  PublicKey referee{};
  if (!key_hex.empty()) referee = digest_from_hex(key_hex);
  const Verdict v = verify_verdict(bytes, key_hex.empty() ? nullptr : &referee);
  const Envelope env = open_envelope(bytes);
  fmt::print("valid verdict signed by referee {}\n", to_hex(Digest(env.sender)));
  fmt::print("job {}\ndispute {}\n", to_hex(v.job_id), to_hex(v.dispute_id));
  fmt::print("outcome: {} ({})\n",
             v.winners.empty() ? std::string("no valid claim") : fmt::format("claim {} stands", v.winners[0]),
             reason_name(v.reason));
  fmt::print("located: level {}, step {}, node {}, op {}; {} rounds\n", static_cast<int>(v.level), v.step, v.node, v.op,
             v.rounds);
  fmt::print("{}\n", v.detail);
  return 0;
}

int referee_main(Args& args) {
  std::string listen, key;
  RefereeOptions options;
  options.data_dir = "referee-data";
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--listen") listen = args.value(a);
    else if (a == "--key") key = args.value(a);
    else if (a == "--data") options.data_dir = args.value(a);
    else if (a == "--answer-timeout-ms") options.answer_timeout_ms = static_cast<uint64_t>(args.integer(a, 1, 86400000));
    else if (a == "--recompute-timeout-ms") options.recompute_timeout_ms = static_cast<uint64_t>(args.integer(a, 1, 86400000));
    else if (a == "--max-live-disputes") options.max_live_disputes = static_cast<size_t>(args.integer(a, 1, 1000000));
    else if (a == "--max-disputes-per-client")
      options.max_disputes_per_client = static_cast<size_t>(args.integer(a, 1, 1000000));
    // Test hook, not in the usage text: SIGKILL right after committing the N-th event (tests/referee_crash.sh).
    else if (a == "--crash-after-events") options.crash_after_events = static_cast<uint64_t>(args.integer(a, 1, 1000000000));
    else throw UsageError("referee: unknown option '" + std::string(a) + "'");
  }
  if (listen.empty() || key.empty()) throw UsageError("referee: --listen and --key are required");
  if (options.data_dir.empty()) throw UsageError("referee: --data needs a directory");
  const auto [host, port] = host_port(listen);
  raise_fd_limit();  // a client connection per live dispute, two provider connections
  NetContext ctx(1);
  RefereeNode node(ctx, load_keypair(key), options, log_line);
  const uint16_t bound = node.listen(host, port);
  log_line(fmt::format("referee: listening on {}:{} (store {})", host, bound, (options.data_dir / "referee.sqlite").string()));
  ctx.run();
  return 0;
}

int provider_main(Args& args) {
  std::string listen, key, store;
  int threads = 1;
  Fault fault;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--listen") listen = args.value(a);
    else if (a == "--key") key = args.value(a);
    else if (a == "--store") store = args.value(a);
    else if (a == "--threads") threads = static_cast<int>(args.integer(a, 1, 256));
    else if (a == "--corrupt") fault = parse_corrupt(args.value(a));
    else throw UsageError("provider: unknown option '" + std::string(a) + "'");
  }
  if (listen.empty() || key.empty() || store.empty()) throw UsageError("provider: --listen, --key and --store are required");
  const auto [host, port] = host_port(listen);
  NetContext ctx(1);
  ProviderNode node(ctx, load_keypair(key), store, threads, fault, log_line);
  const uint16_t bound = node.listen(host, port);
  log_line(fmt::format("provider: listening on {}:{}", host, bound));
  ctx.run();
  return 0;
}

int delegate_main(Args& args) {
  std::string job, referee, out = "verdicts", key;
  std::vector<std::string> providers;
  while (!args.done()) {
    const std::string_view a = args.next();
    if (a == "--provider") providers.push_back(args.value(a));
    else if (a == "--referee") referee = args.value(a);
    else if (a == "--out") out = args.value(a);
    else if (a == "--key") key = args.value(a);
    else if (!a.empty() && a[0] == '-') throw UsageError("delegate: unknown option '" + std::string(a) + "'");
    else job = std::string(a);
  }
  if (job.empty() || referee.empty() || providers.size() < 2)
    throw UsageError("delegate: give JOB.toml, --referee URL and at least two --provider URL");
  NetContext ctx(1, false);
  ctx.start();
  const KeyPair client_key = key.empty() ? generate_keypair() : load_keypair(key);
  const DelegateOutcome o = delegate_job(ctx, job, providers, referee, out, client_key, log_line);
  ctx.stop();
  ctx.join();
  if (o.accepted)
    fmt::print("accepted: the claim of {} (trajectory_root {}) stands after {} dispute(s)\n", providers[o.winner],
               to_hex(o.claim.trajectory_root), o.verdicts.size());
  else
    fmt::print("no valid claim: every claim lost a dispute\n");
  return o.accepted ? 0 : 3;
}

}  // namespace tribunal::cli
