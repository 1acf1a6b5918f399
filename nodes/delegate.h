// The delegating client: `tribunal delegate` as a library (sends a job to providers, checks their
// claims, disputes differing ones at a referee, verifies the verdicts).
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/data_registry.h"
#include "engine/error.h"
#include "net/context.h"
#include "net/tls.h"
#include "nodes/log.h"
#include "protocol/wire.h"

namespace tribunal::nodes {

/// The outcome of `tribunal delegate`.
struct DelegateOutcome {
  bool accepted = false;                       ///< some claim stands
  size_t winner = 0;                           ///< index into the providers of the standing claim
  Claim claim;                                 ///< the standing claim
  std::vector<Claim> claims;                   ///< every provider's claim, in order
  std::vector<std::string> refusals;           ///< per provider: why its claim was refused (empty: valid)
  std::vector<std::vector<uint8_t>> verdicts;  ///< signed verdict envelopes, in dispute order
  std::vector<std::filesystem::path> verdict_files;
  /// Every provider's claim as the signed envelope received, in order (result.json, nodes/delivery.h).
  std::vector<std::vector<uint8_t>> claim_envelopes;
  /// Non-empty when the referee could not decide a dispute (a RefereeFault verdict: no one was
  /// convicted): why. The delegation then stops with no claim accepted.
  std::string undecided;
  /// The job text the providers were given: the job file's, with `[numerics] trainer` written in when
  /// the delegation has roles (DelegateRequest::roles), so its id is the one the claims sign.
  std::string job_toml;
};

/// What `tribunal delegate` is asked to do.
struct DelegateRequest {
  std::filesystem::path job_file;
  std::vector<std::string> providers;              ///< provider URLs (at least two)
  std::string referee;                             ///< the referee's URL
  PublicKey referee_key{};                         ///< the only key whose verdicts are accepted
  std::filesystem::path out_dir = "verdicts";      ///< verdict-<dispute id>.bin files
  KeyPair client_key;                              ///< signs the JobSubmits and DisputeOpens
  DataRegistry datasets = DataRegistry::debian();  ///< where the job's data set is, to compute its id
  /// For wss:// URLs: `tls.ca` is what the referee's and providers' certificates must chain to
  /// (empty: the system's CAs); cert and key are not used.
  TlsFiles tls;
  /// How often the log says what it still waits for: the claims of providers still training, with
  /// each one's step, rate and ETA from its /metrics, and a dispute's verdict, with its level and
  /// round from the referee's /disputes.json (docs/running.md, "Progress"; GETs at the --provider and
  /// --referee URLs only).
  std::chrono::milliseconds progress_every{10000};
  /// A rounding-log job with roles (docs/numerics.md, "Trainer and auditors"): the first provider
  /// listed trains and the others audit it. A job that names no trainer gets the first provider's URL
  /// as its trainer ([numerics] trainer); a job that names one keeps it, so a trainer the client
  /// reaches at another URL (a proxy, an alias) is named by the endpoint it signs. The trainer's claim
  /// must sign the named endpoint. The delegate gives the job to the trainer first and to the auditors
  /// once its claim is in, and disputes each auditor's differing claim with the trainer's.
  bool roles = false;
};

/// `toml` (a rounding-log job's text that names no trainer) with `[numerics] trainer = "url"` added
/// after its [numerics] header. Throws EngineError when the text has no [numerics] table.
std::string job_with_trainer(const std::string& toml, const std::string& url);

/// The referee failed the check made before any provider is given the job (check_referee): the
/// delegation stopped with nothing trained. `tribunal delegate` exits 5 on it (docs/running.md).
class RefereeCheckError : public EngineError {
 public:
  using EngineError::EngineError;
};

/// Checks the referee at URL `referee` before any provider trains (docs/protocol.md, "Checking the
/// referee"): it must be reachable (for wss://, with a certificate that chains to `tls`' CAs), prove
/// with a RefereeAnswer signed under a fresh random nonce that it holds `referee_key`, and accept
/// every URL of `providers` as a provider endpoint (its address policy: e.g. a private address
/// without its `--allow-network`). Throws RefereeCheckError naming the referee and what failed.
/// `ctx` must be running on other threads (NetContext::start).
void check_referee(NetContext& ctx, const std::string& referee, const PublicKey& referee_key,
                   const std::vector<std::string>& providers, const Logger& log,
                   std::shared_ptr<TlsContext> tls = nullptr);

/// Sends `open` (a signed DisputeOpen envelope) to the referee at URL `referee` and waits for its
/// verdict envelope, which must be signed by `referee_key` for this dispute (a verdict signed by
/// another key, e.g. forged by someone on the path, is refused with ProtocolError). Once the referee
/// was reached, a dropped connection is re-established with backoff (100 ms doubling to 2 s) and the
/// same opening re-sent, for up to 120 s after the last working connection and at most 100 times: a
/// restarted referee resumes the dispute or answers with its stored verdict. Throws NetError if the
/// referee is never reached, EngineError if it refuses the opening (ErrorMessage) or stays away.
/// `ctx` must be running on other threads (NetContext::start).
/// `tls`: the CAs for a wss:// referee URL (null: the system's). Every `progress_every` without the
/// verdict, an info line says how long the dispute has run, and one its level and round as the
/// referee's /disputes.json at `referee` shows them (nodes/progress_poll.h; a referee without a store
/// serves none: said once).
Envelope await_verdict(NetContext& ctx, const std::string& referee, const PublicKey& referee_key,
                       const std::vector<uint8_t>& open, const Logger& log,
                       std::shared_ptr<TlsContext> tls = nullptr,
                       std::chrono::milliseconds progress_every = std::chrono::seconds(10));

/// `tribunal delegate`: checks the referee (check_referee; RefereeCheckError before any provider is
/// contacted), sends the job to every provider, collects signed claims, and disputes
/// differing claims at the referee until one stands, none does, or one is undecided. Every verdict
/// is checked with verify_verdict against the referee's key and written to
/// out_dir/verdict-<dispute id>.bin. Throws on unreachable peers or invalid messages.
DelegateOutcome delegate_job(NetContext& ctx, const DelegateRequest& request, Logger log);

}  // namespace tribunal::nodes
