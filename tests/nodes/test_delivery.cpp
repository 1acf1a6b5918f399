// Delivery, verified (nodes/delivery.h, nodes/state_source.h; docs/protocol.md, "Delivery"), through
// the real nodes on loopback: after a claim stood, the delegate fetches the final state from a holder
// of that claim, checks every chunk against the claim as it streams, and writes the model, the
// optimizer state and result.json; a holder serving altered bytes is caught at its first bad chunk and
// the next holder is asked; when none delivers, the delegate says so.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/pytorch_export.h"
#include "engine/safetensors.h"
#include "engine/state.h"
#include "engine/step.h"
#include "nodes/delivery.h"
#include "protocol/tensor_hash.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using tribunal::testing::corrupt;
using tribunal::testing::Network;
using tribunal::testing::RawPeer;

namespace {

// The delegation of the network's job to `urls`, with the request kept for the delivery.
struct Delegation {
  DelegateRequest request;
  DelegateOutcome outcome;
};
Delegation delegate(Network& net, const std::vector<std::string>& urls) {
  Delegation d{net.request(urls), {}};
  d.outcome = delegate_job(net.ctx, d.request, quiet_logger());
  return d;
}

// A provider that serves other bytes than it committed to: flips one bit of chunk `chunk` of tensor
// `value` of every delivery, in whichever frame carries it (a test hook, like the scenarios' reply
// filters).
DeliveryFilter flip_byte(uint32_t value, uint32_t chunk) {
  return [=](TensorChunk& c) {
    if (c.value != value || chunk < c.chunk || chunk >= c.chunk + c.count) return;
    const size_t begin = size_t{chunk - c.chunk} * kTensorChunkBytes;
    const size_t end = std::min(c.bytes.size(), begin + kTensorChunkBytes);
    if (begin < end) c.bytes[(begin + end) / 2] ^= 0x10;
  };
}

// The tensors of a safetensors file by name.
std::map<std::string, Tensor> tensors_of(const std::filesystem::path& file) {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : read_safetensors(file).tensors) out.emplace(name, std::move(t));
  return out;
}

// The header of a safetensors file (parsed by hand: the optimizer file holds an I64 "step", which
// read_safetensors refuses) and the bytes of tensor `name`.
std::vector<uint8_t> raw_tensor(const std::filesystem::path& file, const std::string& name,
                                nlohmann::json* entry = nullptr) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
  REQUIRE(8 + n <= bytes.size());
  const nlohmann::json header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  REQUIRE(header.contains(name));
  if (entry) *entry = header.at(name);
  const uint64_t begin = header.at(name).at("data_offsets")[0], end = header.at(name).at("data_offsets")[1];
  REQUIRE(8 + n + end <= bytes.size());
  return {bytes.begin() + static_cast<long>(8 + n + begin), bytes.begin() + static_cast<long>(8 + n + end)};
}

// The PyTorch form (engine/pytorch_export.h) of a provider's final checkpoint of `job`.
PytorchState final_state_of(const std::filesystem::path& store, const JobSpec& job, const Digest& id) {
  ThreadPool pool(1);
  return to_pytorch(job, load_checkpoint(checkpoint_path(store / to_hex(id), job.steps), job, id, pool));
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto b = t.bytes();
  const auto* p = reinterpret_cast<const uint8_t*>(b.data());
  return {p, p + b.size()};
}

// Every tensor of `form` is in OUT's model or optimizer file with the same bytes; `step` is I64.
void check_files_hold(const std::filesystem::path& out, const PytorchState& form) {
  CHECK(read_safetensors(out / "model.safetensors").tensors.size() == form.model.size());
  for (const auto& t : form.model) {
    CAPTURE(t.name);
    CHECK(raw_tensor(out / "model.safetensors", t.name) == bytes_of(t.value));
  }
  for (const auto& t : form.optimizer) {
    CAPTURE(t.name);
    CHECK(raw_tensor(out / "optimizer.safetensors", t.name) == bytes_of(t.value));
  }
  nlohmann::json step;
  const std::vector<uint8_t> bytes = raw_tensor(out / "optimizer.safetensors", "step", &step);
  CHECK(step.at("dtype") == "I64");
  REQUIRE(bytes.size() == 8);
  int64_t value = 0;
  std::memcpy(&value, bytes.data(), 8);
  CHECK(value == form.step);
}

