// The provider's own defenses (issue 28, holes 3-5; docs/protocol.md, "Threat model"; docs/running.md,
// "Job admission" and "Connection limits"), each through the real nodes on loopback: an idle-connection
// flood, dispute terms it could not meet, jobs beyond its limits, the same job submitted twice, and a
// job whose client has left.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "engine/training_cost.h"
#include "net/client.h"
#include "net/context.h"
#include "tests/nodes/network.h"

using namespace tribunal;
using namespace tribunal::cheats;
using namespace tribunal::nodes;
using testing::corrupt;
using testing::Network;
using testing::RawPeer;

namespace {

// The id of the job `text` on its (public) data set, as its submitter computes it.
Digest job_id_of(const std::string& text) {
  ThreadPool pool(1);
  JobSpec job = parse_job(text, "test job");
  locate_data(job, DataRegistry::debian());
  return job_id(job, *shared_train_set(job, pool));
}

// The short MLP job with `steps` steps (and a stride of 8).
std::string short_job_with_steps(int64_t steps) {
  std::string text = testing::read_text(testing::kShortJob);
  const size_t at = text.find("steps = 30");
  REQUIRE(at != std::string::npos);
  return text.replace(at, 10, "steps = " + std::to_string(steps));
}

// A port's URL → the port.
uint16_t port_of(const std::string& url) {
  return static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
}

// `n` TCP connections to 127.0.0.1:port that send nothing (the flood of issue 28, hole 3).
struct IdleFlood {
  std::vector<int> fds;
  IdleFlood(uint16_t port, int n) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < n; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      REQUIRE(fd >= 0);
      REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
      fds.push_back(fd);
    }
  }
  ~IdleFlood() {
    for (int fd : fds) ::close(fd);
  }
};

