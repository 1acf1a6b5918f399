// The referee over signed envelopes, in process: claims signed by two providers, the client's
// DisputeOpen, provider sessions answering from their checkpoints, a signed verdict that verifies
// offline — and refusal of envelopes from the wrong key, for another dispute, or replayed.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dispute/provider_session.h"
#include "referee/local_dispute.h"
#include "referee/referee_dispute.h"
#include "tests/referee/signed_provider.h"
#include "tests/source_dir.h"

using namespace tribunal;
using namespace tribunal::cheats;

namespace {

const std::filesystem::path kJobFile = tribunal::testing::source_dir() / "scenarios/jobs/short_mlp.toml";

using testing::train_set;

using Provider = testing::SignedProvider;

struct Run {
  std::vector<uint8_t> verdict;
  size_t bytes_in = 0, bytes_out = 0;
  std::vector<std::string> events;
};

std::vector<uint8_t> opening(const KeyPair& client, const Provider& a, const Provider& b) {
  return testing::dispute_opening(client, a, b);
}

/// The two providers' sides of a dispute: each party's session is made when it receives the
/// DisputeOpen (as the provider node does) and answers the referee's envelopes from its checkpoints.
class Parties {
 public:
  Parties(const KeyPair& referee_key, const Provider& a, const Provider& b)
      : referee_key_(referee_key),
        providers_{&a, &b},
        job_(load_job(tribunal::testing::source_dir() / a.job_file)) {}

  /// Party p's signed answers to `env` (none to the DisputeOpen).
  std::vector<std::vector<uint8_t>> answer(int p, const Envelope& env) {
    auto& session = sessions_[static_cast<size_t>(p)];
    if (env.kind != MessageKind::DisputeOpen) return session->on_envelope(env);
    const Provider& pr = *providers_[static_cast<size_t>(p)];
    session = std::make_unique<ProviderDisputeSession>(pr.key, env, job_, train_set(), pr.store.path, pool_,
                                                       std::vector<PublicKey>{referee_key_.public_key},
                                                       fault_policy(pr.fault));
    CHECK(session->party() == p);
    return {};
  }

  /// Both parties as play_local takes them (this must outlive the play).
  std::array<LocalParty, 2> local() {
    std::array<LocalParty, 2> parties;
    for (int p = 0; p < 2; ++p)
      parties[static_cast<size_t>(p)] = [this, p](const Envelope& env) { return answer(p, env); };
    return parties;
  }

 private:
  const KeyPair& referee_key_;
  std::array<const Provider*, 2> providers_;
  JobSpec job_;
  ThreadPool pool_{1};
  std::array<std::unique_ptr<ProviderDisputeSession>, 2> sessions_;
};

Run play(const KeyPair& referee_key, const Provider& a, const Provider& b) {
  const KeyPair client = generate_keypair();
  RefereeDispute referee(referee_key, open_envelope(opening(client, a, b)));
  Run run;
  Parties sides(referee_key, a, b);
  const LocalRun local = play_local(referee, sides.local());
  for (const DisputeEvent& e : local.events) run.events.push_back(e.text);
  CHECK(local.refused.empty());
  REQUIRE(referee.done());
  run.verdict = local.verdict;
  run.bytes_in = local.bytes_in;
  run.bytes_out = local.bytes_out;
  return run;
}

Fault corrupt(int64_t step, int64_t node) {
  Fault f;
  f.step = step;
  f.node = node;
  f.delta = 10.0f;
  return f;
}

}  // namespace