// Every file in `dir` whose name ends in ".tmp" or is the verified state left behind.
std::vector<std::string> leftovers(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(".tmp") || name.starts_with(".final_state")) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST_CASE("delivery: after the honest claim stands, OUT holds its final state, every tensor checked") {
  Network net;
  const std::string honest = net.provider(Fault{});
  const std::filesystem::path honest_store = net.dir.path / "store0";
  const std::string cheater = net.provider(corrupt(14, 3));
  const Delegation g = delegate(net, {cheater, honest});
  REQUIRE(g.outcome.accepted);
  REQUIRE(g.outcome.winner == 1);
  // Progress for any size, at most once an hour: exactly the final report, of every byte.
  DeliveryOptions options;
  options.progress_from_bytes = 0;
  options.progress_every = std::chrono::hours(1);
  std::vector<std::pair<uint64_t, uint64_t>> reports;
  options.progress = [&](uint64_t received, uint64_t total, double) {
    reports.emplace_back(received, total);
  };
  const Delivery d = deliver(net.ctx, g.request, g.outcome, quiet_logger(), options);
  const std::filesystem::path out = g.request.out_dir;
  const uint64_t state_bytes = job_footprint(load_job(net.job_file)).state_bytes;
  CHECK(reports == std::vector<std::pair<uint64_t, uint64_t>>{{state_bytes, state_bytes}});
  CHECK(d.state.provider == 1);
  CHECK(d.state.failures.empty());
  CHECK(d.state.trajectory_root == g.outcome.claim.trajectory_root);
  CHECK(d.state.state_hash == g.outcome.claim.final_state_hash);

  // The files are the accepted claim's final state in the reference torch modules' form: the honest
  // provider's own final checkpoint (whose state hash the claim signed), converted, byte for byte.
  const JobSpec job = load_job(net.job_file);
  const Digest& id = g.outcome.claim.job_id;
  CHECK(read_checkpoint_header(checkpoint_path(honest_store / to_hex(id), job.steps)).state_hash ==
        g.outcome.claim.final_state_hash);
  check_files_hold(out, final_state_of(honest_store, job, id));
  CHECK(tensors_of(out / "model.safetensors").contains("0.weight"));  // nn.Sequential's first Linear
  const auto meta = read_safetensors(out / "model.safetensors").metadata;
  CHECK(meta.at("state_hash") == to_hex(g.outcome.claim.final_state_hash));
  CHECK(meta.at("job_id") == to_hex(id));

  // result.json: the job, the roots, the accepted claim and its provider, every verdict with its file.
  std::ifstream in(out / "result.json");
  const nlohmann::json r = nlohmann::json::parse(in);
  CHECK(r.at("job_id") == to_hex(g.outcome.claim.job_id));
  CHECK(r.at("trajectory_root") == to_hex(g.outcome.claim.trajectory_root));
  CHECK(r.at("final_state_hash") == to_hex(g.outcome.claim.final_state_hash));
  CHECK(r.at("accepted_claim").at("provider") == honest);
  CHECK(r.at("accepted_claim").at("endpoint") == g.outcome.claim.endpoint);
  CHECK(r.at("accepted_claim").at("envelope") == to_hex(g.outcome.claim_envelopes[1]));
  CHECK(r.at("served_by") == honest);
  CHECK(r.at("files").at("model") == "model.safetensors");
  REQUIRE(r.at("verdicts").size() == 1);
  CHECK(r.at("verdicts")[0].at("file") == g.outcome.verdict_files[0].filename().string());
  CHECK(r.at("verdicts")[0].at("reason") == "wrong_output");
  CHECK(std::filesystem::exists(out / r.at("verdicts")[0].at("file").get<std::string>()));
  CHECK(leftovers(out).empty());
}

