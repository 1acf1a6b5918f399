// Fetching, checking and writing the final state of the accepted claim. See delivery.h;
// docs/protocol.md, "Delivery".
#include "nodes/delivery.h"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/pytorch_export.h"
#include "engine/safetensors_writer.h"
#include "engine/state.h"
#include "engine/step.h"
#include "net/client.h"
#include "net/error.h"
#include "protocol/state_delivery.h"
#include "protocol/trajectory.h"

namespace tribunal::nodes {
namespace {

// A holder's stream failed: its fault or its link's (the next holder is asked).
class PeerFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Messages of one delivery stream, with backpressure: beyond kHigh waiting frames (≤ 1 MiB each) the
// session stops reading, so a provider that streams faster than the disk takes is held back by TCP.
class StreamInbox : public std::enable_shared_from_this<StreamInbox> {
 public:
  static constexpr size_t kHigh = 16, kLow = 4;

  SessionHandlers handlers() {
    auto self = shared_from_this();
    return {[self](Session& session, std::vector<uint8_t> bytes) {
              std::lock_guard lock(self->mu_);
              self->queue_.push_back(std::move(bytes));
              if (self->queue_.size() >= kHigh) {
                session.set_reading(false);
                self->paused_ = true;
              }
              self->cv_.notify_all();
            },
            [self](Session&, const CloseInfo& info) {
              std::lock_guard lock(self->mu_);
              self->closed_ = to_string(info);
              self->cv_.notify_all();
            }};
  }
  /// The next envelope (signature checked), waiting up to `timeout`. Throws PeerFailure.
  Envelope next(Session& session, std::chrono::seconds timeout) {
    std::vector<uint8_t> bytes;
    {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || !closed_.empty(); }))
        throw PeerFailure(fmt::format("no message within {} s", timeout.count()));
      if (queue_.empty()) throw PeerFailure("connection closed: " + closed_);
      bytes = std::move(queue_.front());
      queue_.pop_front();
      if (paused_ && queue_.size() <= kLow) {
        paused_ = false;
        session.set_reading(true);
      }
    }
    try {
      return open_envelope(bytes);
    } catch (const WireError& e) {
      throw PeerFailure(std::string("a refused frame: ") + e.what());
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<uint8_t>> queue_;
  bool paused_ = false;
  std::string closed_;
};

std::string kind_text(MessageKind kind) {
  switch (kind) {
    case MessageKind::Error:
      return "an ErrorMessage";
    case MessageKind::TensorChunk:
      return "a TensorChunk";
    case MessageKind::StateHeader:
      return "a StateHeader";
    default:
      return "a message of kind " + std::to_string(static_cast<int>(kind));
  }
}

// Reports progress at most once per `every`, and once at the end.
class Progress {
 public:
  Progress(const DeliveryOptions& o, uint64_t total)
      : fn_(total >= o.progress_from_bytes ? o.progress : nullptr), every_(o.progress_every), total_(total) {}
  void update(uint64_t received) {
    if (!fn_) return;
    const auto now = std::chrono::steady_clock::now();
    if (received < total_ && now - last_ < every_) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    fn_(received, total_, seconds > 0 ? static_cast<double>(received) / seconds : 0.0);
  }

