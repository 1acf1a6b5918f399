#include "nodes/trainer_logs.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "dispute/job_oracle.h"
#include "dispute/provider_session.h"
#include "engine/error.h"
#include "engine/rounding_logs.h"
#include "net/client.h"
#include "net/error.h"
#include "nodes/inbox.h"
#include "protocol/input_opening.h"
#include "protocol/tensor_frames.h"
#include "protocol/tensor_hash.h"

namespace tribunal::nodes {
namespace {

// An auditor's re-sent LogRequest while the trainer is silent, and its reconnection backoff: the first
// after 1 s, then twice as long each time, at most 16 s apart (docs/numerics.md, "Trainer and auditors").
constexpr std::chrono::milliseconds kFirstReask{1000};
constexpr std::chrono::milliseconds kFirstReconnect{250};
constexpr std::chrono::milliseconds kMaxReask{16000};

// The step graph's decision count per node: what each node's log must hold.
std::vector<uint64_t> log_counts(const JobSpec& job, const DataShape& shape, uint64_t step) {
  if (step >= static_cast<uint64_t>(job.steps))
    throw EngineError(fmt::format("step {} is not a step of the job ({} steps)", step, job.steps));
  const JobOracle oracle(job, shape);
  std::vector<uint64_t> counts;
  for (const NodeSpec& n : oracle.step_spec(step).nodes) counts.push_back(n.log_values);
  return counts;
}

}  // namespace

std::vector<Body> trainer_log_answer(const JobSpec& job, const DataShape& shape, const Digest& id,
                                     const std::filesystem::path& dir, uint64_t step,
                                     const std::function<void(StepRoundingLog&)>& alter) {
  const std::vector<uint64_t> counts = log_counts(job, shape, step);
  StepRoundingLog log = read_rounding_log(rounding_log_path(dir, static_cast<int64_t>(step)),
                                          static_cast<int64_t>(step), counts);
  if (alter) alter(log);
  LogHeader header{id, step, {}};
  std::vector<Body> out(1);
  for (uint32_t n = 0; n < log.nodes.size(); ++n) {
    const RoundingLog& node = log.nodes[n];
    header.leaves.push_back(rounding_log_leaf(node));
    const int64_t shape[] = {static_cast<int64_t>(node.count)};
    for_each_tensor_frame(0, n, DType::Trits, shape, std::as_bytes(std::span<const uint8_t>(node.packed)), {},
                          [&](TensorChunk&& frame) {
                            out.push_back(std::move(frame));
                            return true;
                          });
  }
  out[0] = std::move(header);
  return out;
}

PublicKey trainer_claim_key(std::span<const uint8_t> trainer_claim, const JobSpec& job, const Digest& id) {
  const std::string what = "the trainer's claim the client forwarded";
  if (trainer_claim.empty())
    throw EngineError(what +
                      " is missing: an auditor replays only the logs of the key whose claim the "
                      "client holds (a client older than the LogHeader key check?)");
  Envelope env;
  try {
    env = open_envelope(trainer_claim);
  } catch (const std::exception& e) {
    throw EngineError(fmt::format("{} is not a signed envelope: {}", what, e.what()));
  }
  const Claim* claim = std::get_if<Claim>(&env.body);
  if (claim == nullptr) throw EngineError(what + " is not a Claim");
  if (env.context != id || claim->job_id != id) throw EngineError(what + " is for another job");
  if (claim->steps != static_cast<uint64_t>(job.steps))
    throw EngineError(fmt::format("{} is for {} steps, the job has {}", what, claim->steps, job.steps));
  if (claim->endpoint != job.numerics.trainer)
    throw EngineError(fmt::format("{} signs the endpoint {}, not the job's trainer {}", what, claim->endpoint,
                                  job.numerics.trainer));
  return env.sender;
}

LogFetch fetch_trainer_logs(NetContext& ctx, const std::string& url, const KeyPair& key,
                            const PublicKey& trainer, const JobSpec& job, const DataShape& shape,
                            const Digest& id, const std::filesystem::path& dir,
                            std::shared_ptr<TlsContext> tls, std::chrono::seconds timeout) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  ClientOptions options;
  options.tls = std::move(tls);
  Client client(ctx, options);
  std::shared_ptr<Inbox> inbox;
  std::shared_ptr<Session> session;
  // (Re)connects until `deadline`: a lost connection is no fault of the trainer's (docs/protocol.md,
  // "Lost frames"), a trainer that stays away past its silence allowance is.
  const auto connect = [&](Clock::time_point deadline) {
    if (session) session->close(CloseCode::GoingAway, "reconnecting");
    auto backoff = kFirstReconnect;
    for (;;) {
      inbox = std::make_shared<Inbox>();
      try {
        session = client.connect_sync(url, inbox->handlers());
        return;
      } catch (const NetError& e) {
        if (Clock::now() + backoff >= deadline)
          throw EngineError(
              fmt::format("the trainer {} cannot be reached for its rounding logs: {}", url, e.what()));
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kMaxReask);
    }
  };
  connect(start + timeout);
  LogFetch fetch;
  uint64_t sequence = 0;
  for (uint64_t t = 0; t < static_cast<uint64_t>(job.steps); ++t) {
    const std::string what = fmt::format("rounding logs of step {} from the trainer {}", t, url);
    const std::vector<uint64_t> counts = log_counts(job, shape, t);
    const uint64_t first_request = sequence + 1;  // this step's requests are numbered from here on
    auto reask = kFirstReask;
    const auto ask = [&] {
      session->send(seal(key, id, ++sequence, LogRequest{id, t}));
      if (sequence > first_request) ++fetch.reasks;
    };
    ask();
    std::optional<InputOpening> opening;
    std::vector<Digest> leaves;  // of the step's first LogHeader
    auto heard = Clock::now();   // the step's last useful envelope: the silence allowance runs from it
    while (!opening || !opening->complete()) {
      // Redundant chunks and late answers do not count: a trainer that babbles without progress is
      // as silent as one that sends nothing.
      if (Clock::now() >= heard + timeout)
        throw EngineError(fmt::format("{}: nothing new within {} s", what, timeout.count()));
      Envelope env;
      try {
        const auto left = std::chrono::ceil<std::chrono::seconds>(heard + timeout - Clock::now());
        env = inbox->next(
            std::max(left, std::chrono::seconds(1)), what, std::nullopt,
            [&] {
              ask();  // silent: the request or a piece of the answer may have been dropped on the way
              reask = std::min(reask * 2, kMaxReask);
            },
            reask);
      } catch (const ConnectionLost& e) {
        ++fetch.reconnects;
        connect(heard + timeout);
        ask();
        continue;
      }
      if (env.sender != trainer)
        throw EngineError(fmt::format("{}: signed by the key {}, not by the key {} of the trainer's claim",
                                      what, to_hex(Digest(env.sender)).substr(0, 16),
                                      to_hex(Digest(trainer)).substr(0, 16)));
      if (env.context != id) throw EngineError(what + ": an answer for another job");
      fetch.wire_bytes += env.bytes.size();
      // The trainer numbers the k-th envelope answering request q as q · 2^20 + k (docs/protocol.md,
      // "Rounding-log jobs"): a late answer to an earlier step's request is redundant, not a fault.
      const uint64_t q = env.sequence >> ProviderDisputeSession::kAnswerSequenceBits;
      if (q < first_request) continue;
      if (q > sequence)
        throw EngineError(fmt::format("{}: an answer to request {} that was never sent", what, q));
      if (env.kind == MessageKind::LogHeader) {
        const LogHeader& header = std::get<LogHeader>(env.body);
        if (header.job_id != id || header.step != t || header.leaves.size() != counts.size())
          throw EngineError(
              fmt::format("{}: the LogHeader is for another job or step, or lists {} leaves for {} nodes",
                          what, header.leaves.size(), counts.size()));
        if (opening) {  // the answer to a re-sent request: the same leaves, or two signed logs of one step
          if (header.leaves != leaves) throw EngineError(what + ": two LogHeaders with different leaves");
          continue;
        }
        // Kept as received: the trainer's signature over these leaves is the auditor's evidence if the
        // trainer's records later commit to other logs (QueryKind::LogEvidence).
        const std::filesystem::path file = log_header_path(dir, static_cast<int64_t>(t));
        std::filesystem::create_directories(file.parent_path());
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(env.bytes.data()),
                  static_cast<std::streamsize>(env.bytes.size()));
        if (!out) throw EngineError(fmt::format("{}: cannot write the trainer's LogHeader", file.string()));
        leaves = header.leaves;
        std::vector<ExpectedTensor> expected;
        for (size_t n = 0; n < counts.size(); ++n)
          expected.push_back({{static_cast<int64_t>(counts[n])}, header.leaves[n], DType::Trits});
        opening.emplace(std::move(expected), ExpectedSamples{});
        heard = Clock::now();
        reask = kFirstReask;
      } else if (env.kind == MessageKind::TensorChunk) {
        if (!opening) continue;  // its header was lost: the re-sent request brings both again
        std::string why;
        const Acceptance a = opening->accept(std::get<TensorChunk>(env.body), why);
        if (a == Acceptance::Refused || a == Acceptance::Ignored)
          throw EngineError(what + ": a chunk does not prove against the trainer's log leaf: " + why);
        if (a == Acceptance::Taken) {
          heard = Clock::now();
          reask = kFirstReask;
        }
      } else {
        throw EngineError(what + ": the answer is neither a LogHeader nor the logs' chunks");
      }
    }
    StepRoundingLog log;
    log.step = static_cast<int64_t>(t);
    OpenedInputs opened = opening->take();
    for (size_t n = 0; n < counts.size(); ++n) {
      fetch.packed_bytes += opened.tensors[n].bytes.size();
      log.nodes.push_back(RoundingLog{counts[n], std::move(opened.tensors[n].bytes)});
    }
    fetch.file_bytes += write_rounding_log(rounding_log_path(dir, static_cast<int64_t>(t)), log);
    ++fetch.steps;
  }
  session->close(CloseCode::Normal, "rounding logs received");
  fetch.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return fetch;
}

}  // namespace tribunal::nodes