TEST_CASE(
    "delivery: a holder serving altered weights is caught at its first bad chunk; the next holder serves") {
  Network net;
  const std::string liar = net.provider(Fault{});           // an honest claim, altered bytes on delivery
  net.providers.back()->delivery_filter = flip_byte(0, 1);  // l0.weight [784, 32]: chunks 0 and 1
  const std::string cheater = net.provider(corrupt(14, 3));
  const std::string honest = net.provider(Fault{});
  const Delegation g = delegate(net, {liar, cheater, honest});
  REQUIRE(g.outcome.accepted);
  REQUIRE(g.outcome.winner == 0);  // the liar's claim is the honest one: it stands
  REQUIRE(g.outcome.claims[2].trajectory_root == g.outcome.claim.trajectory_root);
  const Delivery d = deliver(net.ctx, g.request, g.outcome, quiet_logger());
  CHECK(d.state.provider == 2);
  REQUIRE(d.state.failures.size() == 1);
  CHECK(d.state.failures[0] ==
        liar +
            ": tensor 0 chunk 0: its bytes (chunks 0 to 1) do not match the tensor's committed chunk root");
  CHECK(d.state.state_hash == g.outcome.claim.final_state_hash);
  check_files_hold(g.request.out_dir,
                   final_state_of(net.dir.path / "store2", load_job(net.job_file), g.outcome.claim.job_id));
  std::ifstream in(g.request.out_dir / "result.json");
  const nlohmann::json r = nlohmann::json::parse(in);
  CHECK(r.at("accepted_claim").at("provider") == liar);
  CHECK(r.at("served_by") == honest);
  CHECK(r.at("delivery_failures").size() == 1);
  CHECK(leftovers(g.request.out_dir).empty());
}

TEST_CASE("delivery: when no holder delivers, the delegate says so and writes no model") {
  Network net;
  const std::string liar = net.provider(Fault{});
  net.providers.back()->delivery_filter = flip_byte(1, 0);
  const std::string gone = net.provider(Fault{});
  const Delegation g = delegate(net, {liar, gone});
  REQUIRE(g.outcome.accepted);
  REQUIRE(g.outcome.verdicts.empty());  // the two agree: no dispute
  net.providers.back().reset();         // the second holder is gone
  std::string what;
  try {
    deliver(net.ctx, g.request, g.outcome, quiet_logger());
  } catch (const DeliveryFailed& e) {
    what = e.what();
  }
  CAPTURE(what);
  CHECK(what.starts_with("no holder of the accepted claim (trajectory_root " +
                         to_hex(g.outcome.claim.trajectory_root) + ") delivered its final state: "));
  CHECK(what.find(
            liar +
            ": tensor 1 chunk 0: its bytes (chunks 0 to 0) do not match the tensor's committed chunk root") !=
        std::string::npos);
  CHECK(what.find(gone + ": unreachable") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(g.request.out_dir / "model.safetensors"));
  CHECK_FALSE(std::filesystem::exists(g.request.out_dir / "result.json"));
  CHECK(leftovers(g.request.out_dir).empty());
}

TEST_CASE("delivery: a provider serves only the final state of a claim it holds, to clients it trains for") {
  Network net;
  const KeyPair client = generate_keypair();
  ProviderConfig config = net.config();
  config.clients = {client.public_key};
  const std::string url = net.provider(std::move(config));
  Digest job{};
  job.fill(0x5a);
  {  // a job it holds no claim for: refused, nothing read
    RawPeer peer(net.ctx, url);
    peer.send(seal(client, job, 1, StateRequest{job, job}));
    CHECK(peer.error() == "this provider holds no claim for job " + to_hex(job));
  }
  {  // a client key it does not train for
    RawPeer peer(net.ctx, url);
    peer.send(seal(generate_keypair(), job, 1, StateRequest{job, job}));
    CHECK(peer.error() == "this provider does not deliver to the client key that signed the StateRequest");
  }
  {  // a request not addressed to its job id
    RawPeer peer(net.ctx, url);
    Digest other = job;
    other[0] ^= 1;
    peer.send(seal(client, other, 1, StateRequest{job, job}));
    CHECK(peer.error() == "the StateRequest is not addressed to its job id");
  }
}
