#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sodium.h>

#include "nodes/delegate.h"

#include "dispute/opening.h"
#include "engine/error.h"
#include "engine/progress.h"
#include "engine/trainer.h"
#include "net/client.h"
#include "net/error.h"
#include "nodes/inbox.h"
#include "nodes/progress_poll.h"
#include "nodes/train_set.h"
#include "referee/referee_dispute.h"

namespace tribunal::nodes {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw EngineError(fmt::format("{}: cannot open job file", path.string()));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// How long the client keeps trying to reach a referee whose connection dropped before the verdict
// (it re-sends the same DisputeOpen each time; a restarted referee resumes the dispute from its
// store, or answers with the stored verdict), and the backoff between tries.
constexpr auto kReconnectWindow = std::chrono::seconds(120);
constexpr auto kFirstBackoff = std::chrono::milliseconds(100);
constexpr auto kMaxBackoff = std::chrono::milliseconds(2000);
constexpr int kMaxDrops = 100;
// A progress poll's GET: the progress interval, within [1 s, 5 s].
std::chrono::milliseconds poll_timeout(std::chrono::milliseconds progress_every) {
  return std::clamp<std::chrono::milliseconds>(progress_every, std::chrono::seconds(1),
                                               std::chrono::seconds(5));
}

// The job text with `trainer = "URL"` as the first key of its [numerics] table.
}  // namespace

std::string job_with_trainer(const std::string& toml, const std::string& url) {
  const std::string line = fmt::format("trainer = \"{}\"\n", url);
  size_t at = toml.find("[numerics]");
  while (at != std::string::npos && at > 0 && toml[at - 1] != '\n') at = toml.find("[numerics]", at + 1);
  if (at == std::string::npos)
    throw EngineError(
        "delegate: a job with roles must be a rounding-log job ([numerics] mode = \"rounding-log\")");
  const size_t eol = toml.find('\n', at);
  if (eol == std::string::npos) return toml + "\n" + line;
  return toml.substr(0, eol + 1) + line + toml.substr(eol + 1);
}

void check_referee(NetContext& ctx, const std::string& referee, const PublicKey& referee_key,
                   const std::vector<std::string>& providers, const Logger& log,
                   std::shared_ptr<TlsContext> tls) {
  const auto fail = [&](const std::string& what) {
    return RefereeCheckError(
        fmt::format("referee {} failed its check, so no provider was given the job: {}", referee, what));
  };
  if (providers.size() > kMaxCheckedEndpoints)
    throw fail(fmt::format("at most {} providers can be checked at once", kMaxCheckedEndpoints));
  RefereeCheck check;
  ensure_sodium();
  randombytes_buf(check.nonce.data(), check.nonce.size());
  check.endpoints = providers;
  ClientOptions options;
  options.tls = std::move(tls);
  Client client(ctx, options);
  auto inbox = std::make_shared<Inbox>();
  std::shared_ptr<Session> session;
  try {
    session = client.connect_sync(referee, inbox->handlers());
  } catch (const NetError& e) {
    const bool wss = referee.rfind("wss://", 0) == 0;
    throw fail(
        fmt::format("{}{}", e.what(),
                    wss ? "; for wss:// its certificate must chain to --tls-ca or the system's CAs" : ""));
  }
  // A throwaway key signs the check: the referee learns nothing of the client's key from it.
  session->send(seal(generate_keypair(), check.nonce, 1, check));
  Envelope env;
  try {
    env = inbox->next(std::chrono::seconds(30), referee, MessageKind::RefereeAnswer);
  } catch (const ConnectionLost& e) {
    throw fail(
        fmt::format("it closed the connection without answering the key check (a referee older "
                    "than the RefereeCheck message?): {}",
                    e.what()));
  } catch (const std::exception& e) {
    throw fail(e.what());
  }
  session->close(CloseCode::Normal, "referee checked");
  // open_envelope checked the signature by env.sender; the nonce makes it fresh, the key ours.
  if (env.sender != referee_key)
    throw fail(fmt::format("it holds the key {}, not the --referee-key {}", to_hex(Digest(env.sender)),
                           to_hex(Digest(referee_key))));
  const RefereeAnswer& answer = std::get<RefereeAnswer>(env.body);
  if (env.context != check.nonce || answer.nonce != check.nonce)
    throw fail("its answer is not signed over this check's nonce");
  if (answer.refusals.size() != providers.size())
    throw fail(fmt::format("it judged {} provider endpoints, not the {} asked", answer.refusals.size(),
                           providers.size()));
  for (size_t i = 0; i < providers.size(); ++i)
    if (!answer.refusals[i].empty())
      throw fail(
          fmt::format("it would refuse a dispute naming provider {}: {}", providers[i], answer.refusals[i]));
  log->info(fmt::format("delegate: referee {} holds key {} and accepts the {} provider endpoints", referee,
                        to_hex(Digest(referee_key)).substr(0, 16), providers.size()));
}