TEST_CASE("referee: a signed verdict against the cheater, verifiable offline") {
  const KeyPair referee_key = generate_keypair();
  const Provider honest(Fault{}), cheater(corrupt(21, 11));
  const Run run = play(referee_key, cheater, honest);
  const Verdict v = verify_verdict(run.verdict, referee_key.public_key);
  CHECK(v.losers == std::vector<uint8_t>{0});
  CHECK(v.winners == std::vector<uint8_t>{1});
  CHECK(v.reason == VerdictReason::WrongOutput);
  CHECK(v.step == 21);
  CHECK(v.node == 11);
  CHECK(v.opening.claims == std::vector<std::vector<uint8_t>>{cheater.signed_claim, honest.signed_claim});
  CHECK(v.opening == testing::dispute_open_body(cheater, honest));
  // The narrowing is reported as it happens, level by level.
  REQUIRE(run.events.size() >= 5);
  CHECK(run.events.front().find("opened") != std::string::npos);
  CHECK(run.events.back().find("verdict: provider 1 wins (wrong_output)") == 0);
  // The referee receives little more than the one op's inputs.
  MESSAGE("referee bytes in " << run.bytes_in << ", out " << run.bytes_out);

  // Offline verification fails for another referee key and for any flipped bit.
  const KeyPair other = generate_keypair();
  CHECK_THROWS_AS(verify_verdict(run.verdict, other.public_key), ProtocolError);
  for (size_t bit = 0; bit < run.verdict.size() * 8; bit += 61) {
    std::vector<uint8_t> bad = run.verdict;
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    CHECK_THROWS(verify_verdict(bad, referee_key.public_key));
  }
}

TEST_CASE("referee: refuses envelopes from the wrong key, for another dispute, or replayed") {
  const KeyPair referee_key = generate_keypair();
  const Provider honest(Fault{}), cheater(corrupt(5, 2));
  const KeyPair client = generate_keypair();
  const std::vector<uint8_t> open = opening(client, honest, cheater);
  RefereeDispute referee(referee_key, open_envelope(open));
  auto out = referee.start(GameTime{}).send;
  const Envelope first_query = open_envelope(out[2].envelope);
  const Query q = std::get<Query>(first_query.body);
  ThreadPool pool(1);
  ProviderDisputeSession session(honest.key, open_envelope(open), load_job(kJobFile), train_set(),
                                 honest.store.path, pool, {referee_key.public_key});
  const std::vector<uint8_t> answer = session.on_envelope(first_query).at(0);
  // Signed by someone else.
  const std::vector<uint8_t> forged = seal(cheater.key, referee.dispute_id(), 1, open_envelope(answer).body);
  RefereeDispute::Step step = referee.on_envelope(out[2].party, open_envelope(forged), GameTime{});
  CHECK(step.send.empty());
  CHECK(step.refused == "not signed by the party's claim key");
  // For another dispute.
  Digest other_dispute = referee.dispute_id();
  other_dispute[0] ^= 1;
  step = referee.on_envelope(
      out[2].party, open_envelope(seal(honest.key, other_dispute, 2, Children{q.round, {}, {}})), GameTime{});
  CHECK(step.send.empty());
  CHECK(step.refused == "for another dispute");
  // Accepted once; the same envelope again is a replay.
  CHECK(referee.on_envelope(out[2].party, open_envelope(answer), GameTime{}).refused.empty());
  CHECK(referee.on_envelope(out[2].party, open_envelope(answer), GameTime{}).refused ==
        "stale sequence number (replay)");
  // The provider side refuses replays and other disputes too.
  CHECK_THROWS_AS(session.on_envelope(first_query), ProtocolError);
}