// A provider whose log lines a test reads.
struct LoggedProvider {
  std::mutex mu;
  std::vector<std::string> lines;
  std::unique_ptr<ProviderNode> node;
  std::string url;
  LoggedProvider(Network& net, ProviderConfig config) {
    node = std::make_unique<ProviderNode>(net.ctx, generate_keypair(), std::move(config),
                                          line_logger("provider", [this](const std::string& l) {
                                            std::lock_guard lock(mu);
                                            lines.push_back(l);
                                          }));
    url = "ws://127.0.0.1:" + std::to_string(node->listen("127.0.0.1", 0)) + "/";
  }
  size_t count(const std::string& needle) {
    std::lock_guard lock(mu);
    size_t n = 0;
    for (const auto& l : lines) n += l.find(needle) != std::string::npos;
    return n;
  }
  // Waits up to `limit` for a line containing `needle`.
  bool wait_for(const std::string& needle, std::chrono::seconds limit = std::chrono::seconds(30)) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (count(needle) > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

// Handlers that ignore what a plain client receives.
SessionHandlers ignoring() {
  return {[](Session&, std::vector<uint8_t>) {}, [](Session&, const CloseInfo&) {}};
}

// Submits `text` on a fresh raw peer and returns the provider's ErrorMessage reason ("" if none).
std::string refusal_of(Network& net, const std::string& url, const std::string& text) {
  RawPeer peer(net.ctx, url);
  peer.send(seal(generate_keypair(), job_id_of(text), 1, JobSubmit{text}));
  return peer.error();
}

}  // namespace

TEST_CASE("attack: 1100 idle connections from the referee's address do not silence the honest provider") {
  raise_fd_limit();  // both ends of the flood live in this process
  Network net;
  net.use_terms("base_seconds = 3\nstep_seconds = 1");  // the terms: a referee shut out 3 s loses
  const std::string cheater = net.provider(corrupt(14, 2));
  const std::string honest = net.provider(Fault{});
  const IdleFlood flood(port_of(honest), 1100);
  const DelegateOutcome o = net.delegate({cheater, honest});
  CHECK(o.accepted);
  CHECK(o.winner == 1);
  REQUIRE(o.verdicts.size() == 1);
  CHECK(net.verify(o.verdicts[0]).winners == std::vector<uint8_t>{1});
  // The flood's connections made room for newer ones, the referee's among them, which it then kept.
  CHECK(net.providers[1]->evicted_connections() >= 1000);
}

TEST_CASE(
    "attack: dispute terms the provider cannot meet are refused at submission, naming term, value and "
    "minimum") {
  Network net;
  net.use_terms("base_seconds = 0.05\nstep_seconds = 0.001");
  const std::string cheater = net.provider(corrupt(14, 2));
  const std::string honest = net.provider(Fault{});
  // The delegation ends with the refusal: no claim of the honest provider can later lose on time.
  CHECK_THROWS_WITH(
      net.delegate({cheater, honest}),
      doctest::Contains("refused: [dispute] base_seconds = 0.05 s is below this provider's minimum of "
                        "0.25 s (--min-base-seconds)"));
  CHECK(refusal_of(net, honest, Network::short_job_with_terms("base_seconds = 1\nstep_seconds = 0.001")) ==
        "[dispute] step_seconds = 0.001 s is below this provider's minimum of 0.01 s (--min-step-seconds)");
  CHECK(refusal_of(net, honest, Network::short_job_with_terms("min_bytes_per_second = 1000000000")) ==
        "[dispute] min_bytes_per_second = 1000000000 is above the 67108864 bytes/s this provider can stream "
        "(--link-bytes-per-second)");
}

TEST_CASE(
    "a provider refuses a step time below its measured one × the safety factor, once it has measured it") {
  Network net;
  ProviderConfig c = net.config();
  c.terms.step = std::chrono::milliseconds(0);
  c.terms.safety_factor = 1e6;  // any measured step time × 10⁶ is beyond the 0.5 s asked below
  const std::string url = net.provider(c);
  const std::string text = Network::short_job_with_terms("step_seconds = 0.5");
  RawPeer first(net.ctx, url);  // nothing measured yet: only the operator's floors apply
  first.send(seal(generate_keypair(), job_id_of(text), 1, JobSubmit{text}));
  first.first(MessageKind::Claim);
  const std::string why = refusal_of(net, url, text);
  CHECK(why.find("[dispute] step_seconds = 0.5 s is below this provider's minimum of ") == 0);
  CHECK(why.find("for this job (its measured step time × safety factor 1e+06)") != std::string::npos);
}

TEST_CASE(
    "attack: jobs beyond the provider's work, memory and graph limits are refused before any data is "
    "loaded") {
  Network net;
  // The sharded MLP: 7,850 parameters, S = 4096 shards of one row each.
  const std::string sharded =
      "[model]\nkind = \"mlp\"\nwidths = [784, 10]\n[train]\nsteps = 1000000\nbatch_size = 8192\nstride = "
      "1000\n"
      "shards = 4096\n[optimizer]\nkind = \"adamw\"\n";
  const auto t0 = std::chrono::steady_clock::now();
  const TrainingCost cost = training_cost(parse_job(sharded, "sharded"));
  MESSAGE("training_cost of S = 4096: "
          << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s, "
          << cost.nodes << " nodes");
  const std::string url = net.provider(Fault{});
  CHECK(refusal_of(net, url, sharded) ==
        "the job's step graph (nodes, train.shards copies of the forward and backward) is " +
            std::to_string(cost.nodes) + "; this provider takes at most 32768 (--max-graph-nodes)");
  // The GPT of ~2K parameters at context 4096: its attention scores are T² per head.
  const std::string gpt =
      "[model]\nkind = \"gpt\"\ncontext = 4096\nlayers = 1\nheads = 1\nd_model = 4\n[train]\nsteps = 10\n"
      "batch_size = 1\nstride = 10\n[optimizer]\n";
  const TrainingCost gpt_cost = training_cost(parse_job(gpt, "gpt"));
  CHECK(gpt_cost.memory_bytes > (uint64_t{256} << 20));  // measured: 307 MB RSS training it (--no-eval)
  ProviderConfig c = net.config();
  c.limits.max_memory_bytes = uint64_t{256} << 20;
  c.limits.max_total_work = uint64_t{1} << 30;
  const std::string small = net.provider(c);
  CHECK(refusal_of(net, small, gpt) == "the job's memory for training (bytes) is " +
                                           std::to_string(gpt_cost.memory_bytes) +
                                           "; this provider takes at most 268435456 (--max-memory-bytes)");
  const std::string many_steps = short_job_with_steps(1000000);
  const TrainingCost long_cost = training_cost(parse_job(many_steps, "long"));
  CHECK(refusal_of(net, small, many_steps) ==
        "the job's total work (work per step × steps) is " + std::to_string(long_cost.total_work) +
            "; this provider takes at most 1073741824 (--max-total-work)");
}

TEST_CASE(
    "attack: one job submitted twice while it trains is trained once; beyond the queue a job is refused") {
  Network net;
  ProviderConfig c = net.config();
  c.limits.max_queued_jobs = 0;
  LoggedProvider p(net, c);
  const std::string text = short_job_with_steps(600);
  const Digest id = job_id_of(text);
  RawPeer a(net.ctx, p.url), b(net.ctx, p.url);
  a.send(seal(generate_keypair(), id, 1, JobSubmit{text}));
  REQUIRE(p.wait_for("training job"));
  b.send(seal(generate_keypair(), id, 1, JobSubmit{text}));
  // Another job finds the one training slot taken and no room to wait.
  const std::string other = short_job_with_steps(31);
  CHECK(refusal_of(net, p.url, other) ==
        "this provider is busy: 1 job(s) training and 0 waiting (at most 1 and 0); submit the job later");
  const Claim ca = std::get<Claim>(open_envelope(a.first(MessageKind::Claim)).body);
  const Claim cb = std::get<Claim>(open_envelope(b.first(MessageKind::Claim)).body);
  CHECK(ca.trajectory_root == cb.trajectory_root);
  CHECK(p.count("training job") == 1);
  CHECK(p.count("submitted again while it waits or trains: sharing its run") == 1);
}

TEST_CASE(
    "a job whose client has left stops between steps (--if-client-leaves stop), leaving only whole "
    "checkpoints") {
  Network net;
  ProviderConfig c = net.config();
  const std::filesystem::path store = c.store;
  LoggedProvider p(net, c);
  const std::string text = short_job_with_steps(200000);
  const Digest id = job_id_of(text);
  auto session = Client(net.ctx).connect_sync(p.url, ignoring());
  session->send(seal(generate_keypair(), id, 1, JobSubmit{text}));
  REQUIRE(p.wait_for("training job"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  session->close(CloseCode::Normal, "client leaves");
  const auto closed = std::chrono::steady_clock::now();
  REQUIRE(p.wait_for("its client left (--if-client-leaves stop)", std::chrono::seconds(10)));
  CHECK(std::chrono::steady_clock::now() - closed < std::chrono::seconds(5));
  size_t checkpoints = 0;
  for (const auto& e : std::filesystem::directory_iterator(store / to_hex(id))) {
    CHECK(e.path().extension() != ".tmp");  // no half-written file
    checkpoints += e.path().extension() == ".safetensors";
  }
  CHECK(checkpoints >= 1);
}

TEST_CASE("with --if-client-leaves continue a job whose client has left trains on") {
  Network net;
  ProviderConfig c = net.config();
  c.if_client_leaves = ClientLeaves::Continue;
  LoggedProvider p(net, c);
  const std::string text = short_job_with_steps(400);
  auto session = Client(net.ctx).connect_sync(p.url, ignoring());
  session->send(seal(generate_keypair(), job_id_of(text), 1, JobSubmit{text}));
  REQUIRE(p.wait_for("training job"));
  session->close(CloseCode::Normal, "client leaves");
  REQUIRE(p.wait_for("claim trajectory_root"));
  CHECK(p.count("stopped at step") == 0);
}