Envelope await_verdict(NetContext& ctx, const std::string& referee, const PublicKey& referee_key,
                       const std::vector<uint8_t>& open, const Logger& log, std::shared_ptr<TlsContext> tls,
                       std::chrono::milliseconds progress_every) {
  const Digest dispute = open_envelope(open).context;
  // The dispute's level and round, from the referee's /disputes.json at the configured URL.
  const ProgressPoll poll(poll_timeout(progress_every), tls);
  bool said_unreadable = false;
  ClientOptions options;
  options.tls = std::move(tls);
  Client client(ctx, options);
  using clock = std::chrono::steady_clock;
  auto give_up = clock::now() + kReconnectWindow;
  auto backoff = kFirstBackoff;
  bool reached = false;
  int drops = 0;  // connections that ended without a verdict: a referee that keeps dropping us is given up
  for (;;) {
    auto inbox = std::make_shared<Inbox>();
    std::shared_ptr<Session> session;
    try {
      session = client.connect_sync(referee, inbox->handlers());
      session->send(open);
      reached = true;
      give_up = clock::now() + kReconnectWindow;  // reached it: the window restarts
      backoff = kFirstBackoff;
      const auto opened = std::chrono::steady_clock::now();
      Envelope env = inbox->next(
          std::chrono::hours(24), referee, MessageKind::Verdict,
          [&] {
            log->info(fmt::format("delegate: dispute {} at {}: no verdict yet after {}",
                                  to_hex(dispute).substr(0, 16), referee,
                                  format_duration(std::chrono::steady_clock::now() - opened)));
            std::string why;
            if (const auto level = poll.dispute(referee, dispute, &why))
              log->info(fmt::format("delegate: dispute {} {}", to_hex(dispute).substr(0, 16),
                                    dispute_level_text(*level)));
            else if (!std::exchange(said_unreadable, true))
              log->info(
                  fmt::format("delegate: dispute {}: its level is not shown ({}; a referee shows it "
                              "with a store, --data)",
                              to_hex(dispute).substr(0, 16), why));
            else
              log->debug(fmt::format("delegate: dispute {}: {}", to_hex(dispute).substr(0, 16), why));
          },
          progress_every);
      session->close(CloseCode::Normal, "verdict received");
      // Over ws:// anyone on the path could hand us a verdict: only the pinned referee's counts.
      if (env.sender != referee_key)
        throw ProtocolError(fmt::format("{}: the verdict is signed by {}, not by the referee's key {}",
                                        referee, to_hex(Digest(env.sender)), to_hex(Digest(referee_key))));
      if (env.context != dispute)
        throw ProtocolError(fmt::format("{}: the verdict is for another dispute", referee));
      return env;
    } catch (const ConnectionLost& e) {
      if (++drops > kMaxDrops || clock::now() >= give_up) throw;
      log->warn(fmt::format("delegate: {}; reconnecting", e.what()));
    } catch (const NetError& e) {
      if (!reached) throw;
      if (clock::now() >= give_up)
        throw EngineError(
            fmt::format("{}: unreachable for {} s: {}", referee, kReconnectWindow.count(), e.what()));
      log->warn(fmt::format("delegate: {}; retrying", e.what()));
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::duration_cast<std::chrono::milliseconds>(kMaxBackoff));
  }
}