 private:
  DeliveryProgress fn_;
  std::chrono::milliseconds every_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_ = start_;
};

// One holder's try: the whole stream checked and written to `file`, or PeerFailure.
Digest fetch_from(Client& client, const std::string& url, const Envelope& request, const DeliveryTerms& terms,
                  const StateLayout& layout, const std::filesystem::path& file,
                  const DeliveryOptions& options) {
  auto inbox = std::make_shared<StreamInbox>();
  std::shared_ptr<Session> session;
  try {
    session = client.connect_sync(url, inbox->handlers());
  } catch (const NetError& e) {
    throw PeerFailure(std::string("unreachable: ") + e.what());
  }
  struct Closer {
    std::shared_ptr<Session>& s;
    ~Closer() { s->close(CloseCode::Normal, "delivery ended"); }
  } closer{session};
  session->send(request.bytes);
  StateDelivery check(terms);
  std::string why;
  const auto expect = [&](MessageKind kind) {
    Envelope env = inbox->next(*session, options.message_timeout);
    if (env.kind == MessageKind::Error)
      throw PeerFailure("refused: " + std::get<ErrorMessage>(env.body).reason);
    if (env.kind != kind)
      throw PeerFailure(fmt::format("sent {} instead of {}", kind_text(env.kind), kind_text(kind)));
    if (env.context != terms.job_id) throw PeerFailure(kind_text(kind) + " addressed to another job");
    return env;
  };
  const Envelope head = expect(MessageKind::StateHeader);
  if (!check.accept(std::get<StateHeader>(head.body), why)) throw PeerFailure(why);
  std::vector<StreamedTensor> tensors;
  for (size_t i = 0; i < layout.names.size(); ++i) {
    const auto dims = layout.shapes[i].dims();
    tensors.push_back({layout.names[i], {dims.begin(), dims.end()}});
  }
  // The providers' checkpoint format (engine/state.h), so the verified file is a checkpoint like theirs.
  SafetensorsWriter out(file, tensors,
                        {{"format", "tribunal-checkpoint-1"},
                         {"job_id", to_hex(terms.job_id)},
                         {"step", std::to_string(terms.steps)},
                         {"state_hash", to_hex(check.state_hash())}});
  Progress progress(options, check.total_bytes());
  while (!check.complete()) {
    const Envelope env = expect(MessageKind::TensorChunk);
    const TensorChunk& chunk = std::get<TensorChunk>(env.body);
    if (!check.accept(chunk, why)) throw PeerFailure(why);
    out.write(chunk.bytes);  // only proven bytes reach the file
    progress.update(check.bytes_taken());
  }
  out.commit();
  return check.state_hash();
}

}  // namespace

VerifiedState fetch_final_state(NetContext& ctx, const DelegateRequest& request,
                                const DelegateOutcome& outcome, const JobSpec& job,
                                const std::filesystem::path& file, const Logger& log,
                                const DeliveryOptions& options) {
  if (!outcome.accepted) throw EngineError("delivery: no claim was accepted");
  const Claim& accepted = outcome.claim;
  const StateLayout layout = state_layout(job);
  DeliveryTerms terms;
  terms.job_id = accepted.job_id;
  terms.trajectory_root = accepted.trajectory_root;
  terms.steps = static_cast<uint64_t>(job.steps);
  terms.checkpoints = checkpoint_steps(terms.steps, static_cast<uint64_t>(job.stride)).size();
  for (const Shape& s : layout.shapes) terms.shapes.emplace_back(s.dims().begin(), s.dims().end());
  // The standing claim's provider first, then every other holder of the same valid claim.
  std::vector<size_t> holders{outcome.winner};
  for (size_t p = 0; p < outcome.claims.size(); ++p)
    if (p != outcome.winner && p < outcome.refusals.size() && outcome.refusals[p].empty() &&
        outcome.claims[p].trajectory_root == accepted.trajectory_root)
      holders.push_back(p);
  const Envelope state_request = open_envelope(
      seal(request.client_key, accepted.job_id, 1, StateRequest{accepted.job_id, accepted.trajectory_root}));
  ClientOptions client_options;
  client_options.tls = TlsContext::client(request.tls);
  Client client(ctx, client_options);
  VerifiedState v;
  for (size_t p : holders) {
    const std::string& url = request.providers.at(p);
    log->info(fmt::format("delegate: fetching the final state of trajectory_root {} from {}",
                          to_hex(accepted.trajectory_root).substr(0, 16), url));
    try {
      v.state_hash = fetch_from(client, url, state_request, terms, layout, file, options);
      v.file = file;
      v.job_id = accepted.job_id;
      v.trajectory_root = accepted.trajectory_root;
      v.step = terms.steps;
      v.provider = p;
      log->info(fmt::format("delegate: the final state (state_hash {}) from {} checks out",
                            to_hex(v.state_hash).substr(0, 16), url));
      return v;
    } catch (const PeerFailure& e) {
      v.failures.push_back(fmt::format("{}: {}", url, e.what()));
      log->warn(fmt::format("delegate: the final state from {} was refused: {}", url, e.what()));
    }
  }
  std::string all;
  for (const std::string& f : v.failures) all += (all.empty() ? "" : "; ") + f;
  throw DeliveryFailed(
      fmt::format("no holder of the accepted claim (trajectory_root {}) delivered its final state: {}",
                  to_hex(accepted.trajectory_root), all));
}

