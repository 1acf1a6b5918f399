// The referee's durability: the SQLite store (inputs in order, verdicts, clear errors on a bad file)
// and event sourcing — a dispute rebuilt from any prefix of its recorded inputs continues with higher
// sequence numbers and restarted deadlines to the same verdict; provider answer sequences survive a
// provider restart.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <chrono>

#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "dispute/provider_session.h"
#include "referee/referee_dispute.h"
#include "referee/store.h"
#include "tests/game_time.h"
#include "tests/referee/signed_provider.h"
#include "tests/source_dir.h"

using namespace tribunal;
using namespace tribunal::cheats;

using tribunal::testing::at;

namespace {

const std::filesystem::path kJobFile = tribunal::testing::source_dir() / "scenarios/jobs/short_mlp.toml";

using testing::train_set;

using Provider = testing::SignedProvider;

// The cheater (party 0) corrupts node 13 of step 12; the honest provider is party 1.
struct Fixture {
  Provider cheater{[] {
    Fault f;
    f.step = 12;
    f.node = 13;
    f.delta = 0.5f;
    return f;
  }()};
  Provider honest{Fault{}};
  KeyPair referee = generate_keypair();
  std::vector<uint8_t> open;
  Fixture() { open = testing::dispute_opening(generate_keypair(), cheater, honest); }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// The two providers as the referee's connections see them: a DisputeOpen starts a new session (a new
// connection, or a restarted provider), queries are answered by the current one.
struct Parties {
  const Fixture& fx;
  ThreadPool pool{1};
  std::array<std::unique_ptr<ProviderDisputeSession>, 2> sessions;
  explicit Parties(const Fixture& f) : fx(f) {}
  std::vector<std::vector<uint8_t>> deliver(int party, const std::vector<uint8_t>& bytes) {
    const Envelope env = open_envelope(bytes);
    if (env.kind == MessageKind::Verdict) return {};
    const Provider& p = party == 0 ? fx.cheater : fx.honest;
    if (env.kind == MessageKind::DisputeOpen) {
      sessions[static_cast<size_t>(party)] = std::make_unique<ProviderDisputeSession>(
          p.key, env, load_job(kJobFile), train_set(), p.store.path, pool,
          std::vector<PublicKey>{fx.referee.public_key}, fault_policy(p.fault));
      return {};
    }
    return sessions[static_cast<size_t>(party)]->on_envelope(env);
  }
};

// Plays the dispute to its end from `queue` (time stands still at `now`); returns the verdict envelope.
// `on_step` sees each Step, with the referee's sequence number before it.
// `on_answer` sees each answer envelope before the referee takes it.
using StepSeen = std::function<void(const RefereeDispute::Step&, uint64_t sequence_before)>;
using AnswerSeen = std::function<void(int party, const std::vector<uint8_t>& envelope)>;
std::vector<uint8_t> drive(RefereeDispute& d, Parties& parties, std::deque<RefereeDispute::Outgoing> queue,
                           GameTime now, uint64_t* min_query_sequence = nullptr, const StepSeen& on_step = {},
                           const AnswerSeen& on_answer = {}) {
  std::vector<uint8_t> verdict;
  while (!queue.empty()) {
    auto o = std::move(queue.front());
    queue.pop_front();
    const Envelope env = open_envelope(o.envelope);
    if (env.kind == MessageKind::Verdict) verdict = o.envelope;
    if (env.kind == MessageKind::Query && min_query_sequence)
      *min_query_sequence = std::min(*min_query_sequence, env.sequence);
    for (const auto& answer : parties.deliver(o.party, o.envelope)) {
      // Both parties open the located node's inputs; once one opening is complete the other is moot.
      if (env.kind == MessageKind::Query && !d.game().awaiting(o.party)) break;
      const uint64_t sequence_before = d.sequence();
      if (on_answer) on_answer(o.party, answer);
      RefereeDispute::Step step = d.on_envelope(o.party, open_envelope(answer), now);
      REQUIRE_MESSAGE(step.refused.empty(), step.refused);
      if (on_step) on_step(step, sequence_before);
      for (auto& next : step.send) queue.push_back(std::move(next));
    }
  }
  return verdict;
}

Verdict body_of(const std::vector<uint8_t>& envelope) {
  return std::get<Verdict>(open_envelope(envelope).body);
}

// The uncrashed dispute: its inputs, the referee's sequence number after each, and its verdict.
struct Reference {
  std::vector<DisputeInput> inputs;
  std::vector<uint64_t> sequence_after;
  std::vector<uint8_t> verdict;
};

const Reference& reference() {
  static const Reference ref = [] {
    Fixture& fx = fixture();
    Reference r;
    RefereeDispute d(fx.referee, open_envelope(fx.open));
    // Each committed input with the referee's sequence number after it: the pieces of an opening that
    // a Step commits before the envelope that completed it were taken before that envelope's messages.
    const auto seen = [&](const RefereeDispute::Step& step, uint64_t sequence_before) {
      for (size_t i = 0; i < step.commit.size(); ++i) {
        r.inputs.push_back(step.commit[i]);
        r.sequence_after.push_back(i + 1 == step.commit.size() ? d.sequence() : sequence_before);
      }
      CHECK(step.verdict.has_value() == (d.done() && !step.commit.empty()));
    };
    Parties parties(fx);
    RefereeDispute::Step first = d.start(at(0));
    seen(first, 0);
    r.verdict = drive(d, parties, {first.send.begin(), first.send.end()}, at(0), nullptr, seen);
    return r;
  }();
  return ref;
}

}  // namespace

TEST_CASE("store: inputs in order, verdicts, reopening; refuses duplicates, decided disputes, another key") {
  testing::TempDir dir("store");
  const KeyPair key = generate_keypair();
  Digest id{};
  id[0] = 1;
  const DisputeInput open{DisputeInput::Kind::Open, 0, {1, 2, 3}, at(5)};
  const DisputeInput answer{DisputeInput::Kind::Envelope, 1, {4, 5}, at(6)};
  const DisputeInput resume{DisputeInput::Kind::Resume, 0, {}, at(7)};
  const DisputeInput tick{DisputeInput::Kind::Tick, 0, {}, at(8)};
  {
    RefereeStore store(dir.path / "data", key.public_key);
    CHECK(store.file() == dir.path / "data" / "referee.sqlite");
    store.open_dispute(id, open, "127.0.0.1");
    store.append(id, answer);
    store.append(id, resume);
    CHECK_THROWS_AS(store.open_dispute(id, open, "x"), StoreError);
    CHECK(store.committed() == 3);
  }
  {
    RefereeStore store(dir.path / "data", key.public_key);  // reopened: everything is there
    const auto all = store.load_open();
    REQUIRE(all.size() == 1);
    CHECK(all[0].id == id);
    CHECK(all[0].client == "127.0.0.1");
    CHECK(all[0].inputs == std::vector<DisputeInput>{open, answer, resume});
    CHECK(store.contains(id));
    CHECK_FALSE(store.verdict(id));
    const std::vector<uint8_t> verdict = {9, 9, 9};
    store.append(id, tick, &verdict);
    CHECK(store.verdict(id) == verdict);
    CHECK(store.load_open().empty());
    CHECK_FALSE(store.load(id));
    CHECK_THROWS_WITH_AS(store.append(id, answer), doctest::Contains("already decided"), StoreError);
    Digest other{};
    CHECK_THROWS_WITH_AS(store.append(other, answer), doctest::Contains("no dispute"), StoreError);
  }
  const KeyPair stranger = generate_keypair();
  CHECK_THROWS_WITH_AS(RefereeStore(dir.path / "data", stranger.public_key),
                       doctest::Contains("belongs to referee key"), StoreError);
}

TEST_CASE(
    "store: prune deletes decided disputes' records after the retention period and keeps their verdicts") {
  testing::TempDir dir("store-prune");
  const KeyPair key = generate_keypair();
  RefereeStore store(dir.path, key.public_key);
  Digest decided{}, open{};
  decided[0] = 1;
  open[0] = 2;
  const DisputeInput opening{DisputeInput::Kind::Open, 0, {1, 2, 3}, at(5)};
  const DisputeInput answer{DisputeInput::Kind::Envelope, 1, {4, 5}, at(6)};
  const std::vector<uint8_t> verdict = {9, 9, 9};
  store.open_dispute(decided, opening, "a");
  store.append(decided, answer, &verdict);
  store.open_dispute(open, opening, "b");
  store.append(open, answer);
  const auto now = std::chrono::system_clock::now();
  CHECK(store.prune(now - std::chrono::hours(1)) == 0);  // decided just now: within the retention period
  CHECK(store.stored_inputs(decided) == 2);
  CHECK(store.prune(now + std::chrono::hours(1)) == 1);
  CHECK(store.stored_inputs(decided) == 0);
  CHECK(store.verdict(decided) == verdict);
  CHECK(store.contains(decided));
  CHECK(store.stored_inputs(open) == 2);  // undecided disputes are never pruned
  REQUIRE(store.load(open).has_value());
  CHECK(store.load(open)->inputs == std::vector<DisputeInput>{opening, answer});
  CHECK(store.prune(now + std::chrono::hours(1)) == 0);
}

TEST_CASE("store: a file that is not a store, or is corrupt, is refused naming the file") {
  testing::TempDir dir("store-bad");
  const KeyPair key = generate_keypair();
  const auto file = dir.path / "referee.sqlite";
  {
    std::ofstream out(file, std::ios::binary);
    for (int i = 0; i < 4096; ++i) out.put(static_cast<char>(i * 37));
  }
  CHECK_THROWS_WITH_AS(RefereeStore(dir.path, key.public_key), doctest::Contains(file.string().c_str()),
                       StoreError);

  // A valid store whose pages are then overwritten in the middle.
  std::filesystem::remove(file);
  {
    RefereeStore store(dir.path, key.public_key);
    for (uint8_t i = 0; i < 50; ++i) {
      Digest id{};
      id[0] = i;
      store.open_dispute(id, {DisputeInput::Kind::Open, 0, std::vector<uint8_t>(3000, i), at(1)}, "c");
    }
  }
  {
    std::fstream io(file, std::ios::binary | std::ios::in | std::ios::out);
    io.seekp(4096 * 3);
    for (int i = 0; i < 4096 * 20; ++i) io.put(static_cast<char>(0xA5 ^ i));
  }
  bool refused = false;
  try {
    RefereeStore store(dir.path, key.public_key);
    store.load_open();
  } catch (const StoreError& e) {
    refused = true;
    CHECK(std::string(e.what()).find(file.string()) != std::string::npos);
    MESSAGE("corrupt store: " << std::string(e.what()));
  }
  CHECK(refused);

  // Not a directory we can create.
  CHECK_THROWS_AS(RefereeStore(file / "sub", key.public_key), StoreError);
}

TEST_CASE("replay: from every prefix of its inputs, a resumed dispute reaches the same verdict") {
  const Fixture& fx = fixture();
  const Reference& ref = reference();
  const Verdict expected = body_of(ref.verdict);
  CHECK(expected.winners == std::vector<uint8_t>{1});
  CHECK(expected.reason == VerdictReason::WrongOutput);
  CHECK(expected.step == 12);
  CHECK(expected.node == 13);
  REQUIRE(ref.inputs.size() >= 20);
  MESSAGE(ref.inputs.size() << " inputs");
  for (size_t k = 1; k <= ref.inputs.size(); ++k) {
    CAPTURE(k);
    auto d = RefereeDispute::replay(fx.referee, std::span(ref.inputs.data(), k));
    // Deterministic: the same game and the same referee sequence numbers as the lost process.
    CHECK(d->sequence() == ref.sequence_after[k - 1]);
    if (k == ref.inputs.size()) {
      REQUIRE(d->done());
      CHECK(encode_body(d->verdict()) == encode_body(expected));
      CHECK(d->verdict_envelope() == ref.verdict);
      continue;
    }
    REQUIRE_FALSE(d->done());
    std::vector<DisputeInput> recorded(ref.inputs.begin(), ref.inputs.begin() + static_cast<long>(k));
    const auto keep = [&](const RefereeDispute::Step& step, uint64_t) {
      recorded.insert(recorded.end(), step.commit.begin(), step.commit.end());
    };
    const uint64_t lost = d->sequence();
    keep(d->resume(at(5000)), 0);
    REQUIRE(recorded.size() == k + 1);
    CHECK(recorded.back().kind == DisputeInput::Kind::Resume);
    // Both providers reconnect: the DisputeOpen (a new session each) and the question still owed.
    Parties parties(fx);
    std::deque<RefereeDispute::Outgoing> queue;
    for (int p = 0; p < 2; ++p)
      for (auto& o : d->reconnect(p)) queue.push_back(std::move(o));
    uint64_t min_query = UINT64_MAX;
    const std::vector<uint8_t> verdict = drive(*d, parties, std::move(queue), at(5000), &min_query, keep);
    REQUIRE(d->done());
    CHECK(min_query > lost);  // fresh sequence numbers only
    CHECK(encode_body(body_of(verdict)) == encode_body(expected));

    // The record with its Resume replays to the same verdict too.
    if (k == ref.inputs.size() / 2) {
      auto again = RefereeDispute::replay(fx.referee, recorded);
      REQUIRE(again->done());
      CHECK(again->verdict_envelope() == verdict);
    }
  }
}

TEST_CASE("replay: a resumed dispute restarts the open deadlines; a record that does not replay is refused") {
  const Fixture& fx = fixture();
  const Reference& ref = reference();
  const size_t k = 3;  // opened, then two answers: questions are open
  DisputeOptions o;
  {
    // Without a resume, the referee's downtime would count against the providers.
    auto d = RefereeDispute::replay(fx.referee, std::span(ref.inputs.data(), k), o);
    d->on_tick(at(60000));
    CHECK(d->done());
    CHECK(d->verdict().reason == VerdictReason::Timeout);
  }
  {
    auto d = RefereeDispute::replay(fx.referee, std::span(ref.inputs.data(), k), o);
    // The clock restarts from the resume with the time the party had when asked.
    const GameTime before = d->game().deadline(0);
    d->resume(at(60000));
    const GameTime deadline = d->game().deadline(0);
    CHECK(deadline == at(60000) + (before - ref.inputs[k - 1].at));
    d->on_tick(deadline - std::chrono::milliseconds(1));
    CHECK_FALSE(d->done());
    d->on_tick(deadline + std::chrono::milliseconds(1));
    REQUIRE(d->done());
    CHECK(d->verdict().reason == VerdictReason::Timeout);
  }
  // Inputs that the game would not take again.
  std::vector<DisputeInput> bad(ref.inputs.begin(), ref.inputs.begin() + 3);
  bad[1].party ^= 1;  // an answer attributed to the other party: not signed by its key
  CHECK_THROWS_WITH_AS(RefereeDispute::replay(fx.referee, bad), doctest::Contains("input 1 does not replay"),
                       ProtocolError);
  bad = {ref.inputs[0], ref.inputs[1], ref.inputs[1]};  // the same envelope twice
  CHECK_THROWS_WITH_AS(RefereeDispute::replay(fx.referee, bad), doctest::Contains("stale sequence"),
                       ProtocolError);
  bad = {ref.inputs[0], {DisputeInput::Kind::Tick, 0, {}, at(1)}};  // a tick that decides nothing
  CHECK_THROWS_AS(RefereeDispute::replay(fx.referee, bad), ProtocolError);
  bad = {ref.inputs[1]};  // no opening
  CHECK_THROWS_AS(RefereeDispute::replay(fx.referee, bad), ProtocolError);
  // A re-execution record where no input opening ends, one that does not decode, one of another node.
  REQUIRE(ref.inputs.back().kind == DisputeInput::Kind::Opened);
  bad = {ref.inputs[0], ref.inputs.back()};
  CHECK_THROWS_WITH_AS(RefereeDispute::replay(fx.referee, bad),
                       doctest::Contains("no input opening of a node without a rounding log ends here"),
                       ProtocolError);
  bad = ref.inputs;
  bad.back().envelope.pop_back();
  CHECK_THROWS_WITH_AS(RefereeDispute::replay(fx.referee, bad),
                       doctest::Contains("its re-execution record does not decode"), ProtocolError);
  OpenedRecord other = decode_opened_record(ref.inputs.back().envelope);
  other.summary.node += 1;
  bad.back().envelope = encode_opened_record(other);
  CHECK_THROWS_WITH_AS(RefereeDispute::replay(fx.referee, bad),
                       doctest::Contains("the recorded re-execution is of node 14, the game located node 13"),
                       ProtocolError);
}

TEST_CASE("replay: the opened bytes are not recorded; their re-execution's outcome replays to the verdict") {
  const Fixture& fx = fixture();
  const Reference& ref = reference();
  // The record holds no opened piece: one Opened input, last, stands for them.
  size_t pieces_recorded = 0;
  for (const DisputeInput& in : ref.inputs)
    if (in.kind == DisputeInput::Kind::Envelope) {
      const Body body = open_envelope(in.envelope, SignatureCheck::DeferTensorChunks).body;
      pieces_recorded += std::holds_alternative<TensorChunk>(body) || std::holds_alternative<Samples>(body);
    }
  CHECK(pieces_recorded == 0);
  REQUIRE(ref.inputs.back().kind == DisputeInput::Kind::Opened);
  CHECK(std::count_if(ref.inputs.begin(), ref.inputs.end(),
                      [](const DisputeInput& in) { return in.kind == DisputeInput::Kind::Opened; }) == 1);
  const OpenedRecord record = decode_opened_record(ref.inputs.back().envelope);
  CHECK(encode_opened_record(record) == ref.inputs.back().envelope);  // one encoding
  CHECK(record.summary.node == 13);
  REQUIRE(record.outcome.kind == ReexecutionOutcome::Kind::Outputs);
  CHECK_FALSE(record.outcome.outputs[0].outputs.empty());
  CHECK(record.outcome.outputs[0].outputs == record.outcome.outputs[1].outputs);  // RepOps: one result
  REQUIRE(record.outcome.events.size() == 1);
  // Node 13 updates l0.weight (784 × 256, 13 chunks): level 4 located chunk 0 (element 0 is corrupted),
  // and the AdamW part of it reads chunk 0 of each input.
  CHECK(record.outcome.events[0].starts_with("re-executed chunk 0 of output 0 of node 13: chunk hash "));
  REQUIRE_FALSE(record.summary.whole.empty());
  for (const OpenedSummary::Whole& w : record.summary.whole) {
    int64_t numel = 1;
    for (const int64_t dim : w.shape) numel *= dim;
    CHECK(w.elements == 16384);
    CHECK(static_cast<uint64_t>(numel) > w.elements);
    CHECK(w.non_finite == 0);
    CHECK(w.min <= w.mean);
    CHECK(w.mean <= w.max);
  }
  REQUIRE_FALSE(record.summary.first.empty());
  CHECK(record.summary.first[0].values.size() == OpenedSummary::kFirstElements);

  // The same dispute played again, keeping its record as an older referee wrote it: the opening's
  // pieces, each as received, in place of the Opened input.
  RefereeDispute d(fx.referee, open_envelope(fx.open));
  std::vector<DisputeInput> old_record, pieces;
  uint64_t opened_bytes = 0;
  DisputeInput last;
  const auto answer = [&](int party, const std::vector<uint8_t>& envelope) {
    last = {DisputeInput::Kind::Envelope, party, envelope, at(0)};
  };
  const auto step_seen = [&](const RefereeDispute::Step& step, uint64_t) {
    if (step.commit.empty()) {
      if (d.game().phase() == Phase::OpenInputs) pieces.push_back(last);
      return;
    }
    if (step.commit.back().kind != DisputeInput::Kind::Opened) {
      old_record.insert(old_record.end(), step.commit.begin(), step.commit.end());
      return;
    }
    CHECK(step.commit.size() == 1);
    CHECK(step.commit.back() == ref.inputs.back());  // the same outcome and summary, byte for byte
    pieces.push_back(last);
    for (const DisputeInput& p : pieces) opened_bytes += p.envelope.size();
    old_record.insert(old_record.end(), pieces.begin(), pieces.end());
  };
  Parties parties(fx);
  const RefereeDispute::Step first = d.start(at(0));
  old_record = first.commit;
  const std::vector<uint8_t> verdict =
      drive(d, parties, {first.send.begin(), first.send.end()}, at(0), nullptr, step_seen, answer);
  CHECK(verdict == ref.verdict);
  MESSAGE("opened pieces: " << pieces.size() << " envelopes, " << opened_bytes << " bytes; Opened input "
                            << ref.inputs.back().envelope.size() << " bytes");
  CHECK(ref.inputs.back().envelope.size() * 10 < opened_bytes);

  // Both records replay to the same verdict and events; the older one's summary is computed from its
  // pieces and equals the recorded one.
  std::vector<DisputeEvent> from_old, from_new;
  ReplayTrace old_trace, new_trace;
  const auto again_old = RefereeDispute::replay(fx.referee, old_record, {}, &from_old, &old_trace);
  const auto again_new = RefereeDispute::replay(fx.referee, ref.inputs, {}, &from_new, &new_trace);
  CHECK(again_old->verdict_envelope() == ref.verdict);
  CHECK(again_new->verdict_envelope() == ref.verdict);
  CHECK(from_old == from_new);
  REQUIRE(old_trace.opened);
  REQUIRE(new_trace.opened);
  CHECK(*old_trace.opened == record.summary);
  CHECK(*new_trace.opened == record.summary);
  CHECK(new_trace.phases.back().second == Phase::Done);
}

TEST_CASE("provider: answer sequence numbers derive from the query's, so a restarted provider is not stale") {
  const Fixture& fx = fixture();
  RefereeDispute d(fx.referee, open_envelope(fx.open));
  const auto out = d.start(at(0)).send;
  const Envelope query = open_envelope(out.at(2).envelope);  // open, open, then the first query
  REQUIRE(query.kind == MessageKind::Query);
  const int party = out.at(2).party;
  const Provider& p = party == 0 ? fx.cheater : fx.honest;
  ThreadPool pool(1);
  const auto session = [&] {
    return std::make_unique<ProviderDisputeSession>(
        p.key, open_envelope(fx.open), load_job(kJobFile), train_set(), p.store.path, pool,
        std::vector<PublicKey>{fx.referee.public_key}, fault_policy(p.fault));
  };
  auto first = session();
  const auto answers = first->on_envelope(query);
  REQUIRE(answers.size() == 1);
  CHECK(open_envelope(answers[0]).sequence == query.sequence << 20);
  CHECK(ProviderDisputeSession::answer_sequence(7, 3) == (uint64_t{7} << 20 | 3));
  CHECK_THROWS_AS(ProviderDisputeSession::answer_sequence(uint64_t{1} << 44, 0), ProtocolError);
  CHECK_THROWS_AS(ProviderDisputeSession::answer_sequence(1, uint64_t{1} << 20), ProtocolError);
  // A restarted provider (new session) answers the same query with the same bytes.
  CHECK(session()->on_envelope(query) == answers);
  // The referee re-sends the question with a higher sequence number (resumed): answered again, higher.
  const std::vector<uint8_t> resent = seal(fx.referee, query.context, query.sequence + 5, query.body);
  const auto again = first->on_envelope(open_envelope(resent));
  REQUIRE(again.size() == 1);
  CHECK(open_envelope(again[0]).sequence == (query.sequence + 5) << 20);
  CHECK_THROWS_AS(first->on_envelope(open_envelope(resent)), ProtocolError);  // the same one again: stale
  // On a new connection the same session answers it again (its caches kept).
  first->new_connection();
  CHECK(first->on_envelope(open_envelope(resent)) == again);
  CHECK(d.on_envelope(party, open_envelope(answers[0]), at(0)).refused.empty());
  // accepted envelope, same answer: ignored by the game
  CHECK(d.on_envelope(party, open_envelope(again[0]), at(0)).refused.empty());
}

TEST_CASE("store: a dispute's rounds are stored as they happen, kept after pruning, and capped") {
  testing::TempDir dir("store-events");
  const KeyPair key = generate_keypair();
  RefereeStore store(dir.path, key.public_key);
  Digest id{}, many{};
  id[0] = 1;
  many[0] = 2;
  const DisputeInput opening{DisputeInput::Kind::Open, 0, {1, 2, 3}, at(5)};
  const DisputeInput answer{DisputeInput::Kind::Envelope, 1, {4, 5}, at(6)};
  const std::vector<uint8_t> verdict = {9, 9, 9};
  const std::vector<DisputeEvent> events = {{Phase::Checkpoints, 1, "level 1: question"},
                                            {Phase::Steps, 4, "level 2: step 3 is the first"},
                                            {Phase::Done, 9, "verdict: provider 1 wins"}};
  store.open_dispute(id, opening, "a", std::span(events).first(1));
  CHECK(store.events(id).size() == 1);  // stored as they happen, with the inputs that made them
  store.append(id, answer, nullptr, std::span(events).subspan(1, 1));
  CHECK(store.events(id).size() == 2);
  store.append(id, answer, &verdict, std::span(events).subspan(2));
  const std::vector<DisputeEvent> stored = store.events(id);
  REQUIRE(stored.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(stored[i].phase == events[i].phase);
    CHECK(stored[i].round == events[i].round);
    CHECK(stored[i].text == events[i].text);
  }
  CHECK(store.prune(std::chrono::system_clock::now() + std::chrono::hours(1)) == 1);
  CHECK(store.stored_inputs(id) == 0);
  CHECK(store.events(id).size() == 3);  // kept with the verdict

  // A party that makes the referee refuse a frame per round cannot grow the store without bound.
  std::vector<DisputeEvent> flood(kMaxStoredEvents + 100, DisputeEvent{Phase::Nodes, 7, "refused a message"});
  flood.back().text = "verdict: last";
  store.open_dispute(many, opening, "b");
  store.append(many, answer, &verdict, flood);
  const std::vector<DisputeEvent> capped = store.events(many);
  REQUIRE(capped.size() == kMaxStoredEvents);
  CHECK(capped.back().text == "verdict: last");
}

TEST_CASE(
    "store: a version 3 store is upgraded; its decided disputes keep their verdicts and have no stored "
    "rounds") {
  testing::TempDir dir("store-v3");
  const KeyPair key = generate_keypair();
  Digest id{};
  id[0] = 7;
  {
    // The version 3 schema, as the referee of issue 27 wrote it, with one decided dispute.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "referee.sqlite").c_str(), &db) == SQLITE_OK);
    const std::string sql = R"sql(
      CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
      CREATE TABLE disputes (id BLOB PRIMARY KEY CHECK (length(id) = 32), client TEXT NOT NULL, verdict BLOB,
                             decided_at INTEGER);
      CREATE TABLE inputs (n INTEGER PRIMARY KEY, dispute BLOB NOT NULL REFERENCES disputes (id), kind INTEGER NOT NULL,
                           party INTEGER NOT NULL, envelope BLOB NOT NULL, now_ms INTEGER NOT NULL);
      CREATE INDEX inputs_by_dispute ON inputs (dispute, n);
      PRAGMA user_version=3;)sql";
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "INSERT INTO meta VALUES ('referee_key', ?1)", -1, &s, nullptr) ==
            SQLITE_OK);
    sqlite3_bind_blob(s, 1, key.public_key.data(), static_cast<int>(key.public_key.size()), SQLITE_TRANSIENT);
    CHECK(sqlite3_step(s) == SQLITE_DONE);
    sqlite3_finalize(s);
    REQUIRE(sqlite3_prepare_v2(db, "INSERT INTO disputes VALUES (?1, 'a', x'090909', 1)", -1, &s, nullptr) ==
            SQLITE_OK);
    sqlite3_bind_blob(s, 1, id.data(), static_cast<int>(id.size()), SQLITE_TRANSIENT);
    CHECK(sqlite3_step(s) == SQLITE_DONE);
    sqlite3_finalize(s);
    sqlite3_close(db);
  }
  RefereeStore store(dir.path, key.public_key);
  CHECK(store.verdict(id) == std::vector<uint8_t>{9, 9, 9});
  CHECK(store.events(id).empty());
  Digest next{};
  next[0] = 8;
  const std::vector<uint8_t> verdict = {1};
  store.open_dispute(next, {DisputeInput::Kind::Open, 0, {1}, at(1)}, "b");
  store.append(next, {DisputeInput::Kind::Tick, 0, {}, at(2)}, &verdict,
               std::vector<DisputeEvent>{{Phase::Done, 1, "v"}});
  CHECK(store.events(next).size() == 1);
}