TEST_CASE(
    "referee: opened chunks are trusted by their proofs; one not signed by the party never counts against "
    "it") {
  // The referee opens tensor chunks without checking their signatures (SignatureCheck::
  // DeferTensorChunks, as the referee node does). Someone on the honest provider's path injects, before
  // each of its chunks, a copy with a flipped data byte (its signature no longer verifies) or with a
  // flipped signature byte (its data still proves itself).
  const KeyPair referee_key = generate_keypair();
  const Provider honest(Fault{}), cheater(corrupt(21, 11));
  const KeyPair client = generate_keypair();
  RefereeDispute referee(referee_key, open_envelope(opening(client, honest, cheater)));
  Parties sides(referee_key, honest, cheater);
  std::array<LocalParty, 2> parties;
  int chunks = 0;
  for (int p = 0; p < 2; ++p)
    parties[static_cast<size_t>(p)] = [&, p](const Envelope& env) {
      std::vector<std::vector<uint8_t>> out;
      for (std::vector<uint8_t>& answer : sides.answer(p, env)) {
        if (p == 0 && open_envelope(answer).kind == MessageKind::TensorChunk) {
          std::vector<uint8_t> injected = answer;
          if (chunks % 2 == 0) {
            // The same envelope around a chunk with one data bit flipped: the signature is the party's
            // on other bytes.
            Body body = open_envelope(answer).body;
            std::get<TensorChunk>(body).bytes.at(0) ^= 1;
            const std::vector<uint8_t> encoded = encode_body(body);
            std::copy(encoded.begin(), encoded.end(), injected.begin() + kEnvelopeHeaderBytes);
          } else {
            injected.back() ^= 1;  // the signature
          }
          out.push_back(std::move(injected));
          ++chunks;
        }
        out.push_back(std::move(answer));
      }
      return out;
    };
  const LocalRun local = play_local(referee, parties);
  REQUIRE(referee.done());
  REQUIRE(chunks >= 2);
  // A copy with flipped data was refused for its signature, and the genuine chunk then taken; a copy
  // with a flipped signature was taken in place of the genuine chunk, which was then redundant (or
  // came after the verdict).
  size_t bad_signatures = 0;
  for (const std::string& r : local.refused) {
    const bool signature = r.find("does not verify under the sender key") != std::string::npos;
    bad_signatures += signature;
    CHECK((signature || r == "the dispute is over"));
  }
  CHECK(bad_signatures == static_cast<size_t>((chunks + 1) / 2));
  const Verdict v = verify_verdict(local.verdict, referee_key.public_key);
  CHECK(v.reason == VerdictReason::WrongOutput);
  CHECK(v.winners == std::vector<uint8_t>{0});
  CHECK(v.losers == std::vector<uint8_t>{1});
  CHECK(v.node == 11);
}

TEST_CASE(
    "referee: both parties' streams fill one opening, each chunk taken once from whoever sends it first") {
  // In the network both parties stream the located node's inputs at once. Here party 0 sends only its
  // first frame and party 1 everything but its first: the opening completes only by combining them.
  // Party 0's first frame, sent again, is redundant: nothing is refused.
  const KeyPair referee_key = generate_keypair();
  const Provider honest(Fault{}), cheater(corrupt(21, 11));
  const KeyPair client = generate_keypair();
  RefereeDispute referee(referee_key, open_envelope(opening(client, honest, cheater)));
  Parties sides(referee_key, honest, cheater);
  std::deque<RefereeDispute::Outgoing> queue;
  for (auto& o : referee.start(GameTime{}).send) queue.push_back(std::move(o));
  std::array<std::vector<std::vector<uint8_t>>, 2> openings;  // each party's opening, held back
  std::optional<std::vector<uint8_t>> verdict;
  size_t refused = 0;
  const auto deliver = [&](int p, const std::vector<uint8_t>& answer) {
    RefereeDispute::Step step =
        referee.on_envelope(p, open_envelope(answer, SignatureCheck::DeferTensorChunks), GameTime{});
    for (auto& next : step.send) queue.push_back(std::move(next));
    refused += !step.refused.empty() || step.rejected;
  };
  while (!queue.empty()) {
    const RefereeDispute::Outgoing o = std::move(queue.front());
    queue.pop_front();
    const Envelope env = open_envelope(o.envelope);
    if (env.kind == MessageKind::Verdict) {
      verdict = o.envelope;
    } else if (env.kind == MessageKind::Query && std::get<Query>(env.body).kind == QueryKind::OpenInputs) {
      openings[static_cast<size_t>(o.party)] = sides.answer(o.party, env);
    } else {
      for (const auto& a : sides.answer(o.party, env)) deliver(o.party, a);
    }
    if (queue.empty() && !openings[0].empty() && !openings[1].empty()) {
      REQUIRE(openings[1].size() >= 2);
      REQUIRE(open_envelope(openings[0][0]).kind == MessageKind::TensorChunk);
      deliver(0, openings[0][0]);
      for (size_t i = 1; i < openings[1].size(); ++i) {
        CHECK_FALSE(referee.done());             // every chunk is needed
        if (i == 1) deliver(0, openings[0][0]);  // again: redundant, not a replay to refuse
        deliver(1, openings[1][i]);
      }
      CHECK(referee.done());
      openings = {};
    }
  }
  REQUIRE(verdict);
  CHECK(refused == 0);
  const Verdict v = verify_verdict(*verdict, referee_key.public_key);
  CHECK(v.reason == VerdictReason::WrongOutput);
  CHECK(v.winners == std::vector<uint8_t>{0});
  CHECK(v.node == 11);
}