DelegateOutcome delegate_job(NetContext& ctx, const DelegateRequest& request, Logger log) {
  const std::vector<std::string>& providers = request.providers;
  const std::string& referee = request.referee;
  if (providers.size() < 2) throw EngineError("delegate: give at least two providers");
  std::string toml = read_text(request.job_file);
  JobSpec job = parse_job(toml, request.job_file.string());
  if (request.roles) {
    if (job.numerics.mode != NumericsMode::RoundingLog)
      throw EngineError(
          "delegate: a job with roles must be a rounding-log job ([numerics] mode = \"rounding-log\")");
    // A job that names its trainer keeps it: the first provider listed may be reached at another URL
    // (a proxy, an alias) than the endpoint it signs; its claim must sign the named one (below).
    if (job.numerics.trainer.empty()) {
      toml = job_with_trainer(toml, providers[0]);
      job = parse_job(toml, request.job_file.string());
    }
  }
  locate_data(job, request.datasets);
  ThreadPool pool(1);
  const std::shared_ptr<const Dataset> train = shared_train_set(job, pool);
  const Dataset& data = *train;
  check_job_against_dataset(job, data);
  const Digest id = job_id(job, data);
  const LogScope job_scope({"", to_hex(id)});  // every line of this delegation names its job
  log->info(fmt::format("delegate: job {} ({} steps, stride {}) to {} providers", to_hex(id).substr(0, 16),
                        job.steps, job.stride, providers.size()));

  const std::shared_ptr<TlsContext> tls = TlsContext::client(request.tls);
  // A wrong referee URL, key or policy is found before any provider trains.
  check_referee(ctx, referee, request.referee_key, providers, log, tls);
  ClientOptions client_options;
  client_options.tls = tls;
  Client client(ctx, client_options);
  std::vector<std::shared_ptr<Inbox>> inboxes;
  std::vector<std::shared_ptr<Session>> sessions;
  std::vector<std::vector<uint8_t>> claim_envelopes;
  const auto submit = [&](size_t p) {
    inboxes[p] = std::make_shared<Inbox>();
    sessions[p] = client.connect_sync(providers[p], inboxes[p]->handlers());
    JobSubmit job_submit{toml, {}};
    // An auditor replays only logs signed by the key of the trainer's claim we hold (docs/numerics.md,
    // "Trainer and auditors"): it gets that claim with the job.
    if (request.roles && p > 0) job_submit.trainer_claim = claim_envelopes.at(0);
    sessions[p]->send(seal(request.client_key, id, 1, std::move(job_submit)));
  };
  inboxes.resize(providers.size());
  sessions.resize(providers.size());
  // With roles the auditors get the job once the trainer's claim is in: they replay its logs.
  for (size_t p = 0; p < (request.roles ? 1 : providers.size()); ++p) submit(p);
  DelegateOutcome out;
  out.job_toml = toml;
  // While the providers train: which have answered, every progress_every, and each one's training
  // step and rate as its /metrics shows them (docs/running.md, "Progress").
  const auto submitted = std::chrono::steady_clock::now();
  const ProgressPoll poll(poll_timeout(request.progress_every), tls);
  const auto claims_progress = [&](size_t taken) {
    std::vector<std::string> waiting;
    size_t in = taken;
    for (size_t q = taken; q < providers.size(); ++q)
      if (inboxes[q] && inboxes[q]->has_news())  // (with roles an auditor gets the job after the trainer)
        ++in;
      else
        waiting.push_back(providers[q]);
    log->info(fmt::format("delegate: job {}: {} of {} claims in after {}; still training: {}",
                          to_hex(id).substr(0, 16), in, providers.size(),
                          format_duration(std::chrono::steady_clock::now() - submitted),
                          fmt::join(waiting, ", ")));
    // Each one still training: its progress from its /metrics, at the URL it was given as.
    for (size_t q = taken; q < providers.size(); ++q) {
      if (!inboxes[q] || inboxes[q]->has_news()) continue;
      std::string why;
      if (const auto p = poll.training(providers[q], job.steps, &why))
        log->info(fmt::format("delegate: provider {} {}", providers[q], training_progress_text(*p)));
      else
        log->debug(fmt::format("delegate: provider {}: no progress shown: {}", providers[q], why));
    }
  };
  for (size_t p = 0; p < providers.size(); ++p) {
    if (request.roles && p == 1)
      for (size_t a = 1; a < providers.size(); ++a) submit(a);
    Envelope env;
    try {
      env = inboxes[p]->next(
          std::chrono::hours(24), providers[p], MessageKind::Claim, [&] { claims_progress(p); },
          request.progress_every);
    } catch (const EngineError& e) {
      // An auditor that cannot replay the trainer's logs (withheld, or not proven) makes no claim.
      if (!request.roles || p == 0) throw;
      log->warn(fmt::format("delegate: no claim from auditor {}: {}", providers[p], e.what()));
      out.claims.emplace_back();
      out.claim_envelopes.emplace_back();
      claim_envelopes.emplace_back();
      out.refusals.push_back(std::string("no claim: ") + e.what());
      continue;
    }
    const Claim& c = std::get<Claim>(env.body);
    out.claims.push_back(c);
    out.claim_envelopes.push_back(env.bytes);
    claim_envelopes.push_back(env.bytes);
    sessions[p]->close(CloseCode::Normal, "claim received");
    // A claim that is not about this job, or that no referee could act on, cannot stand and needs no
    // referee: it is refused here.
    std::string refusal;
    if (env.context != id || c.job_id != id)
      refusal = "its claim is for another job";
    else if (c.steps != static_cast<uint64_t>(job.steps))
      refusal = fmt::format("its claim is for {} steps, the job has {}", c.steps, job.steps);
    else if (env.bytes.size() > kMaxClaimEnvelopeBytes)
      refusal = "its claim envelope is too large to be disputed";
    else if (request.roles && (p == 0) != (c.endpoint == job.numerics.trainer))
      refusal = p == 0 ? "the trainer's claim does not sign the endpoint the job names as its trainer"
                       : "an auditor's claim signs the trainer's endpoint";
    else
      try {
        parse_ws_url(c.endpoint);
      } catch (const NetError& e) {
        refusal = std::string("its claim names no usable endpoint: ") + e.what();
      }
    out.refusals.push_back(refusal);
    if (!refusal.empty())
      log->warn(fmt::format("delegate: refused the claim of {}: {}", providers[p], refusal));
    else
      log->info(fmt::format("delegate: claim from {}: trajectory_root {}, endpoint {}", providers[p],
                            to_hex(c.trajectory_root).substr(0, 16), c.endpoint));
  }

  // Pairwise disputes: the standing claim meets each differing one; an honest claim never loses.
  std::error_code ec;
  std::filesystem::create_directories(request.out_dir, ec);
  // An index with `none` for no claim, not std::optional: g++ 12 at -O3 warns falsely
  // (-Wmaybe-uninitialized).
  constexpr size_t none = SIZE_MAX;
  size_t standing = none;
  for (size_t p = 0; p < providers.size(); ++p) {
    if (!out.refusals[p].empty()) continue;
    if (standing == none) {
      standing = p;
      continue;
    }
    const size_t held = standing;
    if (out.claims[p].trajectory_root == out.claims[held].trajectory_root) continue;
    if (request.roles && held != 0) {
      // Two auditors of a convicted trainer: a dispute of a job with roles needs its trainer.
      log->warn(
          fmt::format("delegate: the claims of auditors {} and {} differ; without the trainer no "
                      "referee decides between them: {}'s is not taken",
                      providers[held], providers[p], providers[p]));
      continue;
    }
    const DisputeOpen d = dispute_open(toml, data, claim_envelopes[held], claim_envelopes[p]);
    const Digest dispute = dispute_id(d);
    const LogScope dispute_scope({to_hex(dispute), to_hex(id)});
    log->info(fmt::format("delegate: claims of {} and {} differ: dispute {} at {}", providers[held],
                          providers[p], to_hex(dispute).substr(0, 16), referee));
    const Envelope env =
        await_verdict(ctx, referee, request.referee_key, seal(request.client_key, dispute, 1, d), log, tls,
                      request.progress_every);
    const Verdict v = verify_verdict(env.bytes, request.referee_key, &request.datasets);
    if (v.dispute_id != dispute || v.opening != d)
      throw EngineError(fmt::format("{}: the verdict is about another opening than ours", referee));
    const auto file = request.out_dir / ("verdict-" + to_hex(dispute).substr(0, 16) + ".bin");
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(env.bytes.data()),
               static_cast<std::streamsize>(env.bytes.size()));
    out.verdicts.push_back(env.bytes);
    out.verdict_files.push_back(file);
    log->info(fmt::format("delegate: verdict {} → {}", reason_name(v.reason), file.string()));
    if (is_undecided(v.reason)) {
      out.undecided = v.detail;
      return out;
    }
    if (v.winners.empty())
      standing = none;
    else if (v.winners[0] == 1)
      standing = p;
  }
  // With roles a trainer's claim stands only once an auditor replayed its logs to the same claim or
  // it won a dispute against one: an unaudited claim (its logs withheld) is not accepted.
  if (request.roles && standing == 0) {
    bool audited = false;
    for (size_t p = 1; p < providers.size(); ++p) audited = audited || out.refusals[p].empty();
    if (!audited) {
      log->warn("delegate: no auditor replayed the trainer's logs: its claim is not accepted");
      standing = none;
    }
  }
  if (standing != none) {
    out.accepted = true;
    out.winner = standing;
    out.claim = out.claims[standing];
  }
  return out;
}

}  // namespace tribunal::nodes