TEST_CASE(
    "steps: a handler returns the input to commit and what to send; a refused envelope changes nothing") {
  const Fixture& fx = fixture();
  RefereeDispute d(fx.referee, open_envelope(fx.open));
  const RefereeDispute::Step first = d.start(at(0));
  REQUIRE(first.commit.size() == 1);
  CHECK(first.commit[0] == DisputeInput{DisputeInput::Kind::Open, 0, fx.open, at(0)});
  REQUIRE(first.send.size() == 4);  // the opening to both, then the first question to each
  CHECK(first.send[0].envelope == fx.open);
  CHECK(first.send[1].envelope == fx.open);
  for (size_t i = 2; i < 4; ++i) {
    const Envelope q = open_envelope(first.send[i].envelope);
    CHECK(q.kind == MessageKind::Query);
    CHECK(first.send[i].question == q.sequence);  // to report to on_written
    CHECK(q.sequence == (i - 1) << kReaskSequenceBits);
  }
  REQUIRE(first.events.size() == 2);
  CHECK(first.events[0].text.starts_with("dispute "));
  CHECK(first.events[1].text.starts_with("level 1: open the children of leaves [0, "));
  CHECK_FALSE(first.verdict);
  CHECK(first.refused.empty());

  Parties parties(fx);
  for (int p = 0; p < 2; ++p) parties.deliver(p, fx.open);
  const int party = first.send[2].party;
  const std::vector<std::vector<uint8_t>> answers = parties.deliver(party, first.send[2].envelope);
  REQUIRE(answers.size() == 1);
  const RefereeDispute::Step accepted = d.on_envelope(party, open_envelope(answers[0]), at(7));
  REQUIRE(accepted.commit.size() == 1);
  CHECK(accepted.commit[0] == DisputeInput{DisputeInput::Kind::Envelope, party, answers[0], at(7)});
  CHECK(accepted.send.empty());  // the other party has not answered yet
  CHECK(accepted.events.empty());
  CHECK_FALSE(accepted.rejected);
  // The commits are what replay() needs: the replayed dispute is where this one is.
  const std::vector<DisputeInput> record = {first.commit[0], accepted.commit[0]};
  const auto replayed = RefereeDispute::replay(fx.referee, record);
  CHECK(replayed->sequence() == d.sequence());
  CHECK_FALSE(replayed->game().awaiting(party));
  CHECK(replayed->game().awaiting(1 - party));

  // The same envelope again: refused before the game, nothing to commit, send or tell.
  const RefereeDispute::Step stale = d.on_envelope(party, open_envelope(answers[0]), at(8));
  CHECK(stale.refused == "stale sequence number (replay)");
  CHECK(stale.commit.empty());
  CHECK(stale.send.empty());
  CHECK(stale.events.empty());
  // Signed by the other party's key for this party: refused too.
  const std::vector<uint8_t> forged =
      seal(party == 0 ? fx.honest.key : fx.cheater.key, d.dispute_id(), 99, open_envelope(answers[0]).body);
  const RefereeDispute::Step wrong_key = d.on_envelope(party, open_envelope(forged), at(8));
  CHECK(wrong_key.refused == "not signed by the party's claim key");
  CHECK(wrong_key.commit.empty());
  CHECK(wrong_key.send.empty());

  // The other party's answer ends the round: committed, and the next round's questions sent.
  const int other = first.send[3].party;
  const auto other_answers = parties.deliver(other, first.send[3].envelope);
  REQUIRE(other_answers.size() == 1);
  const RefereeDispute::Step next = d.on_envelope(other, open_envelope(other_answers[0]), at(9));
  REQUIRE(next.commit.size() == 1);
  CHECK(next.commit[0].envelope == other_answers[0]);
  REQUIRE(next.send.size() == 2);
  CHECK(open_envelope(next.send[0].envelope).sequence == next.send[0].question);
  REQUIRE(next.events.size() == 1);
  CHECK(next.events[0].round == 2);
  // A question's write commits an Asked input once; a second report of the same write commits nothing.
  const RefereeDispute::Step written = d.on_written(next.send[0].party, next.send[0].question, at(10));
  CHECK(written.commit ==
        std::vector<DisputeInput>{{DisputeInput::Kind::Asked, next.send[0].party, {}, at(10)}});
  CHECK(written.send.empty());
  CHECK(d.on_written(next.send[0].party, next.send[0].question, at(11)).commit.empty());
}