TEST_CASE("referee: refuses an opening whose claims do not match the job") {
  const KeyPair referee_key = generate_keypair();
  const Provider honest(Fault{}), cheater(corrupt(5, 2));
  const KeyPair client = generate_keypair();
  // Same key on both claims.
  Provider twin(Fault{});
  twin.key = honest.key;
  twin.signed_claim = seal(honest.key, honest.result.job_id, 2,
                           Claim{cheater.result.job_id, 30, cheater.result.trajectory_root,
                                 cheater.result.final_state_hash, "ws://twin.invalid/"});
  CHECK_THROWS_WITH_AS(RefereeDispute(referee_key, open_envelope(opening(client, honest, twin))),
                       "dispute: both claims are signed by the same key", ProtocolError);
}

TEST_CASE(
    "referee: rounding-log disputes end in verifiable bad_rounding_log and both_valid verdicts that replay") {
  const KeyPair referee_key = generate_keypair();
  const std::string job = "scenarios/jobs/short_mlp_rlog.toml";
  const auto fault = [](RoundingFault kind, int64_t step, int64_t node, int64_t also_corrupt) {
    Fault f;
    f.rounding = kind;
    f.rounding_step = step;
    f.rounding_node = node;
    if (also_corrupt >= 0) {
      f.step = step;
      f.node = also_corrupt;
      f.delta = 1e-3f;
    }
    return f;
  };
  const Provider honest(Fault{}, "ws://provider.invalid/", job);
  struct Case {
    Fault f;
    VerdictReason reason;
    uint64_t step, node;
  };
  for (const Case& c : {Case{fault(RoundingFault::Forge, 9, 13, -1), VerdictReason::BadRoundingLog, 9, 13},
                        Case{fault(RoundingFault::Omit, 1, 2, 16), VerdictReason::BothValid, 1, 2}}) {
    CAPTURE(reason_name(c.reason));
    const Provider cheater(c.f, "ws://provider.invalid/", job);
    const KeyPair client = generate_keypair();
    RefereeDispute referee(referee_key, open_envelope(opening(client, honest, cheater)));
    Parties sides(referee_key, honest, cheater);
    const LocalRun local = play_local(referee, sides.local());
    const std::vector<DisputeInput>& recorded = local.inputs;
    std::vector<std::string> events;
    for (const DisputeEvent& e : local.events) events.push_back(e.text);
    CHECK(local.refused.empty());
    REQUIRE(referee.done());
    const Verdict v = verify_verdict(local.verdict, referee_key.public_key);  // what `tribunal verify` checks
    CHECK(v.reason == c.reason);
    CHECK(v.step == c.step);
    CHECK(v.node == c.node);
    if (c.reason == VerdictReason::BothValid) {
      CHECK(v.winners.empty());
      CHECK(v.losers.empty());
    } else {
      CHECK(v.winners == std::vector<uint8_t>{0});
      CHECK(v.losers == std::vector<uint8_t>{1});
    }
    CHECK(std::any_of(events.begin(), events.end(), [](const std::string& e) {
      return e.find("open each party's rounding log of node") != std::string::npos;
    }));
    // The durable referee's record replays to the same signed verdict (re-execution runs again).
    auto again = RefereeDispute::replay(referee_key, recorded);
    REQUIRE(again->done());
    CHECK(again->verdict_envelope() == local.verdict);
    // An undecided verdict must have no winners: one with a winner does not verify.
    if (c.reason == VerdictReason::BothValid) {
      Verdict forged = v;
      forged.winners = {0};
      CHECK_THROWS_AS(verify_verdict(seal(referee_key, v.dispute_id, 99, forged), referee_key.public_key),
                      ProtocolError);
    }
  }
}