DeliveredFiles write_delivery(const std::filesystem::path& dir, const JobSpec& job,
                              const VerifiedState& state) {
  // The verified file is a checkpoint of the job (fetch_final_state wrote its metadata); loading it
  // checks its layout and state hash once more, then it is converted to the reference PyTorch
  // modules' names and layouts (engine/pytorch_export.h). This holds one state in memory; the
  // network side streamed it.
  if (read_checkpoint_header(state.file).state_hash != state.state_hash)
    throw EngineError(fmt::format("{}: its state hash is not the delivered one", state.file.string()));
  ThreadPool pool(1);
  const State s = load_checkpoint(state.file, job, state.job_id, pool);  // recomputes the hash
  write_pytorch(dir / "model.safetensors", dir / "optimizer.safetensors", job, s, state.job_id,
                state.state_hash);
  return {"model.safetensors", "optimizer.safetensors"};
}

namespace {

nlohmann::ordered_json verdict_json(const std::vector<uint8_t>& envelope, const std::filesystem::path& file) {
  const Envelope env = open_envelope(envelope);
  const Verdict& v = std::get<Verdict>(env.body);
  nlohmann::ordered_json claims = nlohmann::ordered_json::array();
  for (const auto& c : v.opening.claims) {
    const Envelope ce = open_envelope(c);
    const Claim& claim = std::get<Claim>(ce.body);
    claims.push_back({{"endpoint", claim.endpoint}, {"trajectory_root", to_hex(claim.trajectory_root)}});
  }
  return {{"dispute_id", to_hex(v.dispute_id)},
          {"reason", reason_name(v.reason)},
          {"claims", claims},
          {"winners", v.winners},
          {"losers", v.losers},
          {"detail", v.detail},
          {"file", file.filename().string()}};
}

}  // namespace

Delivery deliver(NetContext& ctx, const DelegateRequest& request, const DelegateOutcome& outcome,
                 const Logger& log, const DeliveryOptions& options) {
  // The job as the providers trained it (with roles, the trainer named in it).
  JobSpec job = outcome.job_toml.empty() ? load_job(request.job_file, request.datasets)
                                         : parse_job(outcome.job_toml, request.job_file.string());
  if (!outcome.job_toml.empty()) locate_data(job, request.datasets);
  const std::filesystem::path& dir = request.out_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw EngineError(fmt::format("{}: cannot create the output folder: {}", dir.string(), ec.message()));
  Delivery d;
  const auto verified = dir / ".final_state.safetensors";
  d.state = fetch_final_state(ctx, request, outcome, job, verified, log, options);
  d.files = write_delivery(dir, job, d.state);
  std::filesystem::remove(verified, ec);

  using json = nlohmann::ordered_json;
  const Claim& c = outcome.claim;
  const std::vector<uint8_t>& claim_envelope = outcome.claim_envelopes.at(outcome.winner);
  json claims = json::array();
  for (size_t p = 0; p < outcome.claims.size(); ++p)
    claims.push_back({{"provider", request.providers.at(p)},
                      {"trajectory_root", to_hex(outcome.claims[p].trajectory_root)},
                      {"refusal", outcome.refusals.at(p)}});
  json verdicts = json::array();
  for (size_t i = 0; i < outcome.verdicts.size(); ++i)
    verdicts.push_back(verdict_json(outcome.verdicts[i], outcome.verdict_files.at(i)));
  const json result = {
      {"job_id", to_hex(d.state.job_id)},
      {"trajectory_root", to_hex(d.state.trajectory_root)},
      {"final_state_hash", to_hex(d.state.state_hash)},
      {"step", d.state.step},
      {"accepted_claim",
       {{"provider", request.providers.at(outcome.winner)},
        {"endpoint", c.endpoint},
        {"signer", to_hex(open_envelope(claim_envelope).sender)},
        {"steps", c.steps},
        {"trajectory_root", to_hex(c.trajectory_root)},
        {"final_state_hash", to_hex(c.final_state_hash)},
        {"envelope", to_hex(claim_envelope)}}},
      {"served_by", request.providers.at(d.state.provider)},
      {"delivery_failures", d.state.failures},
      {"files", {{"model", d.files.model.string()}, {"optimizer", d.files.optimizer.string()}}},
      {"claims", claims},
      {"verdicts", verdicts}};
  d.result = dir / "result.json";
  const auto tmp = dir / "result.json.tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << result.dump(2) << "\n";
    if (!out) throw EngineError(fmt::format("{}: cannot write", tmp.string()));
  }
  std::filesystem::rename(tmp, d.result);
  return d;
}

}  // namespace tribunal::nodes