TEST_CASE(
    "steps: the verdict's Step carries it; the store keeps the events the steps returned, across reopening") {
  const Fixture& fx = fixture();
  testing::TempDir dir("store-steps");
  RefereeDispute d(fx.referee, open_envelope(fx.open));
  const Digest id = d.dispute_id();
  std::vector<DisputeEvent> returned;
  std::optional<RefereeDispute::Step> decided;
  std::vector<uint8_t> verdict;
  {
    RefereeStore store(dir.path, fx.referee.public_key);
    // As RefereeNode commits a Step: its inputs, the events with the last one (and the verdict).
    std::vector<DisputeEvent> unstored;
    const auto take = [&](const RefereeDispute::Step& step, uint64_t) {
      returned.insert(returned.end(), step.events.begin(), step.events.end());
      unstored.insert(unstored.end(), step.events.begin(), step.events.end());
      for (size_t i = 0; i < step.commit.size(); ++i) {
        const bool last = i + 1 == step.commit.size();
        const std::span<const DisputeEvent> events =
            last ? std::span(unstored) : std::span<const DisputeEvent>{};
        if (step.commit[i].kind == DisputeInput::Kind::Open)
          store.open_dispute(id, step.commit[i], "a", events);
        else
          store.append(id, step.commit[i], last && step.verdict ? &*step.verdict : nullptr, events);
      }
      if (!step.commit.empty()) unstored.clear();
      if (step.verdict) decided = step;
    };
    Parties parties(fx);
    const RefereeDispute::Step first = d.start(at(0));
    take(first, 0);
    verdict = drive(d, parties, {first.send.begin(), first.send.end()}, at(0), nullptr, take);
    CHECK(unstored.empty());
  }
  REQUIRE(decided);
  CHECK(*decided->verdict == verdict);
  CHECK(verdict == d.verdict_envelope());
  CHECK(verdict == reference().verdict);
  CHECK_FALSE(decided->commit.empty());
  REQUIRE(decided->send.size() >= 2);  // the verdict to both parties, last
  CHECK(decided->send.back().envelope == verdict);
  CHECK(decided->send[decided->send.size() - 2].envelope == verdict);
  CHECK(decided->send.back().party + decided->send[decided->send.size() - 2].party == 1);
  REQUIRE_FALSE(decided->events.empty());
  CHECK(decided->events.back().text.starts_with(
      "verdict: provider 1 wins (wrong_output) at level 3, step 12, node 13"));

  RefereeStore reopened(dir.path, fx.referee.public_key);
  CHECK(reopened.verdict(id) == verdict);
  REQUIRE(returned.size() > 10);
  CHECK(reopened.events(id) == returned);
  // Replay regenerates them from the record (an older store's fallback; no envelope was refused here).
  std::vector<DisputeEvent> replayed;
  const auto again = RefereeDispute::replay(fx.referee, reopened.inputs(id), {}, &replayed);
  CHECK(again->verdict_envelope() == verdict);
  CHECK(replayed == returned);
}

TEST_CASE("store: a version 4 store is upgraded; its undecided disputes have no events until restored") {
  testing::TempDir dir("store-v4");
  const KeyPair key = generate_keypair();
  Digest open_id{}, decided_id{};
  open_id[0] = 4;
  decided_id[0] = 5;
  {
    // The version 4 schema (events written with the verdict only), one undecided and one decided dispute.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "referee.sqlite").c_str(), &db) == SQLITE_OK);
    const std::string sql = R"sql(
      CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
      CREATE TABLE disputes (id BLOB PRIMARY KEY CHECK (length(id) = 32), client TEXT NOT NULL, verdict BLOB,
                             decided_at INTEGER);
      CREATE TABLE inputs (n INTEGER PRIMARY KEY, dispute BLOB NOT NULL REFERENCES disputes (id), kind INTEGER NOT NULL,
                           party INTEGER NOT NULL, envelope BLOB NOT NULL, now_ms INTEGER NOT NULL);
      CREATE INDEX inputs_by_dispute ON inputs (dispute, n);
      CREATE TABLE events (dispute BLOB NOT NULL REFERENCES disputes (id), n INTEGER NOT NULL, phase INTEGER NOT NULL,
                           round INTEGER NOT NULL, text TEXT NOT NULL, PRIMARY KEY (dispute, n));
      PRAGMA user_version=4;)sql";
    REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    const auto run = [&](const char* statement, std::span<const uint8_t> blob) {
      sqlite3_stmt* s = nullptr;
      REQUIRE(sqlite3_prepare_v2(db, statement, -1, &s, nullptr) == SQLITE_OK);
      sqlite3_bind_blob(s, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
      CHECK(sqlite3_step(s) == SQLITE_DONE);
      sqlite3_finalize(s);
    };
    run("INSERT INTO meta VALUES ('referee_key', ?1)", key.public_key);
    run("INSERT INTO disputes VALUES (?1, 'a', NULL, NULL)", open_id);
    run("INSERT INTO inputs (dispute, kind, party, envelope, now_ms) VALUES (?1, 1, 0, x'010203', 5)",
        open_id);
    run("INSERT INTO disputes VALUES (?1, 'b', x'090909', 1)", decided_id);
    run("INSERT INTO events VALUES (?1, 0, 9, 3, 'verdict: kept')", decided_id);
    sqlite3_close(db);
  }
  RefereeStore store(dir.path, key.public_key);
  CHECK(store.events(decided_id) == std::vector<DisputeEvent>{{Phase::Done, 3, "verdict: kept"}});
  const std::optional<StoredDispute> old = store.load(open_id);
  REQUIRE(old);
  CHECK_FALSE(old->events);  // not kept before the upgrade: the node replays for them
  REQUIRE(store.load_open().size() == 1);
  CHECK_FALSE(store.load_open()[0].events);
  const std::vector<DisputeEvent> replayed = {{Phase::Checkpoints, 1, "dispute opened"},
                                              {Phase::Checkpoints, 1, "level 1: question"}};
  store.restore_events(open_id, replayed);
  store.append(open_id, {DisputeInput::Kind::Resume, 0, {}, at(9)}, nullptr,
               std::vector<DisputeEvent>{{Phase::Checkpoints, 1, "resumed"}});
  const std::optional<StoredDispute> restored = store.load(open_id);
  REQUIRE(restored);
  REQUIRE(restored->events);
  CHECK(restored->events->size() == 3);
  CHECK(restored->events->back().text == "resumed");
  CHECK_THROWS_AS(store.restore_events(decided_id, replayed), StoreError);  // decided: its events stand
  // A dispute opened after the upgrade keeps its events from the start.
  Digest fresh{};
  fresh[0] = 6;
  store.open_dispute(fresh, {DisputeInput::Kind::Open, 0, {1}, at(1)}, "c");
  REQUIRE(store.load(fresh));
  CHECK(store.load(fresh)->events == std::vector<DisputeEvent>{});
}
